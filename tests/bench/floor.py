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

``answers="tasks"``: the state function itself produces its shard's answers from the task
(acks=all, flushed before it returns) and the query's sink is ``noop``, so the driver keeps
progress only: the ceiling of moving the job's side effects into its state tasks.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from connectors.kafka.admin import KafkaAdmin, plain_topic_spec
from connectors.kafka.producer import DurableProducer
from streaming.spark.ingest import shard_of_key
from streaming.spark.job import SOURCE_CONSUMER_DEFAULTS, start_query

_OUTPUT = T.StructType(
    [T.StructField("partition", T.IntegerType()), T.StructField("request_id", T.BinaryType())]
)
_STATE = T.StructType([T.StructField("rows", T.LongType())])


#: Where the answers are produced from: the driver's ``foreachBatch``, or the state tasks.
Answers = Literal["driver", "tasks"]

#: The tasks variant's producer in each Python worker, by bootstrap servers: made at the worker's
#: first call and kept with the worker (Spark reuses them), as a job's would be.
_TASK_PRODUCERS: dict[str, DurableProducer] = {}


def _produce_answers(
    producer: DurableProducer, topic: str, partitions: list[int], request_ids: list[bytes]
) -> None:
    """One empty message per request, keyed by its request id, on its ingest partition; returns
    once Kafka acknowledged all (acks=all)."""
    producer.send(topic, request_ids, [b""] * len(request_ids), partitions)
    producer.flush(60)


def _count_rows(frames: Iterator[pd.DataFrame], state: GroupState) -> pd.DataFrame:
    """The shard's rows, counted into its state."""
    rows = pd.concat(list(frames), ignore_index=True)
    seen = int(state.get[0]) if state.exists else 0
    state.update((seen + len(rows),))
    return rows


def _count(
    key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    """Count the shard's rows; pass each message's request id (the header the load sets) on,
    with its ingest partition."""
    rows = _count_rows(frames, state)
    yield pd.DataFrame({"partition": rows["partition"], "request_id": rows["request_id"]})


def _count_and_answer(
    bootstrap: str,
    topic: str,
    key: tuple[Any, ...],
    frames: Iterator[pd.DataFrame],
    state: GroupState,
) -> Iterator[pd.DataFrame]:
    """Count the shard's rows and answer each from the task (flushed before returning); emits
    nothing."""
    rows = _count_rows(frames, state)
    producer = _TASK_PRODUCERS.get(bootstrap)
    if producer is None:
        producer = _TASK_PRODUCERS[bootstrap] = DurableProducer(bootstrap, {}, "none")
    _produce_answers(producer, topic, rows["partition"].tolist(), rows["request_id"].tolist())
    return iter(())


class _Answer:
    """foreachBatch: one message per row to the answers topic, keyed by the request id."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer, self.topic = DurableProducer(bootstrap, {}, "none"), topic

    def __call__(self, batch: Any, _batch_id: int) -> None:
        table = batch.toArrow()
        _produce_answers(
            self.producer,
            self.topic,
            table["partition"].to_pylist(),
            table["request_id"].to_pylist(),
        )


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
        answers: Answers = "driver",
    ) -> None:
        self.spark, self.bootstrap = spark, bootstrap
        self.ingest_topic = f"{prefix}.floor.ingest"
        self.answers_topic = f"{prefix}.floor.answers"
        self.shards, self.partitions = shards, partitions
        self.state_partitions = state_partitions
        self.trigger, self.folder = trigger, folder
        self.answers = answers
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
        tasks = self.answers == "tasks"
        count = partial(_count_and_answer, self.bootstrap, self.answers_topic) if tasks else _count
        output = source.groupBy("shard").applyInPandasWithState(
            count, _OUTPUT, _STATE, "update", GroupStateTimeout.NoTimeout
        )
        checkpoint = str(self.folder / "floor-checkpoint")
        writer = output.writeStream.queryName("floor").outputMode("update")
        # The tasks answered: the driver keeps progress only.
        writer = (
            writer.format("noop")
            if tasks
            else writer.foreachBatch(_Answer(self.bootstrap, self.answers_topic))
        )
        writer = writer.option("checkpointLocation", checkpoint).trigger(
            processingTime=self.trigger
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
