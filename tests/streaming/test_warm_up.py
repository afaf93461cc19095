"""A waiting standby keeps its Python workers warm: its warm-up query, started again from its
own checkpoint (the state store loaded from it, as a takeover's is), runs on a batch every
``WARM_UP_EVERY_S`` (under the minute after which Spark kills idle workers) until the lease is
taken; the job's ingest path is run once, read-only (real Spark, a real broker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from connectors.client.offsets_reader import end_offsets
from streaming.config import JobConfig
from streaming.spark.job import OffsetsJob
from streaming.spark.warm_up import WARM_UP_EVERY_S, keep_python_workers_warm
from tests.connectors.kafka.transactions import Committer
from tests.fixtures.job import new_job_config, prepare_topics

pytestmark = pytest.mark.spark


def test_the_warm_up_query_restarts_from_its_checkpoint_and_runs_on_until_stopped(
    spark: SparkSession,
) -> None:
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    warm = keep_python_workers_warm(spark)
    try:
        assert warm.query is not None and warm.query.isActive
        (progress,) = warm.query.recentProgress  # returned once its first batch ran
        # Its second start, resumed after the first's batch: its state store loaded from the
        # checkpoint.
        assert progress["batchId"] == 1
        (operator,) = progress["stateOperators"]
        assert operator["customMetrics"]["rocksdbNumLoadedFromDfs"] > 0
        assert warm.query.isActive  # and it runs on
        assert spark.conf.get("spark.sql.shuffle.partitions") == shuffle
        assert WARM_UP_EVERY_S < 60  # Spark's PythonWorkerFactory: idle workers die after 1 min
    finally:
        warm.stop()
    assert not warm.query.isActive
    assert warm.folder is not None and not Path(warm.folder).exists()


def test_a_standbys_warm_up_reads_each_ingest_partitions_last_record_and_writes_nothing(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """``OffsetsJob.warm_up`` reads up to the last stable offset (an open transaction's records
    are not waited for), a partition whose last offset is a transaction's marker or that is
    empty reads nothing, and no topic, checkpoint or sink row is written."""
    config = new_job_config(kafka_bootstrap, tmp_path)
    prepare_topics(config)
    plain = Producer({"bootstrap.servers": kafka_bootstrap})
    for value in (b"a", b"b", b"c"):
        plain.produce(config.ingest_topic, value, b"group-0", partition=0)
    plain.flush(30)
    committer = Committer(kafka_bootstrap, config.ingest_topic)
    committer.begin()
    committer.send("group-1", 1, b"committed")  # offset 0, its marker at 1
    committer.commit()
    committer.begin()
    committer.send("group-1", 1, b"open")  # offset 2: past the last stable offset
    ends_before = _ends(config)
    job = OffsetsJob.create(config, spark)
    status_before = job.sink.status()
    try:
        read = job.warm_up()
        status_after = job.sink.status()
    finally:
        committer.abort()
        job.sink.close()
    assert [(m.ingest_partition, m.ingest_offset, m.value) for m in read] == [(0, 2, b"c")]
    assert not Path(config.checkpoint_location).exists()
    assert _ends(config) == ends_before | {(config.ingest_topic, 1): 4}  # the abort's marker
    assert status_after == status_before


def _ends(config: JobConfig) -> dict[tuple[str, int], int]:
    return {
        (topic, p): end
        for topic in (
            config.ingest_topic,
            config.offsets_topic,
            config.responses_topic,
            config.dead_letter_topic,
        )
        for p, end in end_offsets(config.kafka_python_options(), topic).items()
    }


def test_a_standby_started_before_any_job_creates_no_topic(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    config = new_job_config(kafka_bootstrap, tmp_path)
    job = OffsetsJob.create(config, spark)
    try:
        assert job.warm_up() == []
    finally:
        job.sink.close()
    assert end_offsets(config.kafka_python_options(), config.ingest_topic) == {}
