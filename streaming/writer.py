"""The ``foreachBatch`` writer: makes a micro-batch's output durable, then acknowledges it.

Order matters and is Kafka's: a commit is acknowledged only once its record is replicated
(offsets topic, ``acks=all``) and readable (the sink), so the steps are
1. records → offsets topic, at the shard's partition, in Kafka's binary format;
2. records + progress → sink, one transaction, skipped if the batch id was already written;
   while the sink is unreachable the write is retried with backoff for up to
   ``sink_write_timeout_s`` (the query waits: nothing of the batch is acknowledged meanwhile),
   then the error fails the query loudly and a restart replays the batch;
3. responses → responses topic (one message per request, keyed by request id, encoded by the
   state function with ``state.formats.response_codec``); undecodable input → the dead-letter topic
   with its ingest position and reason (a Spark job only when the batch has any).
A replayed batch (after a crash) reproduces the same records and responses: the offsets topic
compacts duplicates away, the sink skips the batch id, clients ignore a second response.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from connectors.sinks import BatchProgress, Sink, SinkError
from state.formats.frames import RECORD_FRAME_SCHEMA

log = logging.getLogger("consumer_offsets.batches")

#: Producer settings of Spark's Kafka sink, under the user's ``kafka_options`` (which win).
#: A micro-batch writes its records in one burst and flushes at the end of each task, so large
#: producer batches cost no latency and save time (README, "Benchmark").
SINK_PRODUCER_DEFAULTS = {"kafka.batch.size": "262144", "kafka.linger.ms": "20"}


@dataclass
class WriterSettings:
    """Where and how the writer produces: topics, Kafka client options, compression, partitions
    and how long it waits out a sink outage."""

    kafka_options: Mapping[str, str]
    offsets_topic: str
    responses_topic: str
    dead_letter_topic: str
    compression: str
    partitions: int
    #: How long a batch's sink write is retried while the sink fails (0: fail at once).
    sink_write_timeout_s: float = 60.0


@dataclass
class BatchWriter:
    """Callable for ``DataStreamWriter.foreachBatch``; holds the progress across batches."""

    settings: WriterSettings
    sink: Sink
    #: Ingest offsets covered so far (partition → next offset), merged batch by batch.
    ingest_offsets: dict[int, int] = field(default_factory=dict)
    #: Shards still rebuilding from the offsets topic; the status is LOADING until none are.
    loading_shards: set[int] = field(default_factory=set)
    last_progress: BatchProgress | None = None

    def _kafka_writer(self, df: DataFrame, topic: str, compression: bool) -> None:
        writer = df.write.format("kafka").option("topic", topic)
        for key, value in (SINK_PRODUCER_DEFAULTS | dict(self.settings.kafka_options)).items():
            writer = writer.option(key, value)
        # Kafka acknowledges a commit only once replicated: acks=all with an idempotent producer
        # (which also keeps a shard's records in order across retries).
        writer = writer.option("kafka.acks", "all").option("kafka.enable.idempotence", "true")
        if compression:
            writer = writer.option("kafka.compression.type", self.settings.compression)
        writer.save()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        batch = batch.persist()
        try:
            self._write(batch, batch_id, started)
        finally:
            batch.unpersist()

    def _write(self, batch: DataFrame, batch_id: int, started: float) -> None:
        # Everything but the record bytes comes to the driver once, as Arrow.
        local = batch.drop("key", "value").toArrow()
        kinds = local["out"]
        records = local.filter(pc.equal(kinds, "record"))
        loaded = local.filter(pc.equal(kinds, "loaded"))
        stats = local.filter(pc.equal(kinds, "stats"))
        responses = local.filter(pc.equal(kinds, "response"))
        dead_letters = local.filter(pc.equal(kinds, "dead_letter"))

        if records.num_rows:
            self._kafka_writer(
                batch.where(F.col("out") == "record").select(
                    "key", "value", F.col("shard").alias("partition")
                ),
                self.settings.offsets_topic,
                compression=True,
            )

        sink_records = _sink_records(pa.concat_tables([loaded, records]))
        for shard, next_offset in zip(
            stats["shard"].to_pylist(), stats["next_offset"].to_pylist(), strict=True
        ):
            if next_offset is not None:
                self.ingest_offsets[shard] = max(self.ingest_offsets.get(shard, 0), next_offset)
        for shard, loaded_records in zip(
            stats["shard"].to_pylist(), stats["loaded_records"].to_pylist(), strict=True
        ):
            if loaded_records is not None:
                self.loading_shards.discard(shard)
        counters = {
            name: int(pc.sum(stats[name]).as_py() or 0)
            for name in ("input_rows", "commits_applied", "rejected", "tombstones", "state_keys")
        }
        progress = BatchProgress(
            batch_id=batch_id,
            ingest_offsets=dict(self.ingest_offsets),
            input_rows=counters["input_rows"],
            commits_applied=counters["commits_applied"],
            rejected=counters["rejected"],
            tombstones=counters["tombstones"],
            state_keys=counters["state_keys"],
            duration_ms=int((time.monotonic() - started) * 1000),
            timestamp_ms=int(time.time() * 1000),
        )
        self._write_sink(batch_id, sink_records, progress)

        # Answers last: a commit is acknowledged only once its record is durable and readable.
        if responses.num_rows:
            self._write_messages(batch, "response", self.settings.responses_topic)
        if dead_letters.num_rows:
            self._write_messages(batch, "dead_letter", self.settings.dead_letter_topic)

        self.last_progress = progress
        log.info(
            "batch %d: %d input rows, %d commits applied, %d rejected, %d tombstones, "
            "%d records, %d keys in state, %d ms",
            batch_id,
            progress.input_rows,
            progress.commits_applied,
            progress.rejected,
            progress.tombstones,
            records.num_rows,
            progress.state_keys,
            int((time.monotonic() - started) * 1000),
        )

    def _write_sink(self, batch_id: int, records: pa.Table, progress: BatchProgress) -> None:
        """Write the batch to the sink, waiting out an outage of up to ``sink_write_timeout_s``.

        Retrying is safe because a batch is one transaction and idempotent per batch id: a
        write whose COMMIT reached the server before the connection broke is skipped.
        """
        deadline = time.monotonic() + self.settings.sink_write_timeout_s
        backoff_s = 0.25
        attempt = 1
        while True:
            try:
                self.sink.write_batch(batch_id, records, progress)
                if not self.loading_shards:
                    self.sink.set_status("ACTIVE")
                if attempt > 1:
                    log.warning("batch %d: sink write succeeded on attempt %d", batch_id, attempt)
                return
            except SinkError as error:
                left_s = deadline - time.monotonic()
                if left_s <= 0:
                    log.error(
                        "batch %d: sink still failing after %d attempts, failing the query: %s",
                        batch_id,
                        attempt,
                        error,
                    )
                    raise
                log.warning(
                    "batch %d: sink write failed (attempt %d), retrying for %.0f s more: %s",
                    batch_id,
                    attempt,
                    left_s,
                    error,
                )
                time.sleep(min(backoff_s, left_s))
                backoff_s = min(backoff_s * 2, 5.0)
                attempt += 1

    def _write_messages(self, batch: DataFrame, out: str, topic: str) -> None:
        """Write the batch's ready-encoded messages of one kind
        (``state.formats.response_codec``)."""
        messages = batch.where(F.col("out") == out).select("key", "value")
        self._kafka_writer(messages, topic, compression=False)


def _sink_records(table: pa.Table) -> pa.Table:
    """Records in apply order (shard, seq) with RECORD_FRAME columns; ``value`` is not carried
    to the driver, so a tombstone is marked by null decoded columns and an empty-bytes value."""
    if not table.num_rows:
        return RECORD_FRAME_SCHEMA.empty_table()
    table = table.sort_by([("shard", "ascending"), ("seq", "ascending")])
    columns: dict[str, Any] = {}
    for field_ in RECORD_FRAME_SCHEMA:
        if field_.name in ("key", "value"):
            continue
        columns[field_.name] = table[field_.name].cast(field_.type)
    # The sink keys rows by their decoded columns; it needs only to know which are tombstones.
    tombstone = table["is_tombstone"]
    columns["key"] = pa.array([b""] * table.num_rows, pa.binary())
    columns["value"] = pc.if_else(
        tombstone, pa.scalar(None, pa.binary()), pa.scalar(b"", pa.binary())
    )
    return pa.table(columns, schema=RECORD_FRAME_SCHEMA)
