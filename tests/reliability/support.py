"""What the reliability tests share: a job configuration of their own, producing with log
positions, the reference model of the committed offsets, and reading the three places an
acknowledged commit must be found (responses topic, offsets topic, sink).

The reference model is deliberately simple: the committed offset of a (group, topic, partition)
is the one of the last accepted commit in ingest log order (rewinds included), Kafka's rule.
Every test compares the sink and the compacted offsets topic with it, key for key.
"""

from __future__ import annotations

import json
import re
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.client_async import KafkaClient
from kafka.protocol.fetch import FetchRequest
from kafka.record import MemoryRecords
from kafka.structs import TopicPartition

from connectors.sinks import open_sink
from state.coordinator.model import OffsetCommitKey
from streaming.config import JobConfig
from tests.fixtures.job import new_job_config
from tests.streaming.helpers import compacted, read_all, read_offsets_topic

#: (group, topic, partition) → committed offset.
OffsetState = dict[tuple[str, str, int], int]
#: How the tests read the offsets and responses topics: as the job's readers and clients do.
READ_COMMITTED = "read_committed"
#: Python logging's timestamp at the start of the driver's log lines.
_LOG_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def last_batch_id(sink_url: str) -> int:
    """The last micro-batch the job's sink recorded."""
    with open_sink(sink_url, read_only=True) as sink:
        return sink.status().last_batch_id


def reliability_config(
    bootstrap: str, folder: Path, sink_url: str | None = None, **overrides: Any
) -> JobConfig:
    """:func:`tests.fixtures.job.new_job_config` with topics named ``rel-*``."""
    return new_job_config(bootstrap, folder, sink_url, prefix="rel", **overrides)


@dataclass(frozen=True)
class Message:
    """One ingest message to produce: its partition, key and value (value may be None)."""

    partition: int
    value: bytes | None
    key: bytes | None = b"k"


def producer(bootstrap: str, **options: Any) -> KafkaProducer:
    """An acks=all producer that keeps a partition's messages in send order across retries."""
    settings: dict[str, Any] = {
        "bootstrap_servers": bootstrap.split(","),
        "acks": "all",
        "retries": 10,
        "max_in_flight_requests_per_connection": 1,
        "max_request_size": 1_048_576,
        "linger_ms": 5,
    }
    settings.update(options)
    return KafkaProducer(**settings)


def produce(bootstrap: str, topic: str, messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Produce ``messages`` in order; return each one's (partition, offset) in the log."""
    kafka = producer(bootstrap)
    try:
        futures = [
            kafka.send(topic, key=m.key, value=m.value, partition=m.partition) for m in messages
        ]
        kafka.flush(timeout=120)
        return [(md.partition, md.offset) for md in (f.get(timeout=60) for f in futures)]
    finally:
        kafka.close()


@dataclass
class CommitModel:
    """Committed offsets as they must be: the last accepted commit per key in log order."""

    offsets: OffsetState = field(default_factory=dict)

    @classmethod
    def from_log(
        cls, commits: Iterable[tuple[tuple[int, int], Sequence[tuple[str, str, int, int]]]]
    ) -> CommitModel:
        """Build from ((ingest partition, ingest offset), [(group, topic, partition, offset)])
        pairs in any order: they are replayed in log order (partition, then offset)."""
        model = cls()
        for _, partitions in sorted(commits, key=lambda item: item[0]):
            for group, topic, partition, offset in partitions:
                model.offsets[(group, topic, partition)] = offset
        return model


def sink_offsets(sink_url: str) -> OffsetState:
    """Every committed offset in the sink, read through the sink's own reader API."""
    with open_sink(sink_url, read_only=True) as sink:
        return {
            (o.group_id, o.topic, o.partition): o.offset
            for listing in sink.list_groups()
            for o in sink.fetch_offsets(listing.group_id)
        }


def wait_for_sink(
    sink_url: str,
    expected: OffsetState,
    alive: Callable[[], None] | None = None,
    timeout_s: float = 30.0,
) -> OffsetState:
    """Wait until the sink holds exactly ``expected`` (the last batch may still be committing
    after its responses); return what it holds, or fail with how the two differ."""
    seen: dict[str, OffsetState] = {}

    def matches() -> bool:
        seen["sink"] = sink_offsets(sink_url)
        return seen["sink"] == expected

    try:
        wait_until(matches, timeout_s, "sink equal to the model", alive)
    except AssertionError:
        raise AssertionError("sink != model: " + diff(expected, seen["sink"])) from None
    return seen["sink"]


def offsets_topic_offsets(bootstrap: str, topic: str, deadline_s: float = 30) -> OffsetState:
    """What compaction leaves of the offsets topic's committed records, as committed offsets
    (read within ``deadline_s``)."""
    latest = compacted(read_offsets_topic(bootstrap, topic, READ_COMMITTED, deadline_s))
    return {
        (key.group, key.topic, key.partition): value.offset
        for key, value in latest.items()
        if isinstance(key, OffsetCommitKey)
    }


def responses_by_id(bootstrap: str, topic: str) -> dict[str, dict[str, Any]]:
    """Committed responses by request id, as a client sees them (request ids of these tests
    are UTF-8)."""
    return {
        r.key.decode("utf-8"): json.loads(r.value)
        for r in read_all(bootstrap, topic, READ_COMMITTED)
        if r.key is not None
    }


@dataclass(frozen=True)
class ProducedBatch:
    """A record batch as the partition's log holds it: which producer wrote it, in which
    epoch, and whether it is a transaction's data or a commit/abort marker."""

    partition: int
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    #: A control batch's marker, "COMMIT" or "ABORT"; None for data.
    marker: str | None


def produced_batches(bootstrap: str, topic: str) -> list[ProducedBatch]:
    """Every batch of ``topic``'s partitions, aborted and open transactions included, read
    with raw Fetch requests (consumers hide the batch headers that identify the producer)."""
    client = KafkaClient(bootstrap_servers=bootstrap.split(","))
    try:
        client.add_topic(topic)

        def known() -> bool:
            client.poll(future=client.cluster.request_update(), timeout_ms=1000)
            return bool(client.cluster.partitions_for_topic(topic))

        wait_until(known, 30, f"metadata of {topic}", interval_s=0.1)
        partitions = sorted(client.cluster.partitions_for_topic(topic) or ())
        starts = log_offsets(bootstrap, topic, beginning=True)
        return [
            batch
            for partition in partitions
            for batch in _fetch_batches(client, topic, partition, starts[partition])
        ]
    finally:
        client.close()


def _fetch_batches(
    client: KafkaClient, topic: str, partition: int, offset: int
) -> Iterator[ProducedBatch]:
    leader = client.cluster.leader_for_partition(TopicPartition(topic, partition))
    while True:
        # Fetch v4, read_uncommitted (isolation 0): every batch up to the high watermark.
        request = FetchRequest[4](-1, 100, 1, 4 << 20, 0, [(topic, [(partition, offset, 4 << 20)])])
        wait_until(lambda: _connected(client, leader), 30, f"a connection to node {leader}")
        future = client.send(leader, request)
        client.poll(future=future, timeout_ms=30_000)
        ((_, ((_, error, high_watermark, *_, data),)),) = future.value.topics
        if error:
            raise AssertionError(f"Fetch {topic}-{partition}@{offset}: error code {error}")
        records = MemoryRecords(data)
        while (batch := records.next_batch()) is not None:
            yield ProducedBatch(
                partition,
                batch.base_offset,
                batch.last_offset,
                batch.producer_id,
                batch.producer_epoch,
                batch.is_transactional,
                _marker(batch) if batch.is_control_batch else None,
            )
            offset = batch.next_offset
        if offset >= high_watermark or not data:
            return


def _marker(batch: Any) -> str:
    """A control batch's marker: its record's key is (version int16, type int16: 0 abort)."""
    (record,) = list(batch)
    _, kind = struct.unpack(">hh", bytes(record.key)[:4])
    return "COMMIT" if kind == 1 else "ABORT"


def _connected(client: KafkaClient, node: int) -> bool:
    if client.ready(node):
        return True
    client.poll(timeout_ms=100)  # the connection progresses while the client polls
    return False


def log_offsets(bootstrap: str, topic: str, beginning: bool = False) -> dict[int, int]:
    """Partition → its log end (high watermark), or its log start with ``beginning``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","))
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        found = consumer.beginning_offsets(tps) if beginning else consumer.end_offsets(tps)
        return {tp.partition: offset for tp, offset in found.items()}
    finally:
        consumer.close()


def first_answer_after(bootstrap: str, topic: str, after_s: float) -> float | None:
    """CreateTime (epoch s) of the earliest committed answer produced after ``after_s``."""
    times = [
        r.timestamp / 1000
        for r in read_all(bootstrap, topic, READ_COMMITTED)
        if r.timestamp / 1000 > after_s
    ]
    return min(times) if times else None


def log_line_time(line: str) -> float:
    """Epoch seconds of a driver's log line, from Python logging's timestamp at its start."""
    match = _LOG_STAMP.match(line)
    if match is None:
        raise ValueError(f"no timestamp at the start of {line!r}")
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def dead_letters(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in read_all(bootstrap, topic)]


def wait_until(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    alive: Callable[[], None] | None = None,
    interval_s: float = 0.5,
) -> None:
    """Poll ``condition`` until it holds; ``alive`` raises if the job under test died."""
    deadline = time.monotonic() + timeout_s
    while True:
        if alive is not None:
            alive()
        if condition():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not reached within {timeout_s:.0f} s")
        time.sleep(interval_s)


def diff(expected: Mapping[Any, Any], actual: Mapping[Any, Any], limit: int = 10) -> str:
    """A short description of how two mappings differ (missing, unexpected, different)."""
    missing = [k for k in expected if k not in actual]
    extra = [k for k in actual if k not in expected]
    changed = [
        (k, expected[k], actual[k]) for k in expected if k in actual and expected[k] != actual[k]
    ]
    return (
        f"{len(missing)} missing {missing[:limit]}; {len(extra)} unexpected {extra[:limit]}; "
        f"{len(changed)} different (key, expected, actual) {changed[:limit]}"
    )


class QueryWatch:
    """``alive`` for an in-process job: raises if its query ended."""

    def __init__(self, job: Any) -> None:
        self.job = job

    def __call__(self) -> None:
        query = self.job.query
        if query is None or not query.isActive:
            raise AssertionError(f"the query died: {query and query.exception()}")


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> the node leading it now, for ``topic``."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        (described,) = admin.describe_topics([topic])
        return {p["partition"]: p["leader"] for p in described["partitions"]}
    finally:
        admin.close()
