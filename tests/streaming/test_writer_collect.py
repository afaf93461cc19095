"""Collecting a micro-batch whose Spark job failed reading Kafka, the job's and the mirror's:
read again until Kafka answers (real Spark; the failure is a task's, raised with Kafka's client
error as a task would)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from connectors.sinks import open_sink
from streaming.spark.mirror import MirrorWriter
from streaming.spark.writer import BatchWriter, WriterSettings

pytestmark = pytest.mark.spark

#: The Kafka client's own error, and Spark's source giving up on a record after its poll timeout
#: (a soak's Kafka outage of 142 s, longer than that timeout, failed a batch so).
KAFKA_READ_FAILURES = [
    "org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the "
    "position for partition ingest-0 could be determined",
    "java.util.concurrent.TimeoutException: Cannot fetch record for offset 38865 in 120000 "
    "milliseconds",
]


def failing_batch(spark: SparkSession, tmp_path: Path, failures: int, error: str) -> DataFrame:
    """A one-row batch whose ``payload`` fails to compute ``failures`` times with ``error``."""
    attempts = tmp_path / "attempts"
    attempts.write_text("")
    path = str(attempts)

    @F.udf("binary")
    def payload(value: int) -> bytes:
        with open(path, "a") as seen:
            seen.write("x")
        if Path(path).stat().st_size <= failures:
            raise RuntimeError(error)
        return b"payload %d" % value

    return spark.range(1, numPartitions=1).select(payload("id").alias("payload"))


def writer(tmp_path: Path) -> BatchWriter:
    settings = WriterSettings(
        bootstrap_servers="127.0.0.1:9",
        kafka_options={},
        ingest_topic="ingest",
        offsets_topic="offsets",
        responses_topic="responses",
        dead_letter_topic="dead-letters",
        compression="none",
        partitions=1,
    )
    return BatchWriter(settings, open_sink(f"sqlite:///{tmp_path / 'sink.db'}"), lambda _: {})


@pytest.mark.parametrize("error", KAFKA_READ_FAILURES)
def test_a_batch_whose_kafka_read_failed_is_read_again(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture, error: str
) -> None:
    caplog.set_level(logging.WARNING, "consumer_offsets.batches")
    batch = failing_batch(spark, tmp_path, failures=2, error=error)
    assert writer(tmp_path).collect(batch, 7).to_pylist() == [b"payload 0"]
    assert caplog.text.count("batch 7: reading it from Kafka failed") == 2


def test_any_other_failure_fails_the_batch_at_once(spark: SparkSession, tmp_path: Path) -> None:
    batch = failing_batch(spark, tmp_path, failures=1, error="a bug")
    with pytest.raises(Exception, match="a bug"):
        writer(tmp_path).collect(batch, 7)


def test_the_mirror_reads_a_batch_again_too(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "consumer_offsets.mirror")
    failing = failing_batch(spark, tmp_path, failures=2, error=KAFKA_READ_FAILURES[0])
    batch = failing.select(
        F.lit(0).alias("partition"),
        F.lit(0).cast("long").alias("offset"),
        F.col("payload").alias("key"),
        F.lit(None).cast("binary").alias("value"),
    )
    with open_sink(f"sqlite:///{tmp_path / 'mirror.db'}") as sink:
        MirrorWriter(sink, {0: 1}, lambda _: {0: 1})(batch, 7)
        assert sink.status().last_batch_id == 7
    assert caplog.text.count("batch 7: reading it from Kafka failed") == 2
