"""The offset manager's Structured Streaming query.

Ingest topic → shard state → offsets topic + sink.

Start-up follows Kafka's coordinator:
- with a checkpoint, the query resumes from it (state, ingest offsets, batch ids);
- without one, the sink (a view of the state) is reset, and if the offsets topic holds records
  every shard rebuilds its state from its partitions of that topic before serving (a shard
  holds ``partitions / state_shards`` of them: ``streaming.spark.state_shards``). Meanwhile the
  sink's status is LOADING, which readers answer as COORDINATOR_LOAD_IN_PROGRESS.

Otherwise the sink says STARTING until the query's first micro-batch has completed, then ACTIVE:
the job wakes every shard at start (a marker each), so that first batch runs at once and pays
what a cold query pays (Python workers, state stores, planning), not the first commit after
ACTIVE (measured with ``commit``: 7.7-16.8 s where later ones took 1.5-3.7 s; now 2.0-2.4 s,
as later ones).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka import KafkaProducer
from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
from pyspark.sql.streaming.state import GroupStateTimeout

from connectors.kafka.admin import (
    KafkaAdmin,
    dead_letter_topic_spec,
    end_offsets,
    ingest_topic_spec,
    offsets_topic_spec,
    responses_topic_spec,
)
from connectors.sinks import Sink, absolute_sink_url, open_sink
from connectors.sinks.retention import HistoryRetention
from state.coordinator.partitioner import partition_for
from streaming.config import JobConfig
from streaming.spark.checkpoint_files import checkpoint_file_settings
from streaming.spark.heartbeat import Heartbeat, jvm_log_quieter
from streaming.spark.ingest import EXPIRY_TICK, LOAD_MARKER, ingest_messages
from streaming.spark.output import OUTPUT_SCHEMA
from streaming.spark.processor import STATE_SCHEMA, ProcessorSettings, make_state_function
from streaming.spark.state_metadata import operator_in, relocate_state_metadata, time_mode_in
from streaming.spark.state_shards import (
    StateLayout,
    checkpoint_layout,
    choose_state_shards,
    record_layout,
)
from streaming.spark.value_states import TIME_MODE as VALUE_STATES_TIME_MODE
from streaming.spark.value_states import ShardProcessor, value_states_time_mode
from streaming.spark.writer import BatchWriter, WriterSettings

log = logging.getLogger(__name__)

QUERY_NAME = "consumer-offsets"

#: Kafka consumer settings of the ingest source, under the user's ``kafka_options`` (which win).
#: Spark's source reads fixed offset ranges, and each task's consumer waits ``fetch.max.wait.ms``
#: at the end of its range, once per partition. With Kafka's 500 ms, reading 1,000 messages
#: from 50 partitions took 14 s; with 10 ms, 1.7 s; 1 ms took the Kafka source stage of a small
#: batch from 0.3-0.4 s to 0.2-0.3 s (ack p50 at 1k offsets/s, three quick runs each: 1.96 ->
#: 1.72 s on average; no clear change at 10k/s).
#: The Spark Kafka source's consumer group ids start with this (``groupIdPrefix``): the job's
#: principal needs READ on GROUP PREFIXED ``consumer-offsets-job`` where Kafka has ACLs.
SOURCE_GROUP_ID_PREFIX = "consumer-offsets-job"
SOURCE_CONSUMER_DEFAULTS = {
    "kafka.fetch.max.wait.ms": "1",
    "groupIdPrefix": SOURCE_GROUP_ID_PREFIX,
}


def ensure_topics(config: JobConfig) -> list[str]:
    """Create the job's topics where missing; refuse a layout the cluster cannot serve."""
    rf, isr, n = config.replication_factor, config.min_insync_replicas, config.partitions
    ingest = config.ingest_topic_partitions
    specs = [
        ingest_topic_spec(config.ingest_topic, ingest, rf, isr, n),
        offsets_topic_spec(config.offsets_topic, n, rf, isr, config.compression),
        responses_topic_spec(config.responses_topic, n, rf),
        dead_letter_topic_spec(config.dead_letter_topic, 1, rf),
    ]
    for tenant in config.tenants:
        specs.append(ingest_topic_spec(tenant.ingest_topic, ingest, rf, isr, n))
        specs.append(responses_topic_spec(tenant.responses_topic, n, rf))
    with KafkaAdmin(config.kafka_python_options()) as admin:
        return admin.ensure_topics(specs)


def ingest_layout(config: JobConfig) -> dict[str, int]:
    """The partition count of each of the job's ingest topics (they exist: ``ensure_topics``)."""
    with KafkaAdmin(config.kafka_python_options()) as admin:
        return admin.partition_counts(list(config.ingest_topics))


@functools.lru_cache(maxsize=4096)
def marker_key(shard: int, shards: int) -> bytes:
    """A message key whose shard (``partition_for``) is ``shard``: the job's markers carry it,
    so that on an ingest topic of fewer partitions than shards each marker wakes its shard."""
    return next(
        key.encode()
        for key in (f"__consumer_offsets-marker-{shard}-{i}" for i in range(1_000_000))
        if partition_for(key, shards) == shard
    )


def checkpoint_exists(spark: SparkSession, location: str) -> bool:
    """Whether ``location`` holds a query checkpoint (any Hadoop file system: local, HDFS, S3)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/offsets")
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    return bool(fs.exists(path)) and len(fs.listStatus(path)) > 0


def choose_state_operator(chosen: str, held: str | None, location: str) -> str:
    """The operator to run: ``chosen`` (``JobConfig.state_operator``) for a checkpoint that holds
    ``held`` (None: no state yet). A checkpoint cannot change operators: Spark would refuse its
    state, so a mismatch fails here in one line that says what to do."""
    if chosen == "auto":
        return held or "value-states"
    if held is not None and held != chosen:
        raise ValueError(
            f"state_operator is {chosen!r} but the checkpoint at {location} holds the {held!r} "
            f"operator's state: set state_operator to {held!r} or 'auto', or move the checkpoint "
            f"away to rebuild the state with {chosen!r} from the offsets topic"
        )
    return chosen


def _starting_offsets(
    config: JobConfig,
    covered: dict[int, int],
    tenants_covered: dict[str, dict[int, int]],
    layout: dict[str, int],
) -> str:
    """Where ingest reading starts without a checkpoint: after what the sink last recorded, on
    the job's ingest topic and each tenant's (``layout``: each one's partition count)."""
    if not covered and not tenants_covered:
        return config.starting_offsets
    # Partitions the sink never saw start at the earliest offset (-2 in Spark's JSON form);
    # Spark wants every partition of every subscribed topic named.
    by_topic = {config.ingest_topic: covered} | {
        t.ingest_topic: tenants_covered.get(t.ingest_topic, {}) for t in config.tenants
    }
    return json.dumps(
        {
            topic: {str(p): offsets.get(p, -2) for p in range(layout[topic])}
            for topic, offsets in by_topic.items()
        }
    )


def _log_tenants(config: JobConfig) -> None:
    """Say at start who may do what, and with tenants what the cluster must grant: nothing is
    checked without tenants."""
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


def _write_markers(
    config: JobConfig,
    marker: bytes,
    ingest_partitions: int,
    shards: int,
    producer: KafkaProducer | None = None,
) -> None:
    """Write ``marker`` once per state shard (of ``shards``; acks=all) to the job's ingest topic
    of ``ingest_partitions`` partitions, where that shard reads it, so every shard is called."""
    own = producer is None
    producer = producer or KafkaProducer(acks="all", **config.kafka_python_options())
    try:
        for shard in range(shards):
            producer.send(
                config.ingest_topic,
                key=marker_key(shard, shards),
                value=marker,
                partition=shard % ingest_partitions,
            )
        producer.flush(timeout=60)
    finally:
        if own:
            producer.close()


def state_partitions(config: JobConfig, spark: SparkSession, shards: int | None = None) -> int:
    """Spark partitions of the shard state: ``config.state_partitions``, else the cluster's
    cores (``defaultParallelism``); never more than the state ``shards`` (more would sit
    empty; default: ``config.partitions``)."""
    wanted = config.state_partitions or spark.sparkContext.defaultParallelism
    return max(1, min(int(wanted), shards or config.partitions))


def start_query(
    spark: SparkSession, writer: DataStreamWriter, partitions: int, checkpoint_location: str
) -> StreamingQuery:
    """Start the query with the settings it needs, which Spark reads when a query starts (the
    session's own values are restored after):

    - ``spark.sql.shuffle.partitions``: the state's partitions. Each one is a task per
      micro-batch with a fixed cost (RocksDB store, a Python worker round trip), so a small
      batch is answered faster with as many partitions as cores than with more.
      Spark records the number in the checkpoint, which then keeps it.
    - no-data micro-batches off: a processing-time timeout makes Spark run a micro-batch at
      every trigger even without input, to fire timeouts; each one costs a whole batch that new
      commits wait behind, and keeps a core busy on an idle job. Expiry is driven by ticks in
      the ingest log instead (:data:`streaming.spark.ingest.EXPIRY_TICK`); timeouts still fire in
      batches with data.
    - on a local checkpoint, the file manager that renames without child processes
      (:mod:`streaming.spark.checkpoint_files`).
    """
    settings = {
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        **checkpoint_file_settings(spark, checkpoint_location),
    }
    return start_with_settings(spark, writer, settings)


def start_with_settings(
    spark: SparkSession, writer: DataStreamWriter, settings: dict[str, str]
) -> StreamingQuery:
    """Start ``writer``'s query with ``settings``, which Spark reads when a query starts (the
    query keeps them in a session of its own); the session's own values are restored after."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        return writer.start()
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def is_replayed_batch_bug(error: object) -> bool:
    """Whether a query's error is SPARK-55271's (see :func:`survive_replayed_batch_bug`)."""
    text = "" if error is None else f"{error} {getattr(error, '_stackTrace', '')}"
    return "KafkaMicroBatchStream" in text or "Option.get()" in text


def survive_replayed_batch_bug(
    current: Callable[[], StreamingQuery | None],
    restart: Callable[[], None],
    stopping: threading.Event,
    restarts: int = 3,
) -> None:
    """Work around SPARK-55271 in the pinned Spark 4.1.1 Kafka connector.

    A query resumed from a checkpoint whose last batch was planned but not committed (the
    driver stopped or died mid-batch) re-runs that batch, commits it, and then fails while
    reporting progress: ``KafkaMicroBatchStream.metrics`` dereferences offsets that only a
    newly planned batch sets (NullPointerException). The batch is committed by then, so
    starting the query once more resumes cleanly. A daemon thread watches ``current()`` for
    exactly that failure and calls ``restart``, at most ``restarts`` times.
    """

    def watch() -> None:
        left = restarts
        while left and not stopping.is_set():
            query = current()
            if query is None or query.isActive:
                stopping.wait(0.2)
                continue
            error = query.exception()
            if not is_replayed_batch_bug(error):
                # Stopped, or another failure the caller sees through query.exception().
                ended = str(error)[:300] if error is not None else "stopped"
                log.info("query watchdog: query ended (%s)", ended)
                return
            log.warning(
                "restarting the query after Spark's replayed-batch metrics bug "
                "(SPARK-55271); the replayed batch was committed"
            )
            restart()
            left -= 1

    threading.Thread(target=watch, name="query-watchdog", daemon=True).start()


class StartInterrupted(Exception):
    """A stop signal came while the job was starting: raised before its next step, so the
    query never ran and nothing was acknowledged."""


def _stop_if(interrupted: Callable[[], bool], before: str) -> None:
    if interrupted():
        raise StartInterrupted(f"stopped before {before}")


@dataclass
class OffsetsJob:
    """One running instance of the query, with the sink it writes to."""

    config: JobConfig
    spark: SparkSession
    sink: Sink
    query: StreamingQuery | None = None
    writer: BatchWriter | None = None
    heartbeat: Heartbeat | None = None
    retention: HistoryRetention | None = None
    #: The operator that keeps the state (``JobConfig.state_operator``), decided at start.
    state_operator: str | None = None
    #: The value-state operator's time mode (``streaming.spark.value_states``), decided at start:
    #: a checkpoint keeps the one it was made with.
    time_mode: str = VALUE_STATES_TIME_MODE
    _stopping: threading.Event = field(default_factory=threading.Event)
    _state_partitions: int = 1
    #: How many states hold the offsets-topic partitions and how the checkpoint keys them
    #: (``streaming.spark.state_shards``), set by start.
    state_layout: StateLayout = field(default_factory=lambda: StateLayout(1))
    #: Each ingest topic's partition count, read when the job starts.
    _ingest_layout: dict[str, int] = field(default_factory=dict)

    @property
    def state_shards(self) -> int:
        """How many states hold the offsets-topic partitions (``state_layout``)."""
        return self.state_layout.shards

    @classmethod
    def create(cls, config: JobConfig, spark: SparkSession | None = None) -> OffsetsJob:
        """A job for ``config`` on ``spark`` (a new session from ``streaming.spark.session`` when
        None),
        with its sink opened; nothing starts until :meth:`start`."""
        if spark is None:
            from streaming.spark.session import spark_session

            spark = spark_session(master=config.spark_master)
        return cls(config, spark, open_sink(config.sink_url, keep_history=config.keep_history))

    def start(self, interrupted: Callable[[], bool] = lambda: False) -> StreamingQuery:
        """Create the topics, decide where to start (checkpoint, the sink's recorded positions, or a
        rebuild from the offsets topic with the sink LOADING, else STARTING until the first
        micro-batch completed), start the query and return it. ``interrupted()`` is asked
        before each step that creates or writes something: :class:`StartInterrupted` when true."""
        config = self.config
        log.info("starting with %s", config.redacted())
        _log_tenants(config)
        _stop_if(interrupted, "creating topics")
        ensure_topics(config)
        self._ingest_layout = ingest_layout(config)
        own_partitions = self._ingest_layout[config.ingest_topic]
        _stop_if(interrupted, "writing the checkpoint or the sink")

        loading = False
        starting_offsets = config.starting_offsets
        covered: dict[int, int] = {}
        tenants_covered: dict[str, dict[int, int]] = {}
        resumed = checkpoint_exists(self.spark, config.checkpoint_location)
        # Before anything is written (the sink's status, markers): a mismatch fails here. A
        # checkpoint moved or restored here first gets its schema paths pointed at its own files
        # (Spark's state metadata names them where it was: ``streaming.spark.state_metadata``).
        metadata = (
            relocate_state_metadata(self.spark, config.checkpoint_location) if resumed else []
        )
        self.state_operator = choose_state_operator(
            config.state_operator, operator_in(metadata), config.checkpoint_location
        )
        self.time_mode = value_states_time_mode(time_mode_in(metadata))
        log.info("state operator: %s", self.state_operator)
        held = checkpoint_layout(self.spark, config.checkpoint_location) if resumed else None
        parallelism = state_partitions(config, self.spark)
        shards = choose_state_shards(
            config.partitions,
            self._ingest_layout,
            config.state_shards,
            held.shards if held else None,
            resumed,
            parallelism,
        )
        if resumed:
            # A checkpoint made before layouts were recorded: one state per partition, each
            # keyed by its partition.
            self.state_layout = held or StateLayout(shards)
        else:
            self.state_layout = StateLayout(shards, min(parallelism, shards))
            record_layout(self.spark, config.checkpoint_location, self.state_layout)
        log.info(
            "state shards: %d, each holding %d offsets-topic partitions",
            self.state_shards,
            config.partitions // self.state_shards,
        )
        stored = end_offsets(config.kafka_python_options(), config.offsets_topic)
        has_log = sum(stored.values()) > 0
        status = self.sink.status()
        if resumed and status.status == "LOADING" and has_log:
            # The rebuild never finished (the driver died before its batch was committed): the
            # checkpoint holds no state for its shards, which load when called. Call them all.
            covered = dict(status.ingest_offsets)
            tenants_covered = dict(status.tenant_offsets)
            loading = True
            self.sink.set_status("LOADING", "resuming the rebuild from the offsets topic")
        elif resumed:
            covered = dict(status.ingest_offsets)
            tenants_covered = dict(status.tenant_offsets)
            self.sink.set_status("STARTING", "resumed from checkpoint")
        else:
            starting_offsets = _starting_offsets(
                config,
                dict(status.ingest_offsets),
                dict(status.tenant_offsets),
                self._ingest_layout,
            )
            loading = has_log
            # A new checkpoint restarts batch ids and state: the sink view starts over with it.
            if loading:
                self.sink.reset("LOADING", "rebuilding state from the offsets topic")
            else:
                self.sink.reset("STARTING", "new state")
        # Alive from here on, also while starting, loading or idle (connectors.client.liveness).
        self.heartbeat = Heartbeat(
            self.sink, config.bootstrap_servers, "job", quiet_jvm=jvm_log_quieter(self.spark)
        )
        self.heartbeat.start()
        # Every shard is called in the first micro-batch, which runs at once: it loads what it
        # must, and the Python workers, the state stores and the plan are ready before ACTIVE
        # (the writer says ACTIVE after that batch).
        _write_markers(config, LOAD_MARKER, own_partitions, self.state_shards)

        settings = ProcessorSettings(
            coordinator=dataclasses.replace(config.coordinator, state_shards=self.state_shards),
            offsets_topic=config.offsets_topic,
            bootstrap_servers=config.bootstrap_servers,
            kafka_options=config.kafka_options,
            # A shard without state whose offsets-topic partition holds records always loads
            # it: also after a restart over a checkpoint that never committed its state.
            load_from_offsets_topic=has_log,
            loaded_sink_url=self._loaded_sink_url(),
            sink_write_timeout_s=config.sink_write_timeout_s,
            tenant_topics=tuple(t.ingest_topic for t in config.tenants),
            tenant_authorizers=tuple(t.authorizer for t in config.tenants),
            state_cache_bytes=config.state_cache_mb * 1024 * 1024,
            ingest_partitions=tuple(
                self._ingest_layout[topic]
                for topic in (config.ingest_topic, *(t.ingest_topic for t in config.tenants))
            ),
        )
        self.writer = BatchWriter(
            WriterSettings(
                bootstrap_servers=config.bootstrap_servers,
                kafka_options=config.kafka_options,
                offsets_topic=config.offsets_topic,
                responses_topic=config.responses_topic,
                dead_letter_topic=config.dead_letter_topic,
                compression=config.compression,
                partitions=config.partitions,
                sink_write_timeout_s=config.sink_write_timeout_s,
                tenant_responses_topics=tuple(t.responses_topic for t in config.tenants),
            ),
            self.sink,
            ingest_offsets=covered,
            tenant_offsets=tenants_covered,
            loading_shards=set(range(self.state_shards)) if loading else set(),
        )
        # The producer connects and gets its producer id now, not in the first batch that sends.
        self.writer.producer.flush(0)

        self._state_partitions = self.state_layout.spread_over or min(
            parallelism, self.state_shards
        )
        reader = self.spark.readStream.format("kafka")
        for key, value in (SOURCE_CONSUMER_DEFAULTS | config.spark_kafka_options()).items():
            reader = reader.option(key, value)
        reader = reader.option("subscribe", ",".join(config.ingest_topics)).option(
            "startingOffsets", starting_offsets
        )
        if config.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))

        # The source has a task per ingest partition and each task has a fixed cost; coalescing
        # reads them in as many tasks as the state has, without a shuffle. Rows of a shard stay
        # in log order within their task, and the state function orders a shard's rows by
        # ingest offset anyway.
        output = ingest_messages(
            reader.load().coalesce(self._state_partitions),
            [t.ingest_topic for t in config.tenants],
            self.state_shards,
            [t for t, count in self._ingest_layout.items() if count != self.state_shards],
            self.state_layout.keys(),
        ).groupBy("shard")
        if self.state_operator == "value-states":
            output = output.transformWithStateInPandas(
                ShardProcessor(settings), OUTPUT_SCHEMA, "update", self.time_mode
            )
        else:
            output = output.applyInPandasWithState(
                make_state_function(settings),
                OUTPUT_SCHEMA,
                STATE_SCHEMA,
                "update",
                GroupStateTimeout.ProcessingTimeTimeout,
            )
        writer = (
            output.writeStream.queryName(QUERY_NAME)
            .outputMode("update")
            .foreachBatch(self.writer)
            .option("checkpointLocation", config.checkpoint_location)
            .trigger(processingTime=config.trigger_interval)
        )
        _stop_if(interrupted, "starting the query")
        self.query = start_query(
            self.spark, writer, self._state_partitions, config.checkpoint_location
        )
        log.info("query started (%s)", "from the checkpoint" if resumed else "new checkpoint")
        if resumed:
            self._survive_replayed_batch_bug(writer)
        self._start_expiry_ticks()
        if config.keep_history:
            self.retention = HistoryRetention(
                lambda: open_sink(config.sink_url, keep_history=True),
                config.history_retention_ms,
                config.history_retention_check_interval_ms,
            )
            self.retention.start()
        return self.query

    def _loaded_sink_url(self) -> str | None:
        """The sink URL the Python workers write rebuilt shards to, or None when the driver
        writes them (``JobConfig.rebuild_sink_writes``). Loading and writing then overlap: a
        rebuild of 3.6M records into SQLite spent 15 s loading and then 11 s writing."""
        writers = self.config.rebuild_sink_writes
        if writers == "auto":
            local = str(self.spark.sparkContext.master).startswith("local")
            writers = "executors" if local else "driver"
        return absolute_sink_url(self.config.sink_url) if writers == "executors" else None

    def _start_expiry_ticks(self) -> None:
        """Every ``retention_check_interval_ms``, wake every shard with an expiry tick (Kafka's
        periodic offset expiration). A failed write is logged and retried at the next tick."""
        interval_s = self.config.retention_check_interval_ms / 1000

        def tick() -> None:
            producer: KafkaProducer | None = None
            try:
                while not self._stopping.wait(interval_s):
                    try:
                        if producer is None:
                            producer = KafkaProducer(
                                acks="all", **self.config.kafka_python_options()
                            )
                        _write_markers(
                            self.config,
                            EXPIRY_TICK,
                            self._ingest_layout[self.config.ingest_topic],
                            self.state_shards,
                            producer,
                        )
                    except Exception as error:  # keep ticking: the next tick covers this one
                        log.warning("expiry tick not written, retrying next interval: %s", error)
            finally:
                if producer is not None:
                    producer.close(timeout=10)

        threading.Thread(target=tick, name="expiry-ticks", daemon=True).start()

    def _survive_replayed_batch_bug(self, writer: DataStreamWriter) -> None:
        """Restart the query after SPARK-55271 (see :func:`survive_replayed_batch_bug`)."""

        def restart() -> None:
            self.query = start_query(
                self.spark, writer, self._state_partitions, self.config.checkpoint_location
            )

        survive_replayed_batch_bug(lambda: self.query, restart, self._stopping)

    def stop(self) -> None:
        """Stop the query. A batch interrupted inside foreachBatch is replayed on the next start
        from the same checkpoint, which is safe: its records and responses are the same, the
        sink skips its batch id."""
        self._stopping.set()
        if self.query is not None and self.query.isActive:
            self.query.stop()
        if self.writer is not None:
            self.writer.close()
        if self.heartbeat is not None:
            self.heartbeat.stop()
        if self.retention is not None:
            self.retention.stop()
        self.sink.set_status("STOPPED")

    def wait_until(self, predicate: object, timeout_s: float = 120.0) -> None:
        """Block until ``predicate()`` holds, failing fast if the query died."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.query is not None and self.query.exception() is not None:
                raise RuntimeError(f"query failed: {self.query.exception()}")
            if predicate():  # type: ignore[operator]
                return
            time.sleep(0.2)
        raise TimeoutError(f"condition not met within {timeout_s:.0f}s")
