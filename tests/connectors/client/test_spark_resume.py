"""The commit → query → resume loop with real Spark queries, the real job and the real broker.

A query reads a topic, writes every record it processes into a SQLite table (topic, partition,
offset, which run) and commits its progress through ``CommitProgressListener``; a later run on
a new checkpoint starts through ``start_from_group``. The table says whether a record was
processed twice or never. Also: ``reset-offsets --to-offset`` replays from there, an existing
checkpoint wins (and ``start="group"`` refuses it), and a plain kafka-python consumer hands the
group to a Spark query and takes it back.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from connectors.client import OffsetCommitClient, OffsetsReader, wait_until_applied
from connectors.client.spark import (
    CheckpointExistsError,
    CommitProgressListener,
    ResumedQuery,
    start_from_group,
)
from state.coordinator.model import TopicPartition
from tests.fixtures.job import RunningJob, unique_group
from tests.fixtures.kafka import TopicFactory
from tests.streaming.cli.support import run
from tests.streaming.helpers import wait_for

pytestmark = pytest.mark.slow


class Processed:
    """The sink table: one row per record processed, and who processed it."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        with sqlite3.connect(self.path) as db:
            db.execute(
                "CREATE TABLE processed (topic TEXT, partition INTEGER, kafka_offset INTEGER,"
                " value TEXT, run TEXT)"
            )

    def add(self, rows: list[tuple[str, int, int, str]], run_name: str) -> None:
        with sqlite3.connect(self.path) as db:
            db.executemany(
                "INSERT INTO processed VALUES (?, ?, ?, ?, ?)",
                [(*row, run_name) for row in rows],
            )

    def writer(self, run_name: str) -> Callable[[Any, int], None]:
        """A ``foreachBatch`` function recording the batch's records as ``run_name``'s."""

        def write(batch: Any, _batch_id: int) -> None:
            rows = batch.selectExpr("topic", "partition", "offset", "CAST(value AS STRING)")
            self.add([(r[0], int(r[1]), int(r[2]), r[3]) for r in rows.collect()], run_name)

        return write

    def counts(self) -> Counter[tuple[int, int]]:
        """How many times each (partition, offset) was processed."""
        with sqlite3.connect(self.path) as db:
            found = db.execute("SELECT partition, kafka_offset FROM processed").fetchall()
        return Counter((int(p), int(o)) for p, o in found)

    def of(self, run_name: str) -> set[tuple[int, int]]:
        """The (partition, offset) pairs ``run_name`` processed (each once, or it fails)."""
        with sqlite3.connect(self.path) as db:
            found = db.execute(
                "SELECT partition, kafka_offset FROM processed WHERE run = ?", (run_name,)
            ).fetchall()
        pairs = [(int(p), int(o)) for p, o in found]
        assert len(pairs) == len(set(pairs)), f"{run_name} processed a record twice"
        return set(pairs)


def records(per_partition: dict[int, range]) -> set[tuple[int, int]]:
    return {(p, o) for p, offsets in per_partition.items() for o in offsets}


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for partition, count in per_partition.items():
        for i in range(count):
            producer.send(
                topic,
                value=f"p{partition}-{uuid.uuid4().hex[:6]}-{i}".encode(),
                partition=partition,
            )
    producer.flush()
    producer.close()


@pytest.fixture(scope="module")
def job_client(running_job: RunningJob) -> Iterator[OffsetCommitClient]:
    with OffsetCommitClient(running_job.config, default_timeout_s=60) as client:
        yield client


@pytest.fixture
def reader(running_job: RunningJob) -> Iterator[OffsetsReader]:
    config = running_job.config
    with OffsetsReader(config.sink_url, config.kafka_python_options()) as r:
        yield r


class Runs:
    """Starts a test's query runs through ``start_from_group``, each with its listener commits."""

    def __init__(
        self,
        spark: Any,
        job: RunningJob,
        reader: OffsetsReader,
        table: Processed,
        listener: CommitProgressListener,
        group: str,
        topic: str,
        checkpoint: Path,
        name: str,
    ) -> None:
        self.spark, self.job, self.reader, self.table = spark, job, reader, table
        self.listener, self.group, self.topic = listener, group, topic
        self.checkpoint, self.name = checkpoint, name

    def start(self, run_name: str, **extra: Any) -> ResumedQuery:
        def write(frame: Any) -> Any:
            writer = frame.writeStream.queryName(self.name)
            writer = writer.trigger(processingTime="200 milliseconds")
            return writer.foreachBatch(self.table.writer(run_name))

        options: dict[str, Any] = {
            "source_options": self.job.config.spark_kafka_options(),
            "unknown_group": "missing",
            **extra,
        }
        return start_from_group(
            self.spark,
            write,
            reader=self.reader,
            group_id=self.group,
            topics=[self.topic],
            checkpoint_location=str(self.checkpoint),
            ingest_topic=self.job.config.ingest_topic,
            **options,
        )

    def committed(self) -> dict[int, int]:
        return {o.partition: o.offset for o in self.reader.fetch(self.group)}

    def run_until(self, resumed: ResumedQuery, committed: dict[int, int]) -> None:
        """Let the query run until the group's offsets are ``committed``, then stop it and
        wait for the listener's last commits."""
        try:
            wait_for(self.committed, lambda got: got == committed)
        finally:
            resumed.query.stop()
        self.listener.flush(query=resumed.query)


def test_a_new_checkpoint_resumes_from_the_group_none_twice_none_skipped_and_replays_a_reset(
    spark: Any,
    running_job: RunningJob,
    job_client: OffsetCommitClient,
    reader: OffsetsReader,
    topic_factory: TopicFactory,
    tmp_path: Path,
) -> None:
    bootstrap = running_job.config.bootstrap_servers
    topic = topic_factory(partitions=2)
    group = unique_group("resume")
    name = f"resume_{uuid.uuid4().hex[:8]}"
    table = Processed(tmp_path / "processed.db")
    checkpoint = tmp_path / "checkpoint"
    listener = CommitProgressListener(job_client, group, query_name=name)
    spark.streams.addListener(listener)
    runs = Runs(spark, running_job, reader, table, listener, group, topic, checkpoint, name)
    try:
        # Run 1: N = 6 + 4 records; a group nobody committed starts at the earliest offsets.
        produce(bootstrap, topic, {0: 6, 1: 4})
        first = runs.start("first")
        assert first.started_from == "group"
        assert json.loads(first.starting_offsets or "") == {topic: {"0": -2, "1": -2}}
        runs.run_until(first, {0: 6, 1: 4})
        assert table.of("first") == records({0: range(6), 1: range(4)})

        # The checkpoint exists: Spark would ignore startingOffsets, so neither is accepted.
        with pytest.raises(CheckpointExistsError, match="ignores startingOffsets"):
            runs.start("refused", start="group")
        options = {**running_job.config.spark_kafka_options(), "startingOffsets": "earliest"}
        with pytest.raises(ValueError, match="must not set startingOffsets"):
            runs.start("refused", source_options=options)

        # The checkpoint is lost; M = 3 + 5 more records arrive; run 2 takes exactly those.
        shutil.rmtree(checkpoint)
        produce(bootstrap, topic, {0: 3, 1: 5})
        second = runs.start("second")
        assert second.started_from == "group"
        assert json.loads(second.starting_offsets or "") == {topic: {"0": 6, "1": 4}}
        runs.run_until(second, {0: 9, 1: 9})
        assert table.of("second") == records({0: range(6, 9), 1: range(4, 9)})
        assert table.counts() == Counter(records({0: range(9), 1: range(9)}))

        # reset-offsets --to-offset 2, checkpoint deleted: run 3 reprocesses from offset 2.
        reset = run(
            "reset-offsets",
            "--config",
            str(running_job.config_file),
            "--group",
            group,
            "--topic",
            topic,
            "--to-offset",
            "2",
            "--execute",
        )
        assert reset.code == 0, reset.err
        shutil.rmtree(checkpoint)
        third = runs.start("third")
        assert json.loads(third.starting_offsets or "") == {topic: {"0": 2, "1": 2}}
        runs.run_until(third, {0: 9, 1: 9})
        assert table.of("third") == records({0: range(2, 9), 1: range(2, 9)})
        counts = table.counts()
        assert {pair for pair, n in counts.items() if n == 1} == records({0: range(2), 1: range(2)})
        assert {pair for pair, n in counts.items() if n == 2} == records(
            {0: range(2, 9), 1: range(2, 9)}
        )
        assert max(counts.values()) == 2

        # An existing checkpoint wins over the group (here reset to 0): only the new record.
        assert run(
            "reset-offsets", "--config", str(running_job.config_file), "--group", group,
            "--topic", topic, "--to-offset", "0", "--execute",
        ).code == 0  # fmt: skip
        fourth = runs.start("fourth")
        assert (fourth.started_from, fourth.starting_offsets) == ("checkpoint", None)
        produce(bootstrap, topic, {1: 1})
        runs.run_until(fourth, {0: 9, 1: 10})
        assert table.of("fourth") == {(1, 9)}
    finally:
        spark.streams.removeListener(listener)
        for query in spark.streams.active:
            if query.name == name:
                query.stop()


def test_a_plain_consumer_hands_its_group_to_a_spark_query_and_takes_it_back(
    spark: Any,
    running_job: RunningJob,
    job_client: OffsetCommitClient,
    reader: OffsetsReader,
    topic_factory: TopicFactory,
    tmp_path: Path,
) -> None:
    config = running_job.config
    topic = topic_factory(partitions=2)
    group = unique_group("handover")
    name = f"handover_{uuid.uuid4().hex[:8]}"
    table = Processed(tmp_path / "processed.db")
    listener = CommitProgressListener(job_client, group, query_name=name)
    spark.streams.addListener(listener)
    runs = Runs(
        spark, running_job, reader, table, listener, group, topic, tmp_path / "checkpoint", name
    )
    partitions = [KafkaTopicPartition(topic, p) for p in (0, 1)]

    def plain_consumer(run_name: str, take: int | None) -> None:
        """Seek to the group's offsets from the sink, process ``take`` records (None: up to
        the log end), commit the next offsets through the job."""
        wait_until_applied(reader, group, ingest_topic=config.ingest_topic, timeout_s=60)
        committed = {
            o.partition: o.offset
            for o in reader.fetch(group, [TopicPartition(topic, p) for p in (0, 1)])
        }
        consumer = KafkaConsumer(
            group_id=None, enable_auto_commit=False, **config.kafka_python_options()
        )
        try:
            consumer.assign(partitions)
            for tp in partitions:
                if committed[tp.partition] >= 0:
                    consumer.seek(tp, committed[tp.partition])
                else:
                    consumer.seek_to_beginning(tp)
            ends = consumer.end_offsets(partitions)
            done: list[tuple[str, int, int, str]] = []
            positions: dict[TopicPartition, int] = {}
            while take is None or len(done) < take:
                if take is None and all(consumer.position(tp) >= ends[tp] for tp in partitions):
                    break
                for batch in consumer.poll(timeout_ms=1000).values():
                    for record in batch:
                        if take is not None and len(done) == take:
                            break  # fetched, not processed: not committed either
                        done.append((topic, record.partition, record.offset, record.value.decode()))
                        positions[TopicPartition(topic, record.partition)] = record.offset + 1
            table.add(done, run_name)
            job_client.commit(group, positions)
        finally:
            consumer.close()

    try:
        produce(config.bootstrap_servers, topic, {0: 5, 1: 5})
        plain_consumer("plain-1", take=6)
        taken = runs.committed()
        assert sum(taken.values()) == 6

        # To Spark: it starts where the plain consumer stopped; more records arrive meanwhile.
        resumed = runs.start("spark")
        expected_start = {str(p): taken.get(p, -2) for p in (0, 1)}
        assert json.loads(resumed.starting_offsets or "") == {topic: expected_start}
        produce(config.bootstrap_servers, topic, {0: 3, 1: 2})
        runs.run_until(resumed, {0: 8, 1: 7})

        # And back: the plain consumer continues from Spark's commits.
        produce(config.bootstrap_servers, topic, {0: 2, 1: 2})
        plain_consumer("plain-2", take=None)
        assert runs.committed() == {0: 10, 1: 9}

        everything = records({0: range(10), 1: range(9)})
        assert table.counts() == Counter(everything)  # each record exactly once
        first, spark_part, last = table.of("plain-1"), table.of("spark"), table.of("plain-2")
        assert len(first) == 6
        assert spark_part == records({0: range(taken.get(0, 0), 8), 1: range(taken.get(1, 0), 7)})
        assert last == records({0: range(8, 10), 1: range(7, 9)})
    finally:
        spark.streams.removeListener(listener)
        for query in spark.streams.active:
            if query.name == name:
                query.stop()


def test_describe_prints_the_groups_starting_offsets(
    running_job: RunningJob, job_client: OffsetCommitClient, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=3)
    group = unique_group("cli")
    job_client.commit(group, {TopicPartition(topic, 0): 42, TopicPartition(topic, 2): 17})
    config_file = str(running_job.config_file)
    shown = run("describe", "--config", config_file, "--group", group, "--starting-offsets")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out) == {topic: {"0": 42, "1": -2, "2": 17}}
    other = topic_factory(partitions=1)
    both = run(
        "describe", "--config", config_file, "--group", group, "--starting-offsets",
        "--topic", topic, "--topic", other, "--json",
    )  # fmt: skip
    assert both.code == 0, both.err
    assert json.loads(both.out) == {topic: {"0": 42, "1": -2, "2": 17}, other: {"0": -2}}
    missing = run("describe", "--config", config_file, "--group", "nobody-x", "--starting-offsets")
    assert missing.code == 1
    assert "GROUP_ID_NOT_FOUND (69)" in missing.err and "'nobody-x'" in missing.err
    two = run(
        "describe", "--config", config_file, "--group", group, "--group", "b", "--starting-offsets"
    )
    assert two.code == 2 and "exactly one --group" in two.err
    stray = run("describe", "--config", config_file, "--group", group, "--topic", topic)
    assert stray.code == 2 and "--topic goes with --starting-offsets" in stray.err


def test_a_checkpoint_is_new_until_a_batch_file_is_written(spark: Any, tmp_path: Path) -> None:
    from connectors.client.spark.resume import checkpoint_is_new

    checkpoint = tmp_path / "checkpoint"
    assert checkpoint_is_new(spark, str(checkpoint))  # no directory at all
    # What a query leaves when it stopped before its first batch, or crashed mid-write.
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "sources" / "0").mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"x"}')
    (checkpoint / "offsets" / ".0.abc.tmp").write_text("v1")
    assert checkpoint_is_new(spark, str(checkpoint))
    # The source recorded its initial offsets: Spark now ignores startingOffsets.
    (checkpoint / "sources" / "0" / "0").write_text("v1\n{}")
    assert not checkpoint_is_new(spark, str(checkpoint))
    (checkpoint / "sources" / "0" / "0").unlink()
    (checkpoint / "offsets" / "0").write_text("v1")
    assert not checkpoint_is_new(spark, f"file://{checkpoint}/")
