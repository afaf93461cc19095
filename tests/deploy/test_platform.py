"""The pipes everything else stands on: a real Kafka broker, Spark's Kafka source and sink
(Maven-resolved connector jars), Python workers from the project's interpreter, a SQLite sink
written from ``foreachBatch``. If one of these fails, nothing above it can pass."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from connectors.runtime import HOME_ENV
from streaming.spark.session import jar_artifact, pyspark_jar_conflicts, spark_jars

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tests.fixtures.kafka import TopicFactory

QUERY_TIMEOUT_S = 180


def _produce(bootstrap: str, topic: str, records: list[tuple[str, dict[str, object]]]) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        key_serializer=str.encode,
        value_serializer=lambda value: json.dumps(value).encode(),
        acks="all",
    )
    try:
        sent = [producer.send(topic, key=key, value=value) for key, value in records]
        for future in sent:
            future.get(timeout=30)  # raises if the record was not acknowledged
    finally:
        producer.close()


def _read_stream(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def test_kafka_source_lands_latest_value_per_key_in_sqlite(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    topic = topic_factory(partitions=3)
    records: list[tuple[str, dict[str, object]]] = [
        ("group-a", {"offset": 1, "metadata": "first"}),
        ("group-b", {"offset": 10, "metadata": ""}),
        ("group-a", {"offset": 2, "metadata": "second"}),
        ("group-c", {"offset": 7, "metadata": "only"}),
        ("group-b", {"offset": 5, "metadata": "rewind"}),  # a lower value still replaces
        ("group-a", {"offset": 3, "metadata": "third"}),
    ]
    _produce(kafka_bootstrap, topic, records)

    database = tmp_path / "latest.db"
    with sqlite3.connect(database) as conn:
        conn.execute(
            "CREATE TABLE latest (key TEXT PRIMARY KEY, committed INTEGER NOT NULL,"
            " metadata TEXT NOT NULL, kafka_partition INTEGER NOT NULL,"
            " kafka_offset INTEGER NOT NULL)"
        )

    def write_latest(batch: DataFrame, batch_id: int) -> None:
        # One key lives in one partition, so (partition, offset) order is the key's log order.
        rows = sorted(batch.collect(), key=lambda row: (row["partition"], row["offset"]))
        with sqlite3.connect(database) as conn:
            conn.executemany(
                "INSERT INTO latest VALUES (?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET"
                " committed = excluded.committed, metadata = excluded.metadata,"
                " kafka_partition = excluded.kafka_partition,"
                " kafka_offset = excluded.kafka_offset",
                [
                    (
                        r["key"],
                        r["value"]["offset"],
                        r["value"]["metadata"],
                        r["partition"],
                        r["offset"],
                    )
                    for r in rows
                ],
            )

    parsed = _read_stream(spark, kafka_bootstrap, topic).select(
        F.col("key").cast("string").alias("key"),
        F.from_json(F.col("value").cast("string"), "offset BIGINT, metadata STRING").alias("value"),
        "partition",
        "offset",
    )
    query = (
        parsed.writeStream.foreachBatch(write_latest)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish in time"
    finally:
        query.stop()
    assert query.exception() is None

    with sqlite3.connect(database) as conn:
        rows = conn.execute("SELECT key, committed, metadata FROM latest ORDER BY key").fetchall()
        positions = conn.execute("SELECT kafka_partition, kafka_offset FROM latest").fetchall()
    assert rows == [("group-a", 3, "third"), ("group-b", 5, "rewind"), ("group-c", 7, "only")]
    assert all(0 <= partition < 3 and offset >= 0 for partition, offset in positions)


def test_kafka_sink_writes_records_a_consumer_reads_back(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    source = topic_factory(partitions=2)
    target = topic_factory(partitions=2)
    records: list[tuple[str, dict[str, object]]] = [
        (f"key-{i}", {"offset": i, "metadata": f"m{i}"}) for i in range(20)
    ]
    _produce(kafka_bootstrap, source, records)

    query = (
        _read_stream(spark, kafka_bootstrap, source)
        .select("key", F.upper(F.col("value").cast("string")).alias("value"))
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish in time"
    finally:
        query.stop()
    assert query.exception() is None

    received = _consume_all(kafka_bootstrap, target, expected=len(records))
    assert sorted(received) == sorted((key, json.dumps(value).upper()) for key, value in records)


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple[str, str]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        received: list[tuple[str, str]] = []
        deadline = time.monotonic() + 60
        while len(received) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                received.extend((m.key.decode(), m.value.decode()) for m in batch)
        return received
    finally:
        consumer.close()


def test_spark_jars_names_the_setup_script_when_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"deploy/setup\.sh"):
        spark_jars()


def test_spark_jars_hold_the_connector_and_nothing_pyspark_ships() -> None:
    artifacts = {jar_artifact(jar.name) for jar in spark_jars()}
    assert {"spark-sql-kafka-0-10_2.13", "kafka-clients", "commons-pool2"} <= artifacts
    assert pyspark_jar_conflicts() == []


@pytest.mark.parametrize(
    ("file_name", "artifact"),
    [
        ("spark-sql-kafka-0-10_2.13-4.1.1.jar", "spark-sql-kafka-0-10_2.13"),
        (
            "spark-token-provider-kafka-0-10_2.13-4.1.0-preview1.jar",
            "spark-token-provider-kafka-0-10_2.13",
        ),
        ("kafka-clients-3.9.1.jar", "kafka-clients"),
        ("zstd-jni-1.5.7-6.jar", "zstd-jni"),
        ("hive-exec-2.3.10-core.jar", "hive-exec"),
        ("scala-library-2.13.17.jar", "scala-library"),
        ("commons-pool2-2.12.1.jar", "commons-pool2"),
    ],
)
def test_jar_artifact(file_name: str, artifact: str) -> None:
    assert jar_artifact(file_name) == artifact


def test_a_conflicting_jar_is_reported(tmp_path: Path) -> None:
    clash = tmp_path / "scala-library-2.13.16.jar"
    clash.touch()
    assert pyspark_jar_conflicts([clash, tmp_path / "commons-pool2-2.12.1.jar"]) == [clash.name]
