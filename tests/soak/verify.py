"""The end of a soak: nothing lost.

- every request answered: each raw request's answer was read, successful or REQUEST_TIMED_OUT
  (reached after its deadline, nothing applied; the model leaves it out), never another error, never
  two different answers to one message (a request answered twice differently is looked up in the
  ingest log: two copies of it, from a producer that sent it again, are two requests, each answered
  on its own as Kafka's coordinator would); each commit-client call succeeded, timed out (the
  closing commits settle its group) or was refused with nothing sent (no broker: failed, not lost);
  no request was given up by the producer (whose queue outlasts a Kafka outage: what waited there
  arrives late and is answered REQUEST_TIMED_OUT);
- the job's sink equals the model (the last commit per key in ingest log order), key for key;
- the compacted offsets topic equals the model (read partition by partition through librdkafka,
  ``connectors.kafka.offsets_log``, and decoded by ``state/``: millions of records after an hour);
- the mirror's tables equal Kafka's own OffsetFetch of every consumer group that committed to the
  cluster's coordinator;
- ``serve`` still answers ``/metrics``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

from connectors.kafka.offsets_log import read_partition_chunks
from state.coordinator.model import OffsetCommitKey
from state.formats.records import decode_record
from tests.reliability.support import OffsetState, diff, wait_for_sink, wait_until
from tests.soak.load import native_group
from tests.soak.services import Services
from tests.streaming.helpers import kafka_offsets, sink_offsets


def offsets_topic_state(bootstrap: str, topic: str, partitions: int) -> tuple[OffsetState, int]:
    """What compaction leaves of the offsets topic as committed offsets, and how many records
    were read."""
    latest: OffsetState = {}
    records = 0
    for partition in range(partitions):
        for keys, values in read_partition_chunks(bootstrap, {}, topic, partition, 900.0):
            for key, value in zip(keys.to_pylist(), values.to_pylist(), strict=True):
                records += 1
                record = decode_record(key, value)
                if not isinstance(record.key, OffsetCommitKey):
                    continue
                k = (record.key.group, record.key.topic, record.key.partition)
                if record.value is None:
                    latest.pop(k, None)
                else:
                    latest[k] = record.value.offset
    return latest, records


def copies_in_log(
    bootstrap: str, topic: str, partitions: int, request_ids: Collection[str]
) -> dict[str, int]:
    """How many messages of ``topic`` carry each of ``request_ids``, read whole to its end."""
    wanted = {f'"requestId":"{rid}"'.encode(): rid for rid in request_ids}
    found = dict.fromkeys(request_ids, 0)
    for partition in range(partitions if wanted else 0):
        for _keys, values in read_partition_chunks(bootstrap, {}, topic, partition, 600.0):
            for value in values.to_pylist():
                for needle, rid in wanted.items():
                    found[rid] += needle in (value or b"")
    return found


def verify(
    services: Services,
    final: dict[str, Any],
    native_groups: int,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every check above; ``problems`` lists each one that failed."""
    problems: list[str] = []
    result: dict[str, Any] = {}
    if final["unanswered"]:
        problems.append(
            f"{final['unanswered']} requests never answered: {final['unanswered_sample']}"
        )
    if final["conflicting_answers"]:
        ids = final["conflicting_ids"]
        config = services.config
        copies = copies_in_log(
            services.bootstrap, config.ingest_topic, config.ingest_topic_partitions, ids
        )
        result["answered_per_copy"] = {rid: n for rid, n in copies.items() if n > 1}
        answers = zip(ids, final["conflicting_answers"], strict=True)
        twice = [answer for rid, answer in answers if copies[rid] < 2]
        if twice:
            problems.append(f"requests answered differently twice: {twice}")
    if final["error_answer_count"]:
        problems.append(f"{final['error_answer_count']} error answers: {final['error_answers']}")
    if final["delivery_failure_count"]:
        problems.append(
            f"{final['delivery_failure_count']} requests not delivered: "
            f"{final['delivery_failures']}"
        )
    if final["client_failure_count"]:
        problems.append(
            f"{final['client_failure_count']} commit-client calls failed: "
            f"{final['client_failures']}"
        )
    model: OffsetState = final["model"]
    result["model_keys"] = len(model)

    started = time.monotonic()
    try:
        wait_for_sink(services.config.sink_url, model, services.job.check_alive, timeout_s=300)
        result["sink_equal"] = True
    except AssertionError as error:
        result["sink_equal"] = False
        problems.append(str(error)[:2000])
    echo(f"verify: sink vs model in {time.monotonic() - started:.1f} s")

    started = time.monotonic()
    in_topic, records = offsets_topic_state(
        services.bootstrap, services.config.offsets_topic, services.config.partitions
    )
    result["offsets_topic_records"] = records
    result["offsets_topic_equal"] = in_topic == model
    if in_topic != model:
        problems.append("offsets topic != model: " + diff(model, in_topic))
    echo(
        f"verify: offsets topic ({records:,} records) vs model "
        f"in {time.monotonic() - started:.1f} s"
    )

    started = time.monotonic()
    groups = [native_group(i) for i in range(native_groups)]
    expected = {g: kafka_offsets(services.bootstrap, g) for g in groups}
    seen: dict[str, Any] = {}

    def mirrored() -> bool:
        seen.update({g: sink_offsets(services.mirror_sink_url, g) for g in groups})
        return all(seen[g] == expected[g] for g in groups)

    try:
        wait_until(mirrored, 300, "the mirror equal to Kafka's OffsetFetch", interval_s=2)
        result["mirror_equal"] = True
    except AssertionError:
        result["mirror_equal"] = False
        problems.append(
            "mirror != Kafka's OffsetFetch: "
            + "; ".join(f"{g}: {diff(expected[g], seen.get(g) or {})}" for g in groups)
        )
    result["mirror_offsets"] = sum(len(v) for v in expected.values())
    echo(f"verify: mirror vs Kafka in {time.monotonic() - started:.1f} s")

    scrape = services.scrape_metrics()
    result["serve_answers"] = bool(scrape.get("ok"))
    if not scrape.get("ok"):
        problems.append(f"serve does not answer /metrics: {scrape}")
    result["problems"] = problems
    return result
