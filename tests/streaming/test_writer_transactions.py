"""The batch writer's Kafka transactions (real broker, real SQLite, no Spark): a batch's records,
answers and dead letters are readable read_committed only once it commits, a failed batch leaves
none readable, a batch Kafka does not take waits the outage out, and a writer fenced by a newer
one of the same ``transactional.id`` writes nothing readable and fails."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from kafka import KafkaConsumer, TopicPartition

from connectors.kafka.producer import DurableProducer, ProducerFenced
from connectors.sinks import Sink, SinkError, open_sink
from streaming.spark.output import output_table
from streaming.spark.writer import BatchWriter, WriterSettings, transactional_id
from tests.fixtures.kafka import session_cluster
from tests.streaming.test_output_table import SHARD, call_output

INGEST_TOPIC = "ingest"


def read(bootstrap: str, topic: str, isolation_level: str) -> list[bytes | None]:
    """The values of every record of ``topic`` up to its end, as ``isolation_level`` reads."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation_level
    )
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)  # read_committed: the last stable offsets
        values: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic} not read to its end offsets"
            for batch in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in batch)
        return values
    finally:
        consumer.close()


@pytest.fixture
def settings(kafka_bootstrap: str, topic_factory: Callable[..., str]) -> WriterSettings:
    offsets_topic = topic_factory(partitions=SHARD + 1)
    return WriterSettings(
        bootstrap_servers=kafka_bootstrap,
        kafka_options={},
        ingest_topic=INGEST_TOPIC,
        offsets_topic=offsets_topic,
        responses_topic=topic_factory(partitions=2),
        dead_letter_topic=topic_factory(),
        compression="none",
        partitions=SHARD + 1,
        sink_write_timeout_s=0,
        delivery_timeout_s=30,
        # Unique per test: a deployment's id, shared by the writers of one test only.
        transactional_id=f"{transactional_id(offsets_topic)}-{uuid.uuid4().hex[:6]}",
    )


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[Sink]:
    # A short busy timeout: a held lock fails a write at once.
    with open_sink(f"sqlite:///{tmp_path / 'offsets.db'}", busy_timeout_ms=50) as opened:
        yield opened


def writer(
    settings: WriterSettings, sink: Sink, planned: Callable[[int], Any] | None = None
) -> BatchWriter:
    """A writer as the job makes it: its producer initialised (previous holders fenced)."""
    made = BatchWriter(settings, sink, planned or (lambda _: {INGEST_TOPIC: {0: 10}}))
    made.producer.flush(0)
    return made


def batch() -> pa.Table:
    """A shard call's output: records, answers, a dead letter."""
    return output_table(SHARD, call_output(3))


def values_of(table: pa.Table, kind: str) -> list[bytes]:
    return table.filter(pc.equal(table["out"], kind))["value"].to_pylist()


def written(settings: WriterSettings, isolation_level: str) -> dict[str, list[bytes | None]]:
    topics = {
        "record": settings.offsets_topic,
        "response": settings.responses_topic,
        "dead_letter": settings.dead_letter_topic,
    }
    return {k: read(settings.bootstrap_servers, t, isolation_level) for k, t in topics.items()}


def test_a_batch_is_readable_committed_only_once_it_commits(
    settings: WriterSettings, sink: Sink
) -> None:
    table = batch()
    during: dict[str, dict[str, list[bytes | None]]] = {}

    def planned(_batch_id: int) -> dict[str, dict[int, int]]:
        # Inside the batch's transaction, its records acknowledged: in the log, not readable.
        during["uncommitted"] = written(settings, "read_uncommitted")
        during["committed"] = written(settings, "read_committed")
        return {INGEST_TOPIC: {0: 10}}

    writer(settings, sink, planned).write_table(table, 0, time.monotonic())

    assert during["uncommitted"]["record"] == values_of(table, "record")
    assert during["committed"]["record"] == []
    after = written(settings, "read_committed")
    assert after["record"] == values_of(table, "record")
    assert sorted(after["response"]) == sorted(values_of(table, "response"))
    assert after["dead_letter"] == values_of(table, "dead_letter")


def test_answers_are_not_readable_committed_before_the_commit(
    kafka_bootstrap: str, unique_topic: str
) -> None:
    producer = DurableProducer(kafka_bootstrap, {}, "none", f"answers-{uuid.uuid4().hex[:8]}")
    try:
        producer.begin()
        producer.send(unique_topic, [b"request-1"], [b"answer"])
        producer.flush(30)  # acknowledged by every in-sync replica
        assert read(kafka_bootstrap, unique_topic, "read_uncommitted") == [b"answer"]
        assert read(kafka_bootstrap, unique_topic, "read_committed") == []
        producer.commit(30)
        assert read(kafka_bootstrap, unique_topic, "read_committed") == [b"answer"]
    finally:
        producer.close()


def test_a_batch_whose_sink_write_fails_is_aborted(
    settings: WriterSettings, sink: Sink, tmp_path: Path
) -> None:
    table = batch()
    one = writer(settings, sink)
    outage = sqlite3.connect(tmp_path / "offsets.db", isolation_level=None)
    outage.execute("BEGIN EXCLUSIVE")  # the sink refuses writes: the batch fails
    try:
        with pytest.raises(SinkError, match="locked"):
            one.write_table(table, 0, time.monotonic())
    finally:
        outage.execute("ROLLBACK")
        outage.close()
    assert written(settings, "read_committed") == {"record": [], "response": [], "dead_letter": []}
    # Its replay, by the same writer: the batch once.
    one.write_table(table, 0, time.monotonic())
    assert written(settings, "read_committed")["record"] == values_of(table, "record")
    assert len(read(settings.bootstrap_servers, settings.offsets_topic, "read_uncommitted")) == (
        2 * len(values_of(table, "record"))
    )


def test_a_fenced_writer_writes_nothing_readable_and_fails(
    settings: WriterSettings, sink: Sink
) -> None:
    table = batch()
    successor: list[BatchWriter] = []

    def take_over(_batch_id: int) -> dict[str, dict[int, int]]:
        # Mid-batch, records sent: a standby takes over and initialises the same id.
        successor.append(writer(settings, sink))
        return {INGEST_TOPIC: {0: 10}}

    zombie = writer(settings, sink, take_over)
    assert not zombie.fenced
    with pytest.raises(ProducerFenced, match="another job of this deployment took over"):
        zombie.write_table(table, 0, time.monotonic())
    # The job's runner exits as a lost lease does (``streaming.cli.run.run_until_stopped``).
    assert zombie.fenced

    assert written(settings, "read_committed") == {"record": [], "response": [], "dead_letter": []}
    # Its records did reach the log before the takeover, which aborted them.
    logged = read(settings.bootstrap_servers, settings.offsets_topic, "read_uncommitted")
    assert logged == values_of(table, "record")
    # Fenced for good: it neither writes nor initialises (which would fence its successor).
    with pytest.raises(ProducerFenced):
        zombie.write_table(table, 1, time.monotonic())
    successor[0].write_table(table, 0, time.monotonic())
    after = written(settings, "read_committed")
    assert after["record"] == values_of(table, "record")
    assert sorted(after["response"]) == sorted(values_of(table, "response"))
    zombie.close()
    successor[0].close()


@contextlib.contextmanager
def broker_paused(bootstrap: str) -> Iterator[None]:
    """The session's broker frozen (SIGSTOP) inside the block, as a partitioned or hung broker
    is: every request to it waits. Skipped when the broker is not the launcher's."""
    cluster = session_cluster()
    config = cluster.config()
    pid = cluster.pid(1) if config and config.bootstrap_servers == bootstrap else None
    if pid is None:
        pytest.skip("the broker is not this session's local launcher's: it cannot be paused")
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_batch_waits_out_a_kafka_outage_in_new_transactions(
    settings: WriterSettings, sink: Sink, caplog: pytest.LogCaptureFixture
) -> None:
    # Kafka unreachable mid-batch for several delivery timeouts: the batch is not failed (which
    # would end the job) but tried again in new transactions until Kafka is back, then written
    # once.
    one = writer(dataclasses.replace(settings, delivery_timeout_s=1), sink)
    table = batch()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            one.write_table(table, 0, time.monotonic())
        except BaseException as failure:
            failures.append(failure)

    caplog.set_level(logging.WARNING, "consumer_offsets.batches")
    batch_thread = threading.Thread(target=write)
    with broker_paused(settings.bootstrap_servers):
        batch_thread.start()
        deadline = time.monotonic() + 60
        while "Kafka did not take it" not in caplog.text:
            assert not failures, f"the batch failed instead of waiting: {failures[0]!r}"
            assert time.monotonic() < deadline, "no failed attempt logged"
            time.sleep(0.2)
        time.sleep(3)  # the next attempt under way, waiting for Kafka (a delivery timeout: 1 s)
        assert batch_thread.is_alive() and not failures
    batch_thread.join(180)
    assert not batch_thread.is_alive() and not failures
    assert "Kafka took it after" in caplog.text
    after = written(settings, "read_committed")
    assert after["record"] == values_of(table, "record")
    assert sorted(after["response"]) == sorted(values_of(table, "response"))
    assert after["dead_letter"] == values_of(table, "dead_letter")
    assert sink.status().last_batch_id == 0
    one.close()
