"""The engine's floor: the cheapest stateful query of the job's shape, measured in the same run.

Kafka source (the job's source options, ``--shards`` partitions, coalesced to the job's state
partitions) → ``applyInPandasWithState`` keyed by source partition that only counts its rows and
passes the message keys through → ``foreachBatch`` that produces one message per row (acks=all,
librdkafka, flushed), keyed by the request id. Same trigger, state store, shuffle partitions and
no-data-batch setting as the job. What the job does beyond this — decoding, the coordinator's
rules, the offsets topic, the sink — is its own cost; what this costs, no job of this shape on
this engine and machine avoids. The benchmark prints the job's latency figures beside it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from confluent_kafka import Producer
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from connectors.kafka.admin import KafkaAdmin, plain_topic_spec
from streaming.job import SOURCE_CONSUMER_DEFAULTS

_OUTPUT = T.StructType(
    [T.StructField("shard", T.IntegerType()), T.StructField("request_id", T.BinaryType())]
)
_STATE = T.StructType([T.StructField("rows", T.LongType())])


def _count(
    key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    """Count the shard's rows into its state; pass each message's key (the request id) on."""
    keys = [frame["key"] for frame in frames]
    request_ids = pd.concat(keys, ignore_index=True) if keys else pd.Series([], dtype=object)
    seen = int(state.get[0]) if state.exists else 0
    state.update((seen + len(request_ids),))
    yield pd.DataFrame({"shard": [int(key[0])] * len(request_ids), "request_id": request_ids})


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
        for shard, request_id in zip(
            table["shard"].to_pylist(), table["request_id"].to_pylist(), strict=True
        ):
            self._producer.produce(self.topic, key=request_id, value=b"", partition=shard)
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
        partitions: int,
        state_partitions: int,
        trigger: str,
        folder: Path,
    ) -> None:
        self.spark, self.bootstrap = spark, bootstrap
        self.ingest_topic = f"{prefix}.floor.ingest"
        self.answers_topic = f"{prefix}.floor.answers"
        self.partitions, self.state_partitions = partitions, state_partitions
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
            .load()
            .coalesce(self.state_partitions)
            .selectExpr("partition AS shard", "key")
        )
        output = source.groupBy("shard").applyInPandasWithState(
            _count, _OUTPUT, _STATE, "update", GroupStateTimeout.NoTimeout
        )
        settings = {
            "spark.sql.shuffle.partitions": str(self.state_partitions),
            "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        }
        for key, value in settings.items():
            self.spark.conf.set(key, value)
        self.query = (
            output.writeStream.queryName("floor")
            .outputMode("update")
            .foreachBatch(_Answer(self.bootstrap, self.answers_topic))
            .option("checkpointLocation", str(self.folder / "floor-checkpoint"))
            .trigger(processingTime=self.trigger)
            .start()
        )

    def stop(self) -> None:
        if self.query is not None:
            self.query.stop()
            self.query = None


def batch_ms(progress: list[dict[str, Any]], start: float, end: float) -> list[float]:
    """``triggerExecution`` ms of the batches with input that started in [start, end] (wall-clock
    epoch seconds), from a query's progress events."""
    out = []
    for p in progress:
        at = pd.Timestamp(p["timestamp"]).timestamp()
        if start <= at <= end and p.get("numInputRows"):
            out.append(float(p["durationMs"]["triggerExecution"]))
    return out


def summarize_batches(durations: list[float]) -> dict[str, float]:
    """Median and p90 of batch durations, seconds (NaN without batches)."""
    if not durations:
        return {"batches": 0, "batch_p50_s": float("nan"), "batch_p90_s": float("nan")}
    ordered = sorted(durations)
    return {
        "batches": len(ordered),
        "batch_p50_s": statistics.median(ordered) / 1000,
        "batch_p90_s": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] / 1000,
    }


def wait_idle(query: Any, seconds: float = 30.0) -> None:
    """Wait until ``query`` has run at least one batch (its first one plans the sources)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and query.lastProgress is None:
        time.sleep(0.1)
