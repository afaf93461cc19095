"""A group's committed offsets as Spark's ``startingOffsets``, and the wait until the sink holds
a group's last commits: over a real SQLite sink written the way the job writes it and a real
broker's partition lists and log ends (the query itself: ``test_spark_resume``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from connectors.client import (
    CoordinatorLoadInProgressError,
    OffsetsError,
    OffsetsReader,
    SinkNotCurrentError,
    wait_until_applied,
)
from connectors.client.starting_offsets import starting_offsets_json
from connectors.sinks import Sink, open_sink
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.partitioner import partition_for
from tests.connectors.sinks.record_frames import commit, frame, group_metadata, progress
from tests.fixtures.kafka import TopicFactory

INGEST_PARTITIONS = 4


class Writer:
    """The job's side of the sink: batches with increasing ids and their ingest progress."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.batch_id = 0

    def write(self, *records: dict[str, Any], ingest: dict[int, int] | None = None) -> None:
        batch = progress(self.batch_id, ingest_offsets=ingest or {})
        assert self.sink.write_batch(self.batch_id, frame(*records), batch)
        self.batch_id += 1


@pytest.fixture
def sink_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'offsets.db'}"


@pytest.fixture
def writer(sink_url: str) -> Iterator[Writer]:
    with open_sink(sink_url) as sink:
        sink.set_status("ACTIVE")
        yield Writer(sink)


@pytest.fixture
def reader(sink_url: str, writer: Writer, kafka_bootstrap: str) -> Iterator[OffsetsReader]:
    with OffsetsReader(sink_url, {"bootstrap_servers": kafka_bootstrap.split(",")}) as r:
        yield r


# --- the JSON (pure) --------------------------------------------------------------------------


def test_every_partition_is_named_committed_or_marked_and_nothing_else() -> None:
    committed = [
        (TopicPartition("orders", 0), 42),
        (TopicPartition("orders", 2), 7),
        (TopicPartition("orders", 9), 5),  # a partition the topic no longer has
        (TopicPartition("other", 0), 3),  # a topic the query does not subscribe to
        (TopicPartition("orders", 1), -1),  # "nothing committed"
    ]
    text = starting_offsets_json(committed, {"orders": [2, 0, 1], "audit": [0]})
    assert json.loads(text) == {"audit": {"0": -2}, "orders": {"0": 42, "1": -2, "2": 7}}
    latest = starting_offsets_json(committed, {"orders": [0, 1]}, "latest")
    assert json.loads(latest) == {"orders": {"0": 42, "1": -1}}
    with pytest.raises(ValueError, match="missing must be 'earliest' or 'latest'"):
        starting_offsets_json(committed, {"orders": [0]}, "none")


# --- OffsetsReader.spark_starting_offsets -----------------------------------------------------


def test_starting_offsets_cover_every_partition_of_the_subscribed_topics(
    writer: Writer, reader: OffsetsReader, topic_factory: TopicFactory
) -> None:
    orders, audit = topic_factory(partitions=3), topic_factory(partitions=2)
    writer.write(commit("g", orders, 0, 42), commit("g", orders, 2, 17), commit("g", orders, 7, 1))
    # topics=None: the topics the group committed, every partition the cluster has.
    assert json.loads(reader.spark_starting_offsets("g")) == {orders: {"0": 42, "1": -2, "2": 17}}
    both = reader.spark_starting_offsets("g", [orders, audit], "latest")
    assert json.loads(both) == {orders: {"0": 42, "1": -1, "2": 17}, audit: {"0": -1, "1": -1}}


def test_a_group_the_sink_does_not_know_is_an_error_naming_it_unless_asked(
    writer: Writer, reader: OffsetsReader, topic_factory: TopicFactory
) -> None:
    orders = topic_factory(partitions=2)
    with pytest.raises(OffsetsError) as raised:
        reader.spark_starting_offsets("nobody", [orders])
    assert raised.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert "'nobody'" in str(raised.value)
    new = reader.spark_starting_offsets("nobody", [orders], "latest", unknown_group="missing")
    assert json.loads(new) == {orders: {"0": -1, "1": -1}}
    # A group with metadata but no offsets exists: its partitions are all missing.
    writer.write(group_metadata("members-only", 1, 0))
    assert json.loads(reader.spark_starting_offsets("members-only", [orders])) == {
        orders: {"0": -2, "1": -2}
    }
    with pytest.raises(ValueError, match="give topics"):
        reader.spark_starting_offsets("members-only")


def test_unknown_topics_no_cluster_and_bad_arguments_are_refused_not_guessed(
    writer: Writer, reader: OffsetsReader, sink_url: str
) -> None:
    writer.write(commit("g", "gone-topic-x1", 0, 5))
    with pytest.raises(OffsetsError) as unknown:
        reader.spark_starting_offsets("g")
    assert unknown.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "'gone-topic-x1'" in str(unknown.value)
    with OffsetsReader(sink_url, {"bootstrap_servers": ["127.0.0.1:1"]}) as unreachable:
        with pytest.raises(OffsetsError) as no_cluster:
            unreachable.spark_starting_offsets("g")
        assert no_cluster.value.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert "cannot read the partitions of topic 'gone-topic-x1'" in str(no_cluster.value)
    with OffsetsReader(sink_url) as no_options, pytest.raises(ValueError, match="no Kafka client"):
        no_options.spark_starting_offsets("g")
    with pytest.raises(ValueError, match="missing must be"):
        reader.spark_starting_offsets("g", missing="none")
    with pytest.raises(ValueError, match="unknown_group must be"):
        reader.spark_starting_offsets("g", unknown_group="ignore")
    with pytest.raises(TypeError, match="not the string"):
        reader.spark_starting_offsets("g", "orders")  # type: ignore[arg-type]
    writer.sink.set_status("LOADING", "rebuilding")
    with pytest.raises(CoordinatorLoadInProgressError):
        reader.spark_starting_offsets("g")


# --- wait_until_applied -----------------------------------------------------------------------


def produce_to(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(count):
        producer.send(topic, value=f"request {i}".encode(), partition=partition)
    producer.flush()
    producer.close()


def test_the_wait_ends_once_the_jobs_progress_reaches_the_groups_ingest_log_end(
    writer: Writer, reader: OffsetsReader, topic_factory: TopicFactory, kafka_bootstrap: str
) -> None:
    ingest = topic_factory(partitions=INGEST_PARTITIONS)
    shard = partition_for("g", INGEST_PARTITIONS)
    other = (shard + 1) % INGEST_PARTITIONS
    # Nothing was ever sent on the group's shard: current at once, with or without progress.
    assert wait_until_applied(reader, "g", ingest_topic=ingest, timeout_s=5).log_end_offset == 0
    produce_to(kafka_bootstrap, ingest, shard, 3)
    produce_to(kafka_bootstrap, ingest, other, 5)
    writer.write(commit("g", "orders", 0, 1), ingest={shard: 1, other: 5})

    def apply_the_rest() -> None:
        time.sleep(1.0)
        writer.write(commit("g", "orders", 0, 3), ingest={shard: 3, other: 5})

    started = time.monotonic()
    later = threading.Thread(target=apply_the_rest)
    later.start()
    try:
        applied = wait_until_applied(reader, "g", ingest_topic=ingest, timeout_s=30, poll_s=0.05)
    finally:
        later.join()
    assert time.monotonic() - started >= 1.0  # it waited for the batch, not for the timeout
    assert (applied.ingest_partition, applied.log_end_offset, applied.progress_offset) == (
        shard,
        3,
        3,
    )
    assert [o.offset for o in reader.fetch("g")] == [3]


def test_a_request_in_an_open_transaction_is_not_sent_yet(
    writer: Writer, reader: OffsetsReader, topic_factory: TopicFactory, kafka_bootstrap: str
) -> None:
    """The job reads read_committed: while a transaction is open on the group's ingest
    partition, its progress stops at the last stable offset, and so does the wait."""
    ingest = topic_factory(partitions=INGEST_PARTITIONS)
    shard = partition_for("g", INGEST_PARTITIONS)
    produce_to(kafka_bootstrap, ingest, shard, 2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": ingest})
    producer.init_transactions(30)
    producer.begin_transaction()
    try:
        producer.produce(ingest, b"a request not committed yet", partition=shard)
        producer.flush(30)
        writer.write(commit("g", "orders", 0, 2), ingest={shard: 2})
        applied = wait_until_applied(reader, "g", ingest_topic=ingest, timeout_s=10)
        assert (applied.log_end_offset, applied.progress_offset) == (2, 2)
    finally:
        producer.abort_transaction(30)


def test_the_wait_says_it_cannot_know_rather_than_answer_from_a_stale_sink(
    writer: Writer,
    reader: OffsetsReader,
    topic_factory: TopicFactory,
    kafka_bootstrap: str,
    sink_url: str,
) -> None:
    ingest = topic_factory(partitions=INGEST_PARTITIONS)
    shard = partition_for("g", INGEST_PARTITIONS)
    produce_to(kafka_bootstrap, ingest, shard, 2)
    writer.write(commit("g", "orders", 0, 1), ingest={shard: 1})
    with pytest.raises(SinkNotCurrentError) as late:
        wait_until_applied(reader, "g", ingest_topic=ingest, timeout_s=0.5)
    assert late.value.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert f"partition {shard} up to offset 1, its log end was 2" in str(late.value)
    # A shard the job recorded nothing for (a job restarted on a new checkpoint).
    other = next(f"h{i}" for i in range(100) if partition_for(f"h{i}", INGEST_PARTITIONS) != shard)
    produce_to(kafka_bootstrap, ingest, partition_for(other, INGEST_PARTITIONS), 1)
    with pytest.raises(SinkNotCurrentError, match=r"up to offset \(none recorded\)"):
        wait_until_applied(reader, other, ingest_topic=ingest, timeout_s=0.3)
    writer.sink.set_status("STOPPED", "stopped by the operator")
    started = time.monotonic()
    with pytest.raises(SinkNotCurrentError) as stopped:
        wait_until_applied(reader, "g", ingest_topic=ingest, timeout_s=30)
    assert time.monotonic() - started < 10  # a stopped job will not catch up: no waiting
    assert stopped.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "STOPPED" in str(stopped.value)
    with pytest.raises(SinkNotCurrentError, match="does not exist"):
        wait_until_applied(reader, "g", ingest_topic="no-such-ingest-topic", timeout_s=5)
    writer.sink.bind_source_cluster("cluster-1", "source")
    with pytest.raises(SinkNotCurrentError, match="mirror's sink"):
        wait_until_applied(reader, "g", ingest_topic=ingest, timeout_s=5)
