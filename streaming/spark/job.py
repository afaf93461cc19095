"""The offset manager's Structured Streaming query: ingest topics → shard states
(``streaming.spark.value_states``) → offsets topic, responses and sink.

:class:`OffsetsJob` runs the start ``streaming.spark.start_plan`` plans. The sink says STARTING
(or LOADING) until the first micro-batch completed, then ACTIVE; every shard gets a marker at
start, so that batch runs at once and pays the cold query's costs before ACTIVE.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, Row, SparkSession
from pyspark.sql.streaming import DataStreamReader, DataStreamWriter, StreamingQuery

from connectors.client.broker_offsets import BrokerOffsets
from connectors.client.offsets_reader import end_offsets
from connectors.sinks import Sink, absolute_sink_url, open_sink
from connectors.sinks.retention import HistoryRetention
from streaming.config import JobConfig
from streaming.spark.checkpoint_files import (
    committed_positions,
    move_aside,
    planned_positions_reader,
)
from streaming.spark.ingest import LOAD_MARKER, ingest_messages
from streaming.spark.lifecycle import SOURCE_WAITS_FOR_KAFKA, QueryLifecycle
from streaming.spark.output import OUTPUT_SCHEMA
from streaming.spark.processor import ProcessorSettings
from streaming.spark.start_plan import CheckpointFacts, SinkFacts, StartPlan, plan_start
from streaming.spark.state_metadata import earlier_release, relocate_state_metadata
from streaming.spark.state_shards import StateLayout, checkpoint_layout, record_layout
from streaming.spark.topics import ensure_topics, ingest_layout, start_expiry_ticks, write_markers
from streaming.spark.value_states import ShardProcessor
from streaming.spark.writer import BatchWriter, WriterSettings, transactional_id

log = logging.getLogger(__name__)

QUERY_NAME = "consumer-offsets"

#: The Spark Kafka source's consumer group ids start with this (``groupIdPrefix``): the job's
#: principal needs READ on GROUP PREFIXED ``consumer-offsets-job`` where Kafka has ACLs.
SOURCE_GROUP_ID_PREFIX = "consumer-offsets-job"
#: Consumer settings of the ingest source, under the user's ``kafka_options`` (which win). Each
#: task's consumer waits ``fetch.max.wait.ms`` at the end of its offset range, once per
#: partition: Kafka's 500 ms would hold every small batch. A Kafka outage is waited out.
SOURCE_CONSUMER_DEFAULTS = {
    "kafka.fetch.max.wait.ms": "1",
    "groupIdPrefix": SOURCE_GROUP_ID_PREFIX,
    **SOURCE_WAITS_FOR_KAFKA,
}
#: Consumer settings of the ingest source over the user's: a request produced in a Kafka
#: transaction is read once the transaction commits, never if it aborts (a batch ends at the
#: last stable offset; markers and aborted records are skipped).
SOURCE_CONSUMER_FIXED = {"kafka.isolation.level": "read_committed"}


def _log_tenants(config: JobConfig) -> None:
    """Log who may do what and, with tenants, what the cluster must grant."""
    if not config.tenants:
        log.info(
            "no tenants configured: every request on %s is applied unchecked "
            "(Kafka without an authorizer)",
            config.ingest_topic,
        )
        return
    for tenant in config.tenants:
        log.info(
            "tenant %s: requests on %s checked against %d ACLs, answers on %s",
            tenant.name,
            tenant.ingest_topic,
            len(tenant.acls),
            tenant.responses_topic,
        )
    # The job cannot tell who wrote a message: the cluster's ACLs on these topics are the check.
    log.info(
        "requests on %s are the operators': unchecked, and expiry ticks are honoured there only; "
        "grant WRITE on it to operators (super.users) alone",
        config.ingest_topic,
    )
    log.info(
        "grant each tenant's principal WRITE on its ingest topic and READ on its responses topic; "
        "nobody but the job may WRITE %s, %s, %s or the tenants' responses topics",
        config.offsets_topic,
        config.responses_topic,
        config.dead_letter_topic,
    )


def state_partitions(config: JobConfig, spark: SparkSession, shards: int | None = None) -> int:
    """Spark partitions of the shard state: ``config.state_partitions``, else the cluster's
    cores; at most the state ``shards`` (default ``config.partitions``)."""
    wanted = config.state_partitions or spark.sparkContext.defaultParallelism
    return max(1, min(int(wanted), shards or config.partitions))


def query_settings(partitions: int) -> dict[str, str]:
    """The settings the query starts with: the state's partitions (a task each per batch; the
    checkpoint keeps the count), and no no-data batches (expiry follows the ingest's ticks)."""
    return {
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    }


def start_query(
    spark: SparkSession, writer: DataStreamWriter, partitions: int, checkpoint_location: str
) -> StreamingQuery:
    """Start ``writer``'s query as the job starts its own."""
    lifecycle = QueryLifecycle(spark, checkpoint_location)
    return lifecycle.start(writer, query_settings(partitions))


class StartInterrupted(Exception):
    """A stop signal came while the job was starting: nothing was acknowledged."""


def last_records(
    client_options: Mapping[str, Any], topics: Iterable[str]
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Spark's Kafka source's starting and ending offsets (as its JSON) of each partition's
    last record in ``topics`` up to its last stable offset (read_committed, as the job reads);
    an empty range where a partition holds none."""
    with BrokerOffsets({**client_options, "isolation_level": "read_committed"}) as broker:
        ends = broker.topic_end_offsets(topics)
        beginnings = broker.beginning_offsets(ends)
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for tp, end in ends.items():
        starting.setdefault(tp.topic, {})[str(tp.partition)] = max(beginnings[tp], end - 1)
        ending.setdefault(tp.topic, {})[str(tp.partition)] = end
    return starting, ending


def _stop_if(interrupted: Callable[[], bool], before: str) -> None:
    if interrupted():
        raise StartInterrupted(f"stopped before {before}")


def read_checkpoint(spark: SparkSession, location: str) -> CheckpointFacts:
    """What the checkpoint at ``location`` holds (a moved one's schema paths fixed first)."""
    if not QueryLifecycle(spark, location).checkpoint_exists():
        return CheckpointFacts()
    earlier = earlier_release(relocate_state_metadata(spark, location))
    layout = checkpoint_layout(spark, location)
    return CheckpointFacts(
        exists=True,
        layout=layout,
        earlier_release=earlier,
        # Read for a migration only.
        committed=committed_positions(spark, location) if earlier or not layout else {},
    )


@dataclass
class OffsetsJob:
    """One running instance of the query, with the sink it writes to."""

    config: JobConfig
    spark: SparkSession
    sink: Sink
    writer: BatchWriter | None = None
    plan: StartPlan | None = None
    lifecycle: QueryLifecycle | None = None
    #: The deployment lease (name, epoch, holder, TTL) the Python workers' sink writes are
    #: fenced by (``LeaseKeeper.fence_token``); None: no lease.
    lease: tuple[str, int, str, int] | None = None
    #: Called once the job's own heartbeat runs, before its query starts (the lease keeper's
    #: start-up beat stops: ``LeaseKeeper.started``).
    on_alive: Callable[[], None] = lambda: None
    #: Each ingest topic's partition count, read at start.
    _ingest_layout: dict[str, int] = field(default_factory=dict)

    @property
    def query(self) -> StreamingQuery | None:
        return self.lifecycle.query if self.lifecycle else None

    @property
    def retention(self) -> HistoryRetention | None:
        return self.lifecycle.retention if self.lifecycle else None

    @property
    def state_layout(self) -> StateLayout:
        return self.plan.layout if self.plan else StateLayout(1)

    @property
    def state_shards(self) -> int:
        return self.state_layout.shards

    @classmethod
    def create(cls, config: JobConfig, spark: SparkSession | None = None) -> OffsetsJob:
        """A job for ``config`` on ``spark`` (default: a new session), its sink opened."""
        if spark is None:
            from streaming.spark.session import spark_session

            spark = spark_session(master=config.spark_master)
        return cls(config, spark, open_sink(config.sink_url, keep_history=config.keep_history))

    def start(self, interrupted: Callable[[], bool] = lambda: False) -> StreamingQuery:
        """Create the topics, plan the start, migrate an earlier release's checkpoint, set the
        sink's status and start the query. :class:`StartInterrupted` when ``interrupted()``
        holds before a step that creates or writes something."""
        config = self.config
        log.info("starting with %s", config.redacted())
        _log_tenants(config)
        _stop_if(interrupted, "creating topics")
        ensure_topics(config)
        self._ingest_layout = ingest_layout(config)
        _stop_if(interrupted, "writing the checkpoint or the sink")
        # Planned before anything is written: a layout the checkpoint refuses fails here.
        status = self.sink.status()
        plan = self.plan = plan_start(
            config,
            read_checkpoint(self.spark, config.checkpoint_location),
            SinkFacts(status.status, status.ingest_offsets, status.tenant_offsets),
            end_offsets(config.kafka_python_options(), config.offsets_topic),
            self._ingest_layout,
            state_partitions(config, self.spark),
        )
        if plan.migrate:
            self._migrate(plan.migrate)
        if not plan.resumed:
            record_layout(self.spark, config.checkpoint_location, plan.layout)
        log.info(
            "state shards: %d, each holding %d offsets-topic partitions",
            plan.shards,
            config.partitions // plan.shards,
        )
        if plan.reset_sink:
            self.sink.reset(plan.status, plan.detail)  # type: ignore[arg-type]
        else:
            self.sink.set_status(plan.status, plan.detail)  # type: ignore[arg-type]
        lifecycle = self.lifecycle = QueryLifecycle(self.spark, config.checkpoint_location)
        lifecycle.keep_alive(self.sink, config.bootstrap_servers, "job")
        self.on_alive()
        # Every shard is called in the first micro-batch, which runs at once: loads and warm-up
        # happen before ACTIVE.
        own_partitions = self._ingest_layout[config.ingest_topic]
        write_markers(config, LOAD_MARKER, own_partitions, plan.shards)
        self.writer = self._batch_writer(plan)
        writer = self._build_query(plan).option("checkpointLocation", config.checkpoint_location)
        _stop_if(interrupted, "starting the query")
        query = lifecycle.start(writer, query_settings(plan.state_partitions))
        log.info("query started (%s)", "from the checkpoint" if plan.resumed else "new checkpoint")
        start_expiry_ticks(config, own_partitions, plan.shards, lifecycle.stopping)
        if config.keep_history:
            lifecycle.keep_history_for(
                self.sink,
                config.sink_url,
                config.history_retention_ms,
                config.history_retention_check_interval_ms,
            )
        return query

    def _migrate(self, earlier: str) -> None:
        """Move an earlier release's checkpoint aside, logging where."""
        location = self.config.checkpoint_location
        aside = move_aside(self.spark, location, "earlier-release")
        log.warning(
            "the checkpoint at %s holds the state of an earlier release (%s): migrated. It was "
            "moved aside to %s (delete it once this job runs); a new checkpoint starts where "
            "its last committed batch ended, its state rebuilt from %s",
            location,
            earlier,
            aside,
            self.config.offsets_topic,
        )

    def _batch_writer(self, plan: StartPlan) -> BatchWriter:
        """The ``foreachBatch`` writer, its producer connected now, not in the first batch."""
        config = self.config
        writer = BatchWriter(
            WriterSettings(
                bootstrap_servers=config.bootstrap_servers,
                kafka_options=config.kafka_options,
                ingest_topic=config.ingest_topic,
                offsets_topic=config.offsets_topic,
                responses_topic=config.responses_topic,
                dead_letter_topic=config.dead_letter_topic,
                compression=config.compression,
                partitions=config.partitions,
                sink_write_timeout_s=config.sink_write_timeout_s,
                tenant_responses_topics=tuple(t.responses_topic for t in config.tenants),
                transactional_id=transactional_id(config.offsets_topic),
            ),
            self.sink,
            planned_positions_reader(self.spark, config.checkpoint_location),
            ingest_offsets=dict(plan.ingest_offsets),
            tenant_offsets={t: dict(o) for t, o in plan.tenant_offsets.items()},
            loading_shards=set(range(plan.shards)) if plan.loading else set(),
        )
        if self.lifecycle is not None:
            writer.stopping = self.lifecycle.stopping
        writer.producer.flush(0)
        return writer

    def _build_query(self, plan: StartPlan) -> DataStreamWriter:
        """Ingest topics → shard states → the batch writer."""
        config = self.config
        settings = ProcessorSettings(
            coordinator=dataclasses.replace(config.coordinator, state_shards=plan.shards),
            offsets_topic=config.offsets_topic,
            bootstrap_servers=config.bootstrap_servers,
            kafka_options=config.kafka_options,
            load_from_offsets_topic=plan.load_from_offsets_topic,
            loaded_sink_url=self._loaded_sink_url(),
            sink_write_timeout_s=config.sink_write_timeout_s,
            lease=self.lease,
            tenant_topics=tuple(t.ingest_topic for t in config.tenants),
            tenant_authorizers=tuple(t.authorizer for t in config.tenants),
            state_cache_bytes=config.state_cache_mb * 1024 * 1024,
            ingest_partitions=tuple(self._ingest_layout[topic] for topic in config.ingest_topics),
        )
        reader = self.spark.readStream.format("kafka").option(
            "startingOffsets", plan.starting_offsets
        )
        if config.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
        output = self._ingest(reader, plan, SOURCE_CONSUMER_DEFAULTS).groupBy("shard")
        return (
            output.transformWithStateInPandas(
                # No timers: expiry follows the job's ticks.
                ShardProcessor(settings),
                OUTPUT_SCHEMA,
                "update",
                "None",
            )
            .writeStream.queryName(QUERY_NAME)
            .outputMode("update")
            .foreachBatch(self.writer)
            .trigger(processingTime=config.trigger_interval)
        )

    def _ingest(
        self,
        reader: DataStreamReader | DataFrameReader,
        plan: StartPlan,
        defaults: Mapping[str, str],
    ) -> DataFrame:
        """The ingest topics' messages from Kafka ``reader`` as the state function takes them,
        with a task per state partition rather than per ingest partition, without a shuffle."""
        config = self.config
        options = defaults | config.spark_kafka_options() | SOURCE_CONSUMER_FIXED
        for key, value in options.items():
            reader = reader.option(key, value)
        return ingest_messages(
            reader.option("subscribe", ",".join(config.ingest_topics))
            .load()
            .coalesce(plan.state_partitions),
            [t.ingest_topic for t in config.tenants],
            plan.shards,
            [t for t, count in self._ingest_layout.items() if count != plan.shards],
            plan.layout.keys(),
        )

    def warm_up(self) -> list[Row]:
        """A standby's warm-up of what the first batch after a takeover would otherwise run
        cold, read-only: the ingest plan as the checkpoint lays it out, run once as a batch up
        to the state function's shuffle, over the last record of each ingest partition (the
        JVM's Kafka consumer and its connection; the plan's generated code, which Spark keeps
        by its source); the messages read. Measured on that batch's ingest stage: 4.3-4.6 s cold,
        0.8 s warm."""
        config = self.config
        self._ingest_layout = ingest_layout(config)
        missing = [t for t in config.ingest_topics if t not in self._ingest_layout]
        if missing:  # no job of the deployment ran yet: nothing to read
            log.info("the standby's warm-up reads no ingest topic: %s not created yet", missing)
            return []
        layout = checkpoint_layout(self.spark, config.checkpoint_location)  # None: no checkpoint
        plan = plan_start(
            config,
            CheckpointFacts(exists=layout is not None, layout=layout),
            SinkFacts("STARTING"),
            {},
            self._ingest_layout,
            state_partitions(config, self.spark),
        )
        starting, ending = last_records(config.kafka_python_options(), config.ingest_topics)
        reader = (
            self.spark.read.format("kafka")
            .option("startingOffsets", json.dumps(starting))
            .option("endingOffsets", json.dumps(ending))
            .option("failOnDataLoss", "false")  # the last offset may be a transaction's marker
        )
        # Kafka's answers waited for as Spark does by default: a standby does not hang on them.
        defaults = {
            k: v for k, v in SOURCE_CONSUMER_DEFAULTS.items() if k not in SOURCE_WAITS_FOR_KAFKA
        }
        return (
            self._ingest(reader, plan, defaults)
            .repartition(plan.state_partitions, "shard")
            .collect()
        )

    def _loaded_sink_url(self) -> str | None:
        """The sink URL the Python workers write rebuilt shards to, or None when the driver
        writes them (``JobConfig.rebuild_sink_writes``)."""
        writers = self.config.rebuild_sink_writes
        if writers == "auto":
            local = str(self.spark.sparkContext.master).startswith("local")
            writers = "executors" if local else "driver"
        return absolute_sink_url(self.config.sink_url) if writers == "executors" else None

    @property
    def fenced(self) -> bool:
        """Whether a newer job of the deployment fenced this one's producer (it took over)."""
        return self.writer is not None and self.writer.fenced

    def stop(self) -> None:
        """Stop the query (an interrupted batch is replayed at the next start: idempotent) and
        the writer, then say STOPPED: written from here, whatever became of Spark's JVM."""
        try:
            if self.lifecycle is not None:
                self.lifecycle.stop()
            if self.writer is not None:
                self.writer.close()
        finally:
            self.sink.set_status("STOPPED")

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float = 120.0) -> None:
        """Block until ``predicate()`` holds, failing fast if the query died."""
        assert self.lifecycle is not None, "start runs first"
        self.lifecycle.wait_until(predicate, timeout_s)
