"""The mirror: a real Kafka cluster's committed offsets kept in the queryable sink.

A query reads the source's ``__consumer_offsets`` (read-only: assigned, never committing)
read_committed, as Kafka's coordinator loads it (a transactional offset commit once its
transaction commits, never an aborted one), and applies every record, in log order, to the
job's sink tables: commits upsert, tombstones delete, classic and consumer-protocol (KIP-848)
groups with their members; other record types are counted. No Spark state: the sink keeps the
compacted view, and a key lives in one partition. The log-end offsets of the committed topics
are refreshed into the sink on an interval, so lag is answered from the sink alone. A sink
holds one cluster (by its id); it is LOADING until the mirror read up to the last stable
offsets seen at start, then ACTIVE. Batch ids make writes idempotent.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from connectors.client.offsets_reader import beginning_offsets, end_offsets
from connectors.kafka.admin import KafkaAdmin
from connectors.sinks import BatchProgress, Sink, open_sink
from connectors.sinks.retry import with_sink_retries
from state.shard import (
    RecordFormatError,
    classify_key,
    consumer_group_records,
    positioned_record_frame_of,
)
from streaming.config import MirrorConfig
from streaming.spark.checkpoint_files import planned_positions_reader
from streaming.spark.lifecycle import SOURCE_WAITS_FOR_KAFKA, QueryLifecycle
from streaming.spark.log_end_refresher import LogEndRefresher
from streaming.spark.writer import read_batch

log = logging.getLogger("consumer_offsets.mirror")

#: Kafka's offsets topic, the mirror's only source.
CONSUMER_OFFSETS = "__consumer_offsets"
QUERY_NAME = "consumer-offsets-mirror"
#: Records per micro-batch at most: a catch-up reaches the sink in steps.
MAX_RECORDS_PER_BATCH = 500_000


@dataclass
class MirrorWriter:
    """``foreachBatch``: a batch of ``__consumer_offsets`` records into the sink, in log order.
    ``positions`` (partition → next offset) is stored with each batch's progress: where
    ``planned_ends`` (batch id → Spark's planned end offsets) says the batch ends;
    ``catch_up_to`` holds the last stable offsets seen at start."""

    sink: Sink
    catch_up_to: dict[int, int]
    planned_ends: Callable[[int], dict[int, int]]
    positions: dict[int, int] = field(default_factory=dict)
    loading: bool = True
    other_types: Counter[str] = field(default_factory=Counter)
    sink_write_timeout_s: float = 60.0
    #: Set when the mirror stops: a batch no longer waits for Kafka (:func:`read_batch`).
    stopping: threading.Event = field(default_factory=threading.Event)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        rows = batch.select("partition", "offset", "key", "value")
        table = read_batch(rows.toArrow, batch_id, self.stopping, log)
        table = table.sort_by([("partition", "ascending"), ("offset", "ascending")])
        read = time.monotonic()
        keys = table["key"].combine_chunks()
        values = table["value"].combine_chunks()
        unreadable: list[RecordFormatError] = []
        frame, positions, _ = positioned_record_frame_of(keys, values, unreadable.append)
        consumer = consumer_group_records(keys, values, unreadable.append)
        members = consumer.members
        if consumer.groups.num_rows:  # merged into the frame in log order
            merged = pa.concat_tables([frame, consumer.groups])
            order = np.argsort(np.concatenate([positions, consumer.positions]), kind="stable")
            frame = merged.take(pa.array(order))
        held = pc.is_in(pc.binary_slice(keys, 0, 2), value_set=_HELD_TYPES)
        for key in keys.filter(pc.invert(held)).to_pylist():
            self.other_types[classify_key(key).name] += 1
        if unreadable:
            log.warning(
                "batch %d: %d record(s) not readable, skipped (e.g. %s)",
                batch_id,
                len(unreadable),
                unreadable[0],
            )
        # Spark's planned end, not the last record + 1: read_committed skips transaction
        # markers and aborted records, and a partition ending with one would never be covered.
        self.positions.update(self.planned_ends(batch_id))
        tombstones = int(pc.sum(pc.is_null(values).cast(pa.int64())).as_py() or 0)
        progress = BatchProgress(
            batch_id=batch_id,
            ingest_offsets=dict(self.positions),
            input_rows=table.num_rows,
            commits_applied=frame.num_rows
            - int(pc.sum(pc.is_null(frame["value"]).cast(pa.int64())).as_py() or 0),
            rejected=len(unreadable),
            tombstones=tombstones,
            duration_ms=int((time.monotonic() - started) * 1000),
            timestamp_ms=int(time.time() * 1000),
            group_commits=_commits_by_group(frame),
        )
        decoded = time.monotonic()
        # A sink outage is waited out: the batch is one idempotent transaction.
        with_sink_retries(
            lambda: self.sink.write_batch(batch_id, frame, progress, members),
            self.sink_write_timeout_s,
            f"batch {batch_id}",
            log,
        )
        written = time.monotonic()
        if self.loading and self.caught_up():
            self.loading = False
            self.sink.set_status("ACTIVE", "mirroring: caught up")
        log.info(
            "batch %d: %d records (%d applied, %d tombstones, %d of other types), %d ms "
            "(read %d, decode %d, sink %d)",
            batch_id,
            table.num_rows,
            frame.num_rows + members.num_rows,
            tombstones,
            table.num_rows - frame.num_rows - members.num_rows - len(unreadable),
            (written - started) * 1000,
            (read - started) * 1000,
            (decoded - read) * 1000,
            (written - decoded) * 1000,
        )

    def caught_up(self) -> bool:
        """Whether every partition was read up to the last stable offsets seen at start."""
        return all(self.positions.get(p, 0) >= end for p, end in self.catch_up_to.items())


#: Record types the sink holds: offset commits (0, 1), classic group metadata (2), consumer
#: group metadata (3: the group epoch) and consumer group members (5).
_HELD_TYPES = pa.array([b"\x00\x00", b"\x00\x01", b"\x00\x02", b"\x00\x03", b"\x00\x05"])


#: Kafka's TOPIC_AUTHORIZATION_FAILED.
_TOPIC_AUTHORIZATION_FAILED = 29
#: The Spark Kafka source's consumer group ids start with this (``groupIdPrefix``).
SOURCE_GROUP_ID_PREFIX = "consumer-offsets-mirror"
#: What the mirror's principal needs on the source cluster (README, "Security").
SOURCE_ACLS = (
    "READ on topic __consumer_offsets, DESCRIBE on topic * (log-end offsets of the groups' "
    f"topics) and READ on group prefix {SOURCE_GROUP_ID_PREFIX} (Spark's source consumers)"
)


class SourceAccessError(RuntimeError):
    """The source cluster's ACLs keep the mirror's principal from ``__consumer_offsets``."""


def _commits_by_group(frame: pa.Table) -> dict[str, int]:
    """OffsetCommit records (one per partition committed) per group in a batch's records."""
    commits = pc.and_(pc.equal(frame["kind"], "offset"), pc.is_valid(frame["value"]))
    groups = frame["group_id"].filter(commits)
    if not len(groups):
        return {}
    counts = pc.value_counts(groups).flatten()
    return dict(zip(counts[0].to_pylist(), counts[1].to_pylist(), strict=True))


@dataclass
class OffsetsMirror:
    """One running mirror query and its sink."""

    config: MirrorConfig
    spark: SparkSession
    sink: Sink
    writer: MirrorWriter | None = None
    lifecycle: QueryLifecycle | None = None
    #: Called once the mirror's own heartbeat runs, before its query starts (the lease keeper's
    #: start-up beat stops: ``LeaseKeeper.started``).
    on_alive: Callable[[], None] = lambda: None

    @property
    def query(self) -> StreamingQuery | None:
        return self.lifecycle.query if self.lifecycle else None

    @classmethod
    def create(cls, config: MirrorConfig, spark: SparkSession | None = None) -> OffsetsMirror:
        """A mirror for ``config`` on ``spark`` (default: a new session), its sink opened."""
        if spark is None:
            from streaming.spark.session import spark_session

            spark = spark_session()
        return cls(config, spark, open_sink(config.sink_url, keep_history=config.keep_history))

    def start(self) -> StreamingQuery:
        """Mark the sink LOADING until the records up to today's end offsets are in, and start."""
        config = self.config
        with KafkaAdmin(config.kafka_python_options()) as admin:
            cluster_id = admin.cluster_id()
            # Fails at once where the principal may not see __consumer_offsets (Spark's source
            # would fail later, less clearly).
            code = admin.topic_error(CONSUMER_OFFSETS)
        if code == _TOPIC_AUTHORIZATION_FAILED:
            raise SourceAccessError(
                f"TOPIC_AUTHORIZATION_FAILED ({code}): the source cluster's ACLs do not let this "
                f"principal describe {CONSUMER_OFFSETS}; grant it {SOURCE_ACLS}"
            )
        if code:
            raise SourceAccessError(f"{CONSUMER_OFFSETS} cannot be described: Kafka error {code}")
        # Before anything is written: a sink that holds another cluster is left as it is.
        self.sink.bind_source_cluster(cluster_id, config.cluster_name)
        # The last stable offsets: read_committed reads no further while a transaction is open.
        ends = end_offsets(
            {**config.kafka_python_options(), "isolation_level": "read_committed"},
            CONSUMER_OFFSETS,
        )
        starts = beginning_offsets(config.kafka_python_options(), CONSUMER_OFFSETS)
        detail = f"mirroring {config.cluster_name}: catching up to offsets {sum(ends.values()):,}"
        lifecycle = self.lifecycle = QueryLifecycle(self.spark, config.checkpoint_location)
        positions: dict[int, int] = {}
        resumed = lifecycle.checkpoint_exists()
        if resumed:
            positions = dict(self.sink.status().ingest_offsets)
            self.sink.set_status("LOADING", detail)
        else:
            # A new checkpoint restarts batch ids: the sink view starts over with it.
            self.sink.reset("LOADING", detail)
        # Nothing left to read where compaction or retention removed everything up to the end.
        for partition, start in starts.items():
            positions[partition] = max(positions.get(partition, 0), start)
        planned = planned_positions_reader(self.spark, config.checkpoint_location)
        self.writer = MirrorWriter(
            self.sink,
            ends,
            lambda batch_id: planned(batch_id).get(CONSUMER_OFFSETS, {}),
            positions,
            sink_write_timeout_s=config.sink_write_timeout_s,
            stopping=lifecycle.stopping,
        )
        if self.writer.caught_up():
            self.writer.loading = False
            self.sink.set_status("ACTIVE", f"mirroring {config.cluster_name}: caught up")
        reader = self.spark.readStream.format("kafka")
        for key, value in (SOURCE_WAITS_FOR_KAFKA | config.spark_kafka_options()).items():
            reader = reader.option(key, value)
        source = (
            # Assigned, not subscribed: Spark finds subscribed topics by listing them, and a
            # topic listing leaves internal topics out.
            reader.option("assign", json.dumps({CONSUMER_OFFSETS: sorted(ends)}))
            # What Kafka's coordinator loads: a read_uncommitted read shows an aborted or a
            # still open transaction's offset commits as ordinary ones.
            .option("kafka.isolation.level", "read_committed")
            .option("startingOffsets", "earliest")
            # Compaction and retention remove records of __consumer_offsets all the time.
            .option("failOnDataLoss", "false")
            .option("kafka.fetch.max.wait.ms", "1")
            .option("groupIdPrefix", SOURCE_GROUP_ID_PREFIX)
            .option("maxOffsetsPerTrigger", str(MAX_RECORDS_PER_BATCH))
            .load()
        )
        writer = (
            source.writeStream.queryName(QUERY_NAME)
            .foreachBatch(self.writer)
            .option("checkpointLocation", config.checkpoint_location)
            .trigger(processingTime=config.trigger_interval)
        )
        # Spark's AdminClient-based offset reader sees no records in an internal topic (a batch
        # read of __consumer_offsets counts 0 with it, every record with the consumer-based one).
        settings = {"spark.sql.streaming.kafka.useDeprecatedOffsetFetching": "true"}
        query = lifecycle.start(writer, settings)
        lifecycle.keep_alive(self.sink, config.source_bootstrap_servers, "mirror")
        self.on_alive()
        log_end = LogEndRefresher(
            self.sink, config.kafka_python_options(), config.log_end_interval_s
        )
        log_end.start()
        lifecycle.beside(log_end)
        if config.keep_history:
            lifecycle.keep_history_for(
                self.sink,
                config.sink_url,
                config.history_retention_ms,
                config.history_retention_check_interval_ms,
            )
        return query

    def other_record_types(self) -> dict[str, int]:
        """Records of types the sink does not hold, by Kafka's name, since start."""
        return dict(self.writer.other_types) if self.writer else {}

    def stop(self) -> None:
        """Stop the query and its companions; the sink says STOPPED if the query started."""
        if self.lifecycle is not None and self.lifecycle.stop():
            self.sink.set_status("STOPPED", f"mirroring {self.config.cluster_name}: stopped")
