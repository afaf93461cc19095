"""The streaming job end to end: producer → real broker → Spark's Kafka source → shard state →
offsets topic (Kafka's binary records) + sink (SQLite, PostgreSQL) + responses topic."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from connectors.client import OffsetCommitClient
from connectors.kafka.admin import KafkaAdmin
from connectors.sinks import Sink, open_sink
from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetAndMetadata, OffsetCommitKey, TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    DeleteGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
)
from state.formats.request_codec import encode_request
from streaming.config import JobConfig
from streaming.spark.checkpoint_files import FILE_MANAGER_KEY, LOCAL_FILE_MANAGER
from streaming.spark.job import OffsetsJob
from streaming.spark.topics import ensure_topics
from tests.fixtures.job import new_job_config
from tests.streaming.helpers import (
    compacted,
    produce_raw,
    produce_requests,
    read_all,
    read_offsets_topic,
    read_responses,
    wait_for,
)

pytestmark = pytest.mark.slow

JobFactory = Callable[..., OffsetsJob]


@pytest.fixture
def job_config(tmp_path: Path, kafka_bootstrap: str) -> JobConfig:
    return new_job_config(kafka_bootstrap, tmp_path)


@pytest.fixture
def start_job(spark: Any) -> Iterator[JobFactory]:
    jobs: list[OffsetsJob] = []

    def start(config: JobConfig, *args: Any) -> OffsetsJob:
        job = OffsetsJob.create(config, spark)
        jobs.append(job)
        job.start(*args)
        return job

    yield start
    for job in jobs:
        job.stop()
        job.sink.close()


#: The default (one state per state partition: two of two offsets-topic partitions each on 2
#: cores), and one state per offsets-topic partition (``JobConfig.state_shards``).
STATE_SHARDS = pytest.mark.parametrize("state_shards", [None, 4])


def commit(
    request_id: str, group: str, *parts: tuple[str, int, int], **kw: Any
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        request_id=request_id,
        group_id=group,
        partitions=tuple(PartitionCommit(t, p, o, **kw) for t, p, o in parts),
    )


def sink_offsets(config: JobConfig, group: str) -> dict[tuple[str, int], int]:
    with open_sink(config.sink_url, read_only=True) as sink:
        return {(o.topic, o.partition): o.offset for o in sink.fetch_offsets(group)}


def wait_for_responses(config: JobConfig, request_ids: set[str]) -> dict[str, dict[str, Any]]:
    return wait_for(
        lambda: read_responses(config.bootstrap_servers, config.responses_topic),
        lambda got: request_ids <= set(got),
    )


@STATE_SHARDS
def test_commits_with_rewinds_land_as_latest_in_sink_and_offsets_topic(
    job_config: JobConfig, start_job: JobFactory, state_shards: int | None
) -> None:
    job_config = replace(job_config, state_shards=state_shards)
    start_job(job_config)
    requests = [
        commit("r1", "payments", ("orders", 0, 10), ("orders", 1, 20)),
        commit("r2", "payments", ("orders", 0, 15)),
        # A rewind: Kafka honours a lower offset committed later.
        commit("r3", "payments", ("orders", 1, 5)),
        commit("r4", "billing", ("invoices", 3, 7)),
    ]
    produce_requests(job_config.bootstrap_servers, job_config.ingest_topic, requests)

    wait_for_responses(job_config, {"r1", "r2", "r3", "r4"})
    assert sink_offsets(job_config, "payments") == {("orders", 0): 15, ("orders", 1): 5}
    assert sink_offsets(job_config, "billing") == {("invoices", 3): 7}
    # Every partition commit counts, also those a later one in the same batch overwrote.
    with open_sink(job_config.sink_url, read_only=True) as sink:
        assert sink.group_commits() == {"payments": 4, "billing": 1}

    records = read_offsets_topic(job_config.bootstrap_servers, job_config.offsets_topic)
    latest = compacted(records)
    assert {k: v.offset for k, v in latest.items()} == {
        OffsetCommitKey("payments", "orders", 0): 15,
        OffsetCommitKey("payments", "orders", 1): 5,
        OffsetCommitKey("billing", "invoices", 3): 7,
    }
    # Each record sits at the partition Kafka would use for its group.
    assert all(p == partition_for(r.key.group, 4) for p, r in records)
    assert all(isinstance(v, OffsetAndMetadata) for v in latest.values())


def test_oversized_metadata_is_rejected_for_its_partition_only(
    job_config: JobConfig, start_job: JobFactory
) -> None:
    start_job(job_config)
    request = OffsetCommitRequest(
        request_id="big",
        group_id="g",
        partitions=(
            PartitionCommit("t", 0, 1, metadata="x" * 5000),
            PartitionCommit("t", 1, 2, metadata="fine"),
        ),
    )
    produce_requests(job_config.bootstrap_servers, job_config.ingest_topic, [request])
    response = wait_for_responses(job_config, {"big"})["big"]
    codes = {(p["topic"], p["partitionIndex"]): p["errorCode"] for p in response["partitions"]}
    assert codes == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): 0}
    assert sink_offsets(job_config, "g") == {("t", 1): 2}
    with open_sink(job_config.sink_url, read_only=True) as sink:
        assert sink.group_commits() == {"g": 1}  # the refused partition is no commit


def test_short_retention_expires_offsets_into_tombstones(
    job_config: JobConfig, start_job: JobFactory
) -> None:
    # Expiry runs when a shard is woken: by its own commits or by the job's expiry ticks.
    job_config = replace(job_config, retention_check_interval_ms=1000)
    start_job(job_config)
    requests = [
        OffsetCommitRequest(
            "short", "expiring", (PartitionCommit("t", 0, 3),), retention_time_ms=1500
        ),
        commit("long", "kept", ("t", 0, 4)),
    ]
    produce_requests(job_config.bootstrap_servers, job_config.ingest_topic, requests)
    wait_for_responses(job_config, {"short", "long"})
    # An expiry tick wakes the shard after the deadline: the row leaves the sink...
    wait_for(lambda: sink_offsets(job_config, "expiring"), lambda got: got == {}, timeout_s=60)
    assert sink_offsets(job_config, "kept") == {("t", 0): 4}
    # ...and the offsets topic holds a tombstone after the commit.
    records = read_offsets_topic(job_config.bootstrap_servers, job_config.offsets_topic)
    history = [r.value for _, r in records if r.key == OffsetCommitKey("expiring", "t", 0)]
    assert history[0] is not None and history[0].expire_timestamp_ms is not None
    assert history[-1] is None


def test_offset_delete_and_group_delete_write_tombstones(
    job_config: JobConfig, start_job: JobFactory
) -> None:
    start_job(job_config)
    produce_requests(
        job_config.bootstrap_servers,
        job_config.ingest_topic,
        [commit("c1", "g1", ("t", 0, 1), ("t", 1, 2)), commit("c2", "g2", ("t", 0, 9))],
    )
    wait_for_responses(job_config, {"c1", "c2"})
    produce_requests(
        job_config.bootstrap_servers,
        job_config.ingest_topic,
        [
            OffsetDeleteRequest("d1", "g1", (TopicPartition("t", 0),)),
            DeleteGroupsRequest("d2", "g2"),
            DeleteGroupsRequest("d3", "never-existed"),
        ],
    )
    responses = wait_for_responses(job_config, {"d1", "d2", "d3"})
    assert responses["d1"]["errorCode"] == 0
    assert responses["d2"]["errorCode"] == 0
    assert responses["d3"]["errorCode"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert sink_offsets(job_config, "g1") == {("t", 1): 2}
    assert sink_offsets(job_config, "g2") == {}
    latest = compacted(read_offsets_topic(job_config.bootstrap_servers, job_config.offsets_topic))
    assert set(latest) == {OffsetCommitKey("g1", "t", 1)}


def test_malformed_input_is_answered_or_dead_lettered_and_the_query_keeps_running(
    job_config: JobConfig, start_job: JobFactory
) -> None:
    job = start_job(job_config)
    # On whichever partition: a decode error is answered with its own code wherever it lands.
    produce_raw(
        job_config.bootstrap_servers,
        job_config.ingest_topic,
        [
            (0, b"not json"),
            (1, None),
            (
                0,
                b'{"version": 1, "api": "OffsetCommit", "requestId": "typed", "groupId": "g",'
                b' "topics": [{"name": "t", "partitions": [{"partitionIndex": "zero",'
                b' "committedOffset": 1}]}]}',
            ),
            (1, b'{"version": 99, "api": "OffsetCommit", "requestId": "future", "groupId": "g"}'),
        ],
    )
    produce_requests(
        job_config.bootstrap_servers, job_config.ingest_topic, [commit("ok", "g", ("t", 0, 5))]
    )
    responses = wait_for_responses(job_config, {"typed", "future", "ok"})
    assert responses["typed"]["errorCode"] == ErrorCode.INVALID_REQUEST
    assert "partitionIndex" in responses["typed"]["errorMessage"]
    assert responses["future"]["errorCode"] == ErrorCode.UNSUPPORTED_VERSION
    assert responses["ok"]["errorCode"] == 0
    dead = wait_for(
        lambda: read_all(job_config.bootstrap_servers, job_config.dead_letter_topic),
        lambda got: len(got) >= 2,
    )
    assert len(dead) == 2
    assert sink_offsets(job_config, "g") == {("t", 0): 5}
    assert job.query is not None and job.query.isActive


def answer_codes(response: dict[str, Any]) -> set[int]:
    """The error codes of a response: its partitions', or its own when it has none."""
    codes = {p["errorCode"] for p in response.get("partitions") or []}
    return codes or {response["errorCode"]}


@STATE_SHARDS
def test_requests_off_their_groups_partition_are_answered_not_coordinator(
    job_config: JobConfig, start_job: JobFactory, state_shards: int | None
) -> None:
    """4 shards read from 2 ingest partitions, each shard keyed by the message key (the group
    id): a request on another partition than ``partition_for(group, 2)``, or keyed by another
    group than its own, is answered NOT_COORDINATOR and changes nothing."""
    job_config = replace(job_config, state_shards=state_shards)
    ingest = job_config.ingest_topic_partitions
    assert ingest == 2 < job_config.partitions
    start_job(job_config)
    group = "payments"
    shards = job_config.partitions
    # Another group's key, on another ingest partition too: with as many states as ingest
    # partitions a state reads one partition, whatever the keys.
    other = next(
        f"k{i}"
        for i in range(100)
        if partition_for(f"k{i}", shards) % ingest != partition_for(group, shards) % ingest
    )
    producer = KafkaProducer(bootstrap_servers=job_config.bootstrap_servers, acks="all")
    try:
        for request_id, key, partition in (
            ("wrong-partition", group, 1 - partition_for(group, ingest)),
            ("wrong-key", other, partition_for(other, ingest)),
        ):
            value = encode_request(commit(request_id, group, ("t", 0, 99)))
            producer.send(
                job_config.ingest_topic, key=key.encode(), value=value, partition=partition
            )
        producer.flush()
    finally:
        producer.close()
    produce_requests(
        job_config.bootstrap_servers, job_config.ingest_topic, [commit("right", group, ("t", 0, 2))]
    )
    responses = wait_for_responses(job_config, {"wrong-partition", "wrong-key", "right"})
    assert answer_codes(responses["wrong-partition"]) == {ErrorCode.NOT_COORDINATOR}
    assert answer_codes(responses["wrong-key"]) == {ErrorCode.NOT_COORDINATOR}
    assert answer_codes(responses["right"]) == {0}
    assert sink_offsets(job_config, group) == {("t", 0): 2}
    latest = compacted(read_offsets_topic(job_config.bootstrap_servers, job_config.offsets_topic))
    assert {k: v.offset for k, v in latest.items()} == {OffsetCommitKey(group, "t", 0): 2}


def test_an_existing_ingest_topic_of_one_partition_per_shard_keeps_working(
    job_config: JobConfig, start_job: JobFactory
) -> None:
    """The layout before ingest topics had fewer partitions than shards: a job configured for
    new topics of 2 partitions serves an existing one of 4 (one per shard) as it always did."""
    ensure_topics(replace(job_config, ingest_partitions=job_config.partitions))
    start_job(job_config)
    with KafkaAdmin(job_config.kafka_python_options()) as admin:
        assert admin.partition_counts([job_config.ingest_topic]) == {job_config.ingest_topic: 4}
    requests = [commit(f"r{g}", f"group-{g}", ("t", 0, g)) for g in range(8)]
    produce_requests(job_config.bootstrap_servers, job_config.ingest_topic, requests)
    responses = wait_for_responses(job_config, {r.request_id for r in requests})
    assert all(answer_codes(responses[r.request_id]) == {0} for r in requests)
    for g in range(8):
        assert sink_offsets(job_config, f"group-{g}") == {("t", 0): g}


def test_starting_until_the_first_batch_then_active_and_the_next_commit_is_answered_at_once(
    job_config: JobConfig, start_job: JobFactory
) -> None:
    """The sink says STARTING from start-up until the first micro-batch completed (the job runs
    it at once, waking every shard), then ACTIVE; a commit sent right after ACTIVE is answered
    at the steady state's pace, not a cold first batch's (8-17 s with the CLI before)."""

    def stored_status() -> str:
        with open_sink(job_config.sink_url, read_only=True) as sink:
            return sink.status().status

    seen: list[str] = []
    # Asked before each step of start-up; the last time just before the query starts.
    job = start_job(job_config, lambda: bool(seen.append(stored_status())))
    assert seen[-1] == "STARTING"
    job.wait_until(lambda: stored_status() == "ACTIVE", timeout_s=180)
    with open_sink(job_config.sink_url, read_only=True) as sink:
        assert sink.status().last_batch_id >= 0  # ACTIVE once a batch is written, not before
    with OffsetCommitClient(job_config, client_id="right-after-active") as client:
        started = time.monotonic()
        client.commit("first", {("t", 0): 1}, timeout_s=10)
        first_s = time.monotonic() - started
    assert sink_offsets(job_config, "first") == {("t", 0): 1}
    print(f"first commit after ACTIVE answered in {first_s:.1f} s")


@STATE_SHARDS
def test_restart_from_checkpoint_loses_nothing(
    job_config: JobConfig, start_job: JobFactory, state_shards: int | None
) -> None:
    job_config = replace(job_config, state_shards=state_shards)
    first = start_job(job_config)
    produce_requests(
        job_config.bootstrap_servers, job_config.ingest_topic, [commit("a", "g", ("t", 0, 1))]
    )
    wait_for_responses(job_config, {"a"})
    # The local checkpoint is written by the file manager that renames without child
    # processes (streaming.spark.checkpoint_files); the session's own setting is left as it was.
    assert first.query is not None
    stream = first.query._jsq.streamingQuery()
    assert stream.sparkSessionForStream().conf().get(FILE_MANAGER_KEY) == LOCAL_FILE_MANAGER
    assert first.spark.conf.get(FILE_MANAGER_KEY, None) is None
    first.stop()
    # Produced while the job is down: picked up from the checkpoint's ingest offsets.
    produce_requests(
        job_config.bootstrap_servers, job_config.ingest_topic, [commit("b", "g", ("t", 1, 2))]
    )
    start_job(job_config)
    produce_requests(
        job_config.bootstrap_servers, job_config.ingest_topic, [commit("c", "g", ("t", 0, 3))]
    )
    wait_for_responses(job_config, {"b", "c"})
    wait_for(lambda: sink_offsets(job_config, "g"), lambda got: got == {("t", 0): 3, ("t", 1): 2})


@pytest.mark.parametrize("writers", ["executors", "driver"])
def test_lost_checkpoint_rebuilds_state_from_the_offsets_topic(
    job_config: JobConfig,
    start_job: JobFactory,
    tmp_path: Path,
    writers: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Either the worker that rebuilt a shard writes it into the sink, or the driver does.
    job_config = replace(job_config, rebuild_sink_writes=writers)
    driver_snapshot_rows: list[int] = []
    write_snapshot = Sink.write_snapshot

    def counted(sink: Sink, batch_id: int, records: Any) -> bool:
        driver_snapshot_rows.append(records.num_rows)
        return write_snapshot(sink, batch_id, records)

    monkeypatch.setattr(Sink, "write_snapshot", counted)  # the driver's sinks only
    first = start_job(job_config)
    produce_requests(
        job_config.bootstrap_servers,
        job_config.ingest_topic,
        [commit("a", "g", ("t", 0, 1), ("t", 1, 2)), commit("b", "h", ("u", 0, 7))],
    )
    wait_for_responses(job_config, {"a", "b"})
    first.stop()
    first.sink.close()
    shutil.rmtree(job_config.checkpoint_location)
    # The sink is lost as well: the rebuilt state must refill it.
    Path(job_config.sink_url.removeprefix("sqlite:///")).unlink()

    second = start_job(job_config)
    assert second.sink.status().status in {"LOADING", "ACTIVE"}
    wait_for(lambda: second.sink.status().status, lambda s: s == "ACTIVE")
    assert sink_offsets(job_config, "g") == {("t", 0): 1, ("t", 1): 2}
    # Two groups' rows (offsets and group metadata) came through the driver or not at all.
    assert (sum(driver_snapshot_rows) >= 3) == (writers == "driver"), driver_snapshot_rows
    # State was rebuilt, not just the sink: a delete of a rebuilt group succeeds.
    produce_requests(
        job_config.bootstrap_servers,
        job_config.ingest_topic,
        [DeleteGroupsRequest("del", "h"), commit("c", "g", ("t", 0, 4))],
    )
    responses = wait_for_responses(job_config, {"del", "c"})
    assert responses["del"]["errorCode"] == 0
    wait_for(lambda: sink_offsets(job_config, "h"), lambda got: got == {})
    assert sink_offsets(job_config, "g") == {("t", 0): 4, ("t", 1): 2}


def test_a_checkpoint_keeps_its_state_shards_and_a_rebuild_reads_every_partition(
    job_config: JobConfig, start_job: JobFactory
) -> None:
    """Two states of two partitions each: the checkpoint records it, a restart keeps it (and
    refuses another count), and a rebuild from the offsets topic, into two states or four,
    finds every group in the partition Kafka would use."""
    groups = [f"group-{g}" for g in range(12)]
    assert {partition_for(g, job_config.partitions) for g in groups} == set(range(4))
    two = replace(job_config, state_shards=2)
    first = start_job(two)
    produce_requests(
        two.bootstrap_servers,
        two.ingest_topic,
        [commit(f"r{i}", g, ("t", 0, i)) for i, g in enumerate(groups)],
    )
    wait_for_responses(two, {f"r{i}" for i in range(len(groups))})
    first.stop()
    first.sink.close()
    records = read_offsets_topic(two.bootstrap_servers, two.offsets_topic)
    assert all(p == partition_for(r.key.group, 4) for p, r in records)

    with pytest.raises(
        ValueError, match="state_shards is 4 but the checkpoint's state is held in 2"
    ):
        start_job(replace(job_config, state_shards=4))
    resumed = start_job(job_config)
    assert resumed.state_shards == 2
    # The keys as the first start spread them over the state's partitions.
    assert resumed.state_layout == first.state_layout
    assert first.state_layout.spread_over >= 1
    resumed.stop()
    resumed.sink.close()

    committed = {g: i for i, g in enumerate(groups)}
    for state_shards in (2, 4):
        shutil.rmtree(job_config.checkpoint_location)
        rebuilt = start_job(replace(job_config, state_shards=state_shards))
        assert rebuilt.state_shards == state_shards
        wait_for(lambda job=rebuilt: job.sink.status().status, lambda s: s == "ACTIVE")
        for group, offset in committed.items():
            assert sink_offsets(job_config, group) == {("t", 0): offset}
        # The state was rebuilt, not just the sink: a delete of a rebuilt group succeeds.
        deleted = groups[state_shards]
        produce_requests(
            job_config.bootstrap_servers,
            job_config.ingest_topic,
            [DeleteGroupsRequest(f"del-{state_shards}", deleted)],
        )
        responses = wait_for_responses(job_config, {f"del-{state_shards}"})
        assert responses[f"del-{state_shards}"]["errorCode"] == 0
        wait_for(lambda g=deleted: sink_offsets(job_config, g), lambda got: got == {})
        rebuilt.stop()
        rebuilt.sink.close()
        del committed[deleted]


def test_postgres_sink_receives_the_same_offsets(
    # The sink URL comes first so its tables are dropped only after the job has stopped.
    postgres_sink_url: str,
    job_config: JobConfig,
    start_job: JobFactory,
) -> None:
    config = replace(job_config, sink_url=postgres_sink_url)
    start_job(config)
    produce_requests(
        config.bootstrap_servers,
        config.ingest_topic,
        [commit("p1", "pg", ("t", 0, 10)), commit("p2", "pg", ("t", 0, 8), ("t", 2, 1))],
    )
    wait_for_responses(config, {"p1", "p2"})
    assert sink_offsets(config, "pg") == {("t", 0): 8, ("t", 2): 1}


def test_refuses_replication_factor_above_broker_count(job_config: JobConfig, spark: Any) -> None:
    from connectors.kafka.admin import TopicConfigurationError

    config = replace(job_config, replication_factor=3, min_insync_replicas=2)
    job = OffsetsJob.create(config, spark)
    try:
        with pytest.raises(TopicConfigurationError, match="replication factor 3 larger than"):
            job.start()
    finally:
        job.sink.close()
