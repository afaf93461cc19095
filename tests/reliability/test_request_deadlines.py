"""Request deadlines against the real broker and the job as its own driver process: a request
the job reaches at or after its deadline (message timestamp + ``timeoutMs``, or the job's
``request_timeout_ms``) is answered REQUEST_TIMED_OUT (7) and is in neither the sink nor the
offsets topic; a micro-batch SIGKILLed mid-way and replayed long after decides exactly as it
did (against its timestamp in Spark's offset log, not the wall clock); and commits and deletes
a client gave up on while the job was down are not applied when it returns."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from connectors.client import (
    CommitTimeoutError,
    DeleteGroupFailedError,
    OffsetCommitClient,
)
from state.coordinator.deadlines import timed_out_reason
from state.coordinator.errors import ErrorCode
from state.coordinator.model import GroupMetadataKey, OffsetCommitKey, TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    DeleteGroupsRequest,
    OffsetCommitRequest,
    PartitionCommit,
    Request,
)
from state.formats.request_codec import encode_request
from streaming.config import JobConfig
from tests.fixtures.job import prepare_topics
from tests.reliability.load import driver
from tests.reliability.support import (
    Message,
    produce,
    reliability_config,
    responses_by_id,
    sink_offsets,
    wait_until,
)
from tests.streaming.helpers import read_all, read_offsets_topic

pytestmark = pytest.mark.slow

#: A cold driver (JVM, Spark, Kafka source, RocksDB) answers its first commit within this, also
#: on a machine busy with other Spark jobs.
START_TIMEOUT_S = 600.0
#: The job's default for requests without ``timeoutMs``: short, so that the test can outwait it.
JOB_REQUEST_TIMEOUT_MS = 8_000
#: ``timeoutMs`` of the request whose batch is killed: its deadline falls after the batch was
#: planned and before the batch is replayed.
REPLAYED_TIMEOUT_MS = 15_000
TP = TopicPartition("orders", 0)


def groups_on_one_shard(config: JobConfig, count: int, prefix: str) -> list[str]:
    """``count`` group ids on one ingest partition: their requests share a produce batch and so
    one micro-batch."""
    shard = partition_for(f"{prefix}-0", config.partitions)
    names = (f"{prefix}-{i}" for i in range(10_000))
    return [g for g in names if partition_for(g, config.partitions) == shard][:count]


def commit_request(rid: str, group: str, offset: int, timeout_ms: int | None) -> Request:
    commit = PartitionCommit(TP.topic, TP.partition, offset)
    return OffsetCommitRequest(rid, group, (commit,), timeout_ms=timeout_ms)


def produce_requests(config: JobConfig, requests: list[Request]) -> dict[str, tuple[int, int]]:
    """Produce ``requests`` in one go; each one's (ingest partition, offset) by request id."""
    messages = [
        Message(
            partition_for(r.group_id, config.ingest_topic_partitions),
            encode_request(r),
            r.group_id.encode(),
        )
        for r in requests
    ]
    positions = produce(config.bootstrap_servers, config.ingest_topic, messages)
    return {r.request_id: pos for r, pos in zip(requests, positions, strict=True)}


def message_timestamps(config: JobConfig) -> dict[tuple[int, int], int]:
    """Every ingest message's timestamp (the broker's append time) by (partition, offset)."""
    records = read_all(config.bootstrap_servers, config.ingest_topic)
    return {(r.partition, r.offset): r.timestamp for r in records}


def answers(config: JobConfig, ids: set[str], alive: Any, timeout_s: float) -> dict[str, Any]:
    """Wait until every request of ``ids`` is answered; their responses."""
    wait_until(
        lambda: ids <= responses_by_id(config.bootstrap_servers, config.responses_topic).keys(),
        timeout_s,
        f"answers to {sorted(ids)}",
        alive,
        interval_s=1,
    )
    got = responses_by_id(config.bootstrap_servers, config.responses_topic)
    return {i: got[i] for i in ids}


def offsets_topic_groups(config: JobConfig) -> dict[str, list[Any]]:
    """Every offsets-topic record (tombstones included), by group."""
    by_group: dict[str, list[Any]] = {}
    for _, record in read_offsets_topic(config.bootstrap_servers, config.offsets_topic):
        by_group.setdefault(record.key.group, []).append(record)
    return by_group


@contextmanager
def sink_locked(sink_url: str) -> Iterator[None]:
    """Hold the SQLite sink's write lock: the job's micro-batch then waits in its sink write
    (retrying, up to ``sink_write_timeout_s``), planned but not committed."""
    connection = sqlite3.connect(sink_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        connection.execute("BEGIN EXCLUSIVE")
        yield
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def planned_batch(
    checkpoint: Path, position: tuple[int, int], topic: str
) -> tuple[int, int] | None:
    """(batch id, batch timestamp) of the micro-batch Spark planned over ingest ``position``
    (partition, offset) and has not committed, from its offset log; None if there is none."""
    partition, offset = position
    for path in sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name)):
        lines = path.read_text().splitlines()
        if len(lines) < 3 or (checkpoint / "commits" / path.name).exists():
            continue
        ends = json.loads(lines[2]).get(topic, {})
        if int(ends.get(str(partition), -1)) > offset:
            return int(path.name), int(json.loads(lines[1])["batchTimestampMs"])
    return None


def test_requests_past_their_deadline_are_refused_also_after_a_kill_and_replay(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    config = reliability_config(
        kafka_bootstrap, tmp_path, request_timeout_ms=JOB_REQUEST_TIMEOUT_MS
    )
    prepare_topics(config)
    kept, past, replayed, killed_past = groups_on_one_shard(config, 4, "deadline")
    client = OffsetCommitClient(config)
    with driver(config, tmp_path / "driver.log") as job, client:
        job.start()
        client.commit(kept, {TP: 1}, timeout_s=START_TIMEOUT_S)

        # 1. Produced with a deadline already past (timeoutMs 0): a commit and a group delete.
        produce_requests(
            config,
            [
                commit_request("past-commit", past, 5, 0),
                DeleteGroupsRequest("past-delete", kept, 0),
            ],
        )
        got = answers(config, {"past-commit", "past-delete"}, job.check_alive, 120)
        assert {i: r["errorCode"] for i, r in got.items()} == dict.fromkeys(got, 7)
        assert all("request timed out: its deadline" in r["errorMessage"] for r in got.values())

        # 2. A batch planned, then the driver SIGKILLed before it commits (its sink write is
        # held); replayed only after the deadline of the request it applies has passed.
        with sink_locked(config.sink_url):
            positions = produce_requests(
                config,
                [
                    commit_request("killed-past", killed_past, 7, 0),
                    commit_request("replayed", replayed, 9, REPLAYED_TIMEOUT_MS),
                ],
            )
            found: dict[str, tuple[int, int]] = {}

            def planned() -> bool:
                batch = planned_batch(
                    Path(config.checkpoint_location), positions["replayed"], config.ingest_topic
                )
                if batch is not None:
                    found["batch"] = batch
                return batch is not None

            wait_until(planned, 60, "the batch planned over both requests", job.check_alive, 0.1)
            time.sleep(1.0)  # let the state function run: the kill then lands in the writer
            job.kill()
        batch_id, batch_ms = found["batch"]
        stamps = message_timestamps(config)
        replayed_deadline = stamps[positions["replayed"]] + REPLAYED_TIMEOUT_MS
        killed_past_deadline = stamps[positions["killed-past"]]
        assert killed_past_deadline <= batch_ms < replayed_deadline

        # 3. While the job is down: a commit and a group delete the client gives up on, and a
        # request without timeoutMs (the job's default applies).
        with pytest.raises(CommitTimeoutError, match="it will not be applied") as commit_error:
            client.commit(past, {TP: 11}, timeout_s=3)
        with pytest.raises(DeleteGroupFailedError, match="it will not be applied") as delete_error:
            client.delete_group(kept, timeout_s=3)
        assert commit_error.value.will_not_be_applied and delete_error.value.will_not_be_applied
        assert commit_error.value.error_code == delete_error.value.error_code == 7
        positions |= produce_requests(config, [commit_request("default-timeout", past, 13, None)])
        default_deadline = message_timestamps(config)[positions["default-timeout"]] + (
            JOB_REQUEST_TIMEOUT_MS
        )
        while time.time() * 1000 <= max(replayed_deadline, default_deadline) + 1_000:
            time.sleep(0.5)

        # 4. The job returns: it replays the killed batch first, at that batch's timestamp.
        restarted_ms = time.time() * 1000
        job.start()
        late_ids = {*commit_error.value.request_ids, *delete_error.value.request_ids}
        ids = {"killed-past", "replayed", "default-timeout", *late_ids}
        got = answers(config, ids, job.check_alive, START_TIMEOUT_S)
        client.commit(kept, {TP: 2}, timeout_s=60)  # a fresh commit still goes through
        job.check_alive()

    assert restarted_ms > replayed_deadline  # the wall clock at the replay was past it
    assert got["replayed"]["errorCode"] == 0, got["replayed"]
    assert got["killed-past"]["errorCode"] == ErrorCode.REQUEST_TIMED_OUT
    # The reason names the deadline and the batch time from the offset log: decided as planned.
    assert got["killed-past"]["errorMessage"] == timed_out_reason(killed_past_deadline, batch_ms)
    # The killed batch was replayed and committed under its own id, with its offset log intact.
    assert (Path(config.checkpoint_location) / "commits" / str(batch_id)).exists()
    offset_log = (Path(config.checkpoint_location) / "offsets" / str(batch_id)).read_text()
    assert json.loads(offset_log.splitlines()[1])["batchTimestampMs"] == batch_ms
    for request_id in ("default-timeout", *late_ids):
        assert got[request_id]["errorCode"] == ErrorCode.REQUEST_TIMED_OUT, got[request_id]

    assert sink_offsets(config.sink_url) == {
        (kept, TP.topic, TP.partition): 2,
        (replayed, TP.topic, TP.partition): 9,
    }
    records = offsets_topic_groups(config)
    assert set(records) == {kept, replayed}, sorted(records)
    # The group delete refused twice wrote no tombstone: every record of the group is a commit.
    assert all(isinstance(r.key, OffsetCommitKey) and r.value is not None for r in records[kept]), (
        records[kept]
    )
    assert not any(isinstance(r.key, GroupMetadataKey) for r in records[kept])
    print(
        f"\nrequest deadlines: batch {batch_id} planned at {batch_ms}, replayed "
        f"{restarted_ms - replayed_deadline:.0f} ms after the deadline of the request it "
        f"applied; {len(ids) - 1 + 2} requests past their deadline refused, none applied"
    )
