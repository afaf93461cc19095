"""The read API: OffsetFetch, ListGroups, history and the LOADING guard over a real SQLite sink
(written the way the job writes it), and lag against a real broker's log-end offsets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from connectors.client.errors import CoordinatorLoadInProgressError
from connectors.client.offsets_reader import BrokerOffsets, OffsetsReader, PartitionLag, lag
from connectors.sinks import Sink, open_sink
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from tests.connectors.sinks.record_frames import commit, frame, group_metadata, progress
from tests.fixtures.kafka import TopicFactory


def offset_record(
    group: str, topic: str, partition: int, offset: int, metadata: str = "", ts: int = 1_000
) -> dict[str, Any]:
    return commit(
        group, topic, partition, offset, leader_epoch=2, metadata=metadata, commit_timestamp_ms=ts
    )


class Writer:
    """The job's side of the sink: batches with increasing ids."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.batch_id = 0

    def write(self, *records: dict[str, Any]) -> None:
        assert self.sink.write_batch(self.batch_id, frame(*records), progress(self.batch_id))
        self.batch_id += 1


@pytest.fixture
def sink_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'offsets.db'}"


@pytest.fixture
def writer(sink_url: str) -> Iterator[Writer]:
    with open_sink(sink_url, keep_history=True) as sink:
        sink.set_status("ACTIVE")
        yield Writer(sink)


@pytest.mark.parametrize(
    ("committed", "log_end", "expected"),
    [(5, 12, 7), (12, 12, 0), (15, 12, 0), (-1, 12, 12), (-1, 0, 0), (3, None, None)],
)
def test_lag_is_log_end_minus_committed_never_negative(
    committed: int, log_end: int | None, expected: int | None
) -> None:
    assert lag(committed, log_end) == expected


def test_fetch_list_and_history_read_what_the_job_wrote(writer: Writer, sink_url: str) -> None:
    writer.write(
        offset_record("g", "t", 0, 5, "a", ts=1_000),
        offset_record("g", "t", 1, 7),
        offset_record("h", "u", 0, 1),
        group_metadata("h", 3, 2),
    )
    writer.write(offset_record("g", "t", 0, 6, "b", ts=2_000))
    with OffsetsReader(sink_url) as reader:
        assert [(o.topic, o.partition, o.offset) for o in reader.fetch("g")] == [
            ("t", 0, 6),
            ("t", 1, 7),
        ]
        asked = reader.fetch("g", [TopicPartition("t", 1), ("t", 9)])  # type: ignore[list-item]
        assert [(o.partition, o.offset, o.metadata) for o in asked] == [(1, 7, ""), (9, -1, "")]
        assert [
            (g.group_id, g.partitions, g.generation, g.members) for g in reader.list_groups()
        ] == [
            ("g", 2, None, None),
            ("h", 1, 3, 2),
        ]
        assert reader.group("h") is not None and reader.group("nope") is None
        history = reader.history("g", "t", 0)
        assert [(e.offset, e.metadata, e.commit_timestamp_ms) for e in history] == [
            (6, "b", 2_000),
            (5, "a", 1_000),
        ]


def test_reads_while_loading_raise_load_in_progress(writer: Writer, sink_url: str) -> None:
    writer.write(offset_record("g", "t", 0, 5))
    with OffsetsReader(sink_url, {"bootstrap_servers": ["127.0.0.1:1"]}) as reader:
        writer.sink.set_status("LOADING", "rebuilding state from the offsets topic")
        for read in (
            lambda: reader.fetch("g"),
            reader.list_groups,
            lambda: reader.history("g"),
            lambda: reader.describe("g"),
        ):
            with pytest.raises(CoordinatorLoadInProgressError) as raised:
                read()
            assert raised.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS == 14
            assert raised.value.retriable
            assert "rebuilding state" in str(raised.value)
        assert reader.status().status == "LOADING"  # status itself always answers
        writer.sink.set_status("ACTIVE")
        assert [o.offset for o in reader.fetch("g")] == [5]
        writer.sink.set_status("STOPPED")
        assert [o.offset for o in reader.fetch("g")] == [5]  # a stopped job's last state


def test_describe_without_broker_options_says_so(writer: Writer, sink_url: str) -> None:
    writer.write(offset_record("g", "t", 0, 5))
    with OffsetsReader(sink_url) as reader, pytest.raises(ValueError, match="no Kafka client"):
        reader.describe("g")


def test_describe_reads_log_end_offsets_a_mirror_stored(writer: Writer, sink_url: str) -> None:
    writer.write(offset_record("g", "t", 0, 5), offset_record("g", "t", 1, 9))
    writer.sink.write_log_end_offsets({("t", 0): 12, ("t", 1): 9, ("u", 0): 1})
    with OffsetsReader(sink_url) as reader:  # no Kafka client options: the sink is enough
        described = reader.describe("g")
    assert [(p.partition, p.log_end_offset, p.lag) for p in described.partitions] == [
        (0, 12, 7),
        (1, 9, 0),
    ]


def produce(bootstrap: str, topic: str, partition: int, timestamps: list[int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for ts in timestamps:
        producer.send(topic, value=b"x", partition=partition, timestamp_ms=ts)
    producer.flush()
    producer.close()


def test_describe_shows_lag_against_the_brokers_log_end_offsets(
    writer: Writer, sink_url: str, kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=3)
    produce(kafka_bootstrap, topic, 0, [1_000] * 7)
    produce(kafka_bootstrap, topic, 1, [1_000] * 3)
    writer.write(
        offset_record("g", topic, 0, 2, "m", ts=5_000),
        offset_record("g", topic, 1, 3),
        offset_record("g", topic, 2, 4),  # ahead of an empty partition: lag 0, not -4
        offset_record("g", "deleted-topic", 0, 9),
        group_metadata("g", 4, 0),
    )
    with OffsetsReader(sink_url, {"bootstrap_servers": kafka_bootstrap.split(",")}) as reader:
        description = reader.describe("g")
        missing = reader.describe("nobody")
    assert description.exists and (description.generation, description.members) == (4, 0)
    by_tp = {p.topic_partition: p for p in description.partitions}
    behind = by_tp[TopicPartition(topic, 0)]
    assert replace(behind, lag_seconds=None) == PartitionLag(
        topic, 0, 2, 7, 5, leader_epoch=2, metadata="m", commit_timestamp_ms=5_000
    )
    # Nothing sampled: the age of the record at offset 2, produced at 1 s past the epoch.
    assert behind.lag_seconds == pytest.approx(time.time() - 1, abs=5)
    assert (
        by_tp[TopicPartition(topic, 1)].log_end_offset,
        by_tp[TopicPartition(topic, 1)].lag,
    ) == (3, 0)
    assert (
        by_tp[TopicPartition(topic, 2)].log_end_offset,
        by_tp[TopicPartition(topic, 2)].lag,
    ) == (0, 0)
    unknown = by_tp[TopicPartition("deleted-topic", 0)]
    assert (unknown.log_end_offset, unknown.lag) == (None, None)
    assert description.total_lag is None
    assert not missing.exists and missing.partitions == ()


def test_broker_offsets_by_position_and_time(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2)
    produce(kafka_bootstrap, topic, 0, [1_000, 2_000, 3_000])
    tp0, tp1, nowhere = TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 5)
    with BrokerOffsets({"bootstrap_servers": kafka_bootstrap.split(",")}) as broker:
        assert broker.partitions_for(topic) == [0, 1]
        assert broker.partitions_for("no-such-topic") == []
        assert broker.end_offsets([tp0, tp1, nowhere]) == {tp0: 3, tp1: 0}
        assert broker.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert broker.offsets_for_time([tp0, tp1], 2_000) == {tp0: 1, tp1: None}
        assert broker.offsets_for_time([tp0], 1_500) == {tp0: 1}
        assert broker.offsets_for_time([tp0], 9_000) == {tp0: None}
        assert broker.end_offsets([]) == {}
