"""The engine's floor: the cheapest stateful query of the job's shape, measured in the same run.

Kafka source (the job's source options and ingest partitions, coalesced to the job's state
partitions) → ``applyInPandasWithState`` keyed by the coordinator shard as the job keys it
(``streaming.spark.ingest.shard_of_key`` of the message key, the group id) that only counts its rows
and passes the request ids through → ``foreachBatch`` that produces one message per row
(acks=all, librdkafka, flushed), keyed by the request id. Same trigger and state store as the
job, and its query starts as the job's does (``streaming.spark.job.start_query``: shuffle
partitions, no-data batches, checkpoint file manager). What the job does beyond this
(decoding, the coordinator's rules, the offsets topic, the sink) is its own cost; what this
costs, no job of this shape on this engine and machine avoids. The benchmark prints the job's
figures beside it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from confluent_kafka import Producer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from connectors.kafka.admin import KafkaAdmin, plain_topic_spec
from streaming.spark.ingest import shard_of_key
from streaming.spark.job import SOURCE_CONSUMER_DEFAULTS, start_query

_OUTPUT = T.StructType(
    [T.StructField("partition", T.IntegerType()), T.StructField("request_id", T.BinaryType())]
)
_STATE = T.StructType([T.StructField("rows", T.LongType())])


def _count(
    key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    """Count the shard's rows into its state; pass each message's request id (the header the
    load sets) on, with its ingest partition."""
    rows = pd.concat(list(frames), ignore_index=True)
    seen = int(state.get[0]) if state.exists else 0
    state.update((seen + len(rows),))
    yield pd.DataFrame({"partition": rows["partition"], "request_id": rows["request_id"]})


class _Answer:
    """foreachBatch: one message per row to the answers topic, keyed by the request id."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self._producer: Producer | None = None

    def __call__(self, batch: Any, _batch_id: int) -> None:
        if self._producer is None:
            self._producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 2,
                }
            )
        table = batch.toArrow()
        for partition, request_id in zip(
            table["partition"].to_pylist(), table["request_id"].to_pylist(), strict=True
        ):
            self._producer.produce(self.topic, key=request_id, value=b"", partition=partition)
        left = self._producer.flush(60)
        if left:
            raise RuntimeError(f"floor: {left} answers not acknowledged")


class FloorQuery:
    """The floor query on its own ingest and answers topics (``<prefix>.floor.*``)."""

    def __init__(
        self,
        spark: SparkSession,
        bootstrap: str,
        prefix: str,
        shards: int,
        partitions: int,
        state_partitions: int,
        trigger: str,
        folder: Path,
    ) -> None:
        self.spark, self.bootstrap = spark, bootstrap
        self.ingest_topic = f"{prefix}.floor.ingest"
        self.answers_topic = f"{prefix}.floor.answers"
        self.shards, self.partitions = shards, partitions
        self.state_partitions = state_partitions
        self.trigger, self.folder = trigger, folder
        self.query: Any = None

    def start(self) -> None:
        with KafkaAdmin({"bootstrap_servers": self.bootstrap}) as admin:
            admin.ensure_topics(
                [
                    plain_topic_spec(self.ingest_topic, self.partitions, 1),
                    plain_topic_spec(self.answers_topic, self.partitions, 1),
                ]
            )
        reader = self.spark.readStream.format("kafka")
        for key, value in SOURCE_CONSUMER_DEFAULTS.items():
            reader = reader.option(key, value)
        source = (
            reader.option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", self.ingest_topic)
            .option("startingOffsets", "latest")
            .option("includeHeaders", "true")
            .load()
            .coalesce(self.state_partitions)
        )
        source = source.select(
            shard_of_key(F.col("key"), self.shards).alias("shard"),
            F.col("partition"),
            F.element_at(F.col("headers"), 1)["value"].alias("request_id"),
        )
        output = source.groupBy("shard").applyInPandasWithState(
            _count, _OUTPUT, _STATE, "update", GroupStateTimeout.NoTimeout
        )
        checkpoint = str(self.folder / "floor-checkpoint")
        writer = (
            output.writeStream.queryName("floor")
            .outputMode("update")
            .foreachBatch(_Answer(self.bootstrap, self.answers_topic))
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=self.trigger)
        )
        # With the job's settings at its query's start.
        self.query = start_query(self.spark, writer, self.state_partitions, checkpoint)

    def stop(self) -> None:
        if self.query is not None:
            self.query.stop()
            self.query = None


def summarize_batches(progress: list[dict[str, Any]], start: float, end: float) -> dict[str, Any]:
    """Median and p90 of the durations of the batches with input that started in [start, end]
    (wall-clock epoch seconds), seconds (NaN without batches), and the median of each part
    Spark times (``durationMs``: planning, offsets, ``addBatch`` = the state stage and the
    writer, commit)."""
    batches = [
        p
        for p in progress
        if start <= pd.Timestamp(p["timestamp"]).timestamp() <= end and p.get("numInputRows")
    ]
    if not batches:
        return {"batches": 0, "batch_p50_s": float("nan"), "batch_p90_s": float("nan")}
    ordered = sorted(float(p["durationMs"]["triggerExecution"]) for p in batches)
    parts = sorted({name for p in batches for name in p["durationMs"]})
    return {
        "batches": len(ordered),
        "batch_p50_s": statistics.median(ordered) / 1000,
        "batch_p90_s": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] / 1000,
        "batch_parts_p50_ms": {
            name: statistics.median(p["durationMs"].get(name, 0) for p in batches) for name in parts
        },
    }
