"""The ``foreachBatch`` writer: makes a micro-batch's output durable, then acknowledges it.

The batch comes to the driver once, as Arrow, and leaves through one idempotent ``acks=all``
producer, in one Kafka transaction per batch whose ``transactional.id`` is the deployment's
(:func:`transactional_id`). As in Kafka, a commit is acknowledged only once its record is
replicated and readable (every reader of what the job writes reads read_committed):
0. rebuilt shards' states → sink, one shard at a time (when the driver writes them), before;
1. begin the batch's transaction;
2. records → offsets topic, at their group's partition; wait for every acknowledgement;
3. records + progress → sink, one transaction skipped if the batch id was written (fenced by the
   lease's epoch); a sink outage is retried for ``sink_write_timeout_s``, then fails the query;
4. responses → the requester's responses topic, undecodable input → the dead-letter topic;
5. commit: records, answers and dead letters become readable together.
A failed step aborts the transaction (none of its messages is ever read) and fails the query; the
restart replays the batch. Kafka not taking the batch (unreachable, no in-sync replicas) is the
exception: the batch waits it out, trying again in a new transaction with backoff up to
``KAFKA_RETRY_MAX_BACKOFF_S``, for as long as the lease holds and no stop was asked for (an
outage of the whole cluster costs no restart, no takeover: the standby could not do better);
so does reading the batch's requests (:meth:`BatchWriter.collect`).
A replayed batch reproduces the same records and responses: the offsets topic compacts them, the
sink skips the batch id, clients ignore a second response. A zombie (a holder paused while a
standby took over) writes nothing readable: the new holder's ``init_transactions`` aborted its
open transaction, and its next send or commit raises ``ProducerFenced``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from connectors.kafka.producer import DeliveryError, DurableProducer, ProducerFenced
from connectors.sinks import BatchProgress, Sink
from connectors.sinks.retry import with_sink_retries
from state.engine.columns import python_list
from state.formats.frames import RECORD_FRAME_SCHEMA
from streaming.spark.output import OUTPUT_TABLE_SCHEMA, decode_each_output

T = TypeVar("T")

log = logging.getLogger("consumer_offsets.batches")

#: Added to a batch's longest waits in its transaction's timeout: the answers and the commit.
TRANSACTION_MARGIN_S = 30.0
#: The broker's default ``transaction.max.timeout.ms``: init_transactions refuses a longer one.
MAX_TRANSACTION_TIMEOUT_MS = 900_000
#: A batch Kafka did not take is tried again after 1 s, then after twice as long each time, up
#: to this.
KAFKA_RETRY_MAX_BACKOFF_S = 30.0
#: In a failed Spark job's error: a task's Kafka consumer failed (Kafka unreachable while the
#: batch reads its requests; Spark's local mode does not retry a task): the client's own errors,
#: and Spark's source giving up on a record after its poll timeout (``spark.network.timeout``).
KAFKA_READ_ERRORS = (
    "org.apache.kafka.common.errors.",
    "java.util.concurrent.TimeoutException: Cannot fetch record for offset",
)


def read_batch(
    read: Callable[[], T], batch_id: int, stopping: threading.Event, logger: logging.Logger
) -> T:
    """``read()``, a micro-batch's Spark job bringing its rows to the driver; run again while it
    fails reading Kafka (:data:`KAFKA_READ_ERRORS`), until Kafka answers or ``stopping`` is set:
    the batch's offsets are fixed, so a second read reads the same records."""
    backoff_s = 1.0
    while True:
        try:
            return read()
        except Exception as failure:  # py4j's, carrying the task's error as text
            cause = next(
                (
                    line
                    for line in str(failure).splitlines()
                    if any(error in line for error in KAFKA_READ_ERRORS)
                ),
                None,
            )
            if cause is None or stopping.is_set():
                raise
            logger.warning(
                "batch %d: reading it from Kafka failed (%s); nothing of it was written. "
                "Reading it again in %.0f s",
                batch_id,
                cause.strip(),
                backoff_s,
            )
            if stopping.wait(backoff_s):
                raise
            backoff_s = min(backoff_s * 2, KAFKA_RETRY_MAX_BACKOFF_S)


def transactional_id(offsets_topic: str) -> str:
    """The ``transactional.id`` of a deployment's batch writers (active and standby share it):
    one per offsets topic, which one deployment writes."""
    return f"consumer-offsets.{offsets_topic}"


@dataclass
class WriterSettings:
    """Where and how the writer produces, and how long it waits out a sink outage."""

    bootstrap_servers: str
    kafka_options: Mapping[str, str]
    #: The job's own ingest topic (its progress is ``ingest_offsets``; tenants' topics are
    #: ``tenant_offsets``).
    ingest_topic: str
    offsets_topic: str
    responses_topic: str
    dead_letter_topic: str
    compression: str
    partitions: int
    #: How long a batch's sink write is retried while the sink fails (0: fail at once).
    sink_write_timeout_s: float = 60.0
    #: How long a batch waits for Kafka to acknowledge its messages before it fails.
    delivery_timeout_s: float = 120.0
    #: Each tenant's responses topic, by tenant index (a response's ``tenant``).
    tenant_responses_topics: tuple[str, ...] = ()
    #: The batch transactions' ``transactional.id`` (:func:`transactional_id`); None: no
    #: transactions, each message readable once acknowledged.
    transactional_id: str | None = None

    @property
    def transaction_timeout_ms(self) -> int:
        """A batch transaction's ``transaction.timeout.ms``. At least a batch's slowest
        legitimate run (records delivered, a sink outage waited out, answers, commit), or the
        broker would abort a live batch and fail it; no longer, because an open transaction
        holds back every read_committed reader when its producer dies with no successor (a
        successor's init_transactions aborts it at once); at most the broker's default limit."""
        waits_s = self.sink_write_timeout_s + self.delivery_timeout_s + TRANSACTION_MARGIN_S
        return min(int(waits_s * 1000), MAX_TRANSACTION_TIMEOUT_MS)


@dataclass
class BatchWriter:
    """Callable for ``DataStreamWriter.foreachBatch``; holds the progress across batches.
    ``planned_ends`` (batch id → topic → partition → offset) says where Spark planned a batch
    to end: the progress stored with it."""

    settings: WriterSettings
    sink: Sink
    planned_ends: Callable[[int], Mapping[str, Mapping[int, int]]]
    #: Ingest offsets covered so far (partition → next offset), merged batch by batch.
    ingest_offsets: dict[int, int] = field(default_factory=dict)
    #: The same for each tenant's ingest topic (topic → partition → next offset).
    tenant_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    #: Shards still rebuilding from the offsets topic; the status is LOADING until none are.
    loading_shards: set[int] = field(default_factory=set)
    #: A newer job of the deployment fenced this one's producer: it took over.
    fenced: bool = False
    #: Set when the job stops: a batch waiting for Kafka gives up (its query is being stopped).
    stopping: threading.Event = field(default_factory=threading.Event)

    _producer: DurableProducer | None = None

    @property
    def producer(self) -> DurableProducer:
        """The batches' producer; transactional, it is initialised when first used (the
        previous holder's producer is fenced then)."""
        if self._producer is None:
            settings = self.settings
            self._producer = DurableProducer(
                settings.bootstrap_servers,
                settings.kafka_options,
                settings.compression,
                settings.transactional_id,
                settings.transaction_timeout_ms,
            )
        return self._producer

    def send(self, topic: str, messages: pa.Table, partitions: str | None = None) -> None:
        """Send ``messages`` (``key``, ``value`` and optionally a partition column) to ``topic``
        and wait until Kafka acknowledged all of them."""
        self.producer.send(
            topic,
            python_list(messages["key"]),
            python_list(messages["value"]),
            None if partitions is None else python_list(messages[partitions]),
        )
        self.producer.flush(self.settings.delivery_timeout_s)

    def close(self) -> None:
        """Let queued messages go out and release the producer."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        payloads = self.collect(batch, batch_id)
        rest = []
        for output in decode_each_output(payloads):
            is_loaded = pc.equal(output["out"], "loaded")
            if pc.any(is_loaded).as_py():
                # A rebuilt shard's whole state: into the sink now, one shard at a time.
                self._with_sink_retries(
                    batch_id,
                    lambda o=output, m=is_loaded: self.sink.write_snapshot(
                        batch_id, _sink_records(o.filter(m))
                    ),
                )
                output = output.filter(pc.invert(is_loaded))
            rest.append(output)
        del payloads
        local = pa.concat_tables(rest) if rest else OUTPUT_TABLE_SCHEMA.empty_table()
        self.write_table(local, batch_id, started)

    def collect(self, batch: DataFrame, batch_id: int) -> pa.ChunkedArray:
        """The micro-batch's one Spark job: the state function's output (its ``payload``
        column) brought to the driver (:func:`read_batch`; a task that failed committed no
        state)."""
        return read_batch(lambda: batch.toArrow()["payload"], batch_id, self.stopping, log)

    def write_table(self, local: pa.Table, batch_id: int, started: float) -> None:
        """Make one micro-batch's output (``OUTPUT_TABLE_SCHEMA`` rows) durable, then answer, in
        one transaction: aborted when a step fails, which fails the query (``ProducerFenced``
        when another job of the deployment took over), unless Kafka did not take it: then the
        batch is tried again in a new transaction until Kafka does, or the job stops."""
        waiting_since: float | None = None
        backoff_s = 1.0
        while True:
            try:
                progress, records = self._in_transaction(local, batch_id, started)
                break
            except ProducerFenced:
                raise
            except DeliveryError as failure:
                if self.stopping.is_set():
                    raise
                now = time.monotonic()
                waiting_since = now if waiting_since is None else waiting_since
                log.warning(
                    "batch %d: Kafka did not take it (%s); nothing of it is readable or "
                    "answered. Trying again in a new transaction in %.0f s (waiting for %.0f s)",
                    batch_id,
                    failure,
                    backoff_s,
                    now - waiting_since,
                )
                if self.stopping.wait(backoff_s):
                    raise
                backoff_s = min(backoff_s * 2, KAFKA_RETRY_MAX_BACKOFF_S)
        if waiting_since is not None:
            log.warning(
                "batch %d: Kafka took it after %.0f s", batch_id, time.monotonic() - waiting_since
            )
        log.info(
            "batch %d: %d input rows, %d commits applied, %d rejected, %d tombstones, "
            "%d records, %d keys in state, %d ms",
            batch_id,
            progress.input_rows,
            progress.commits_applied,
            progress.rejected,
            progress.tombstones,
            records,
            progress.state_keys,
            int((time.monotonic() - started) * 1000),
        )

    def _in_transaction(
        self, local: pa.Table, batch_id: int, started: float
    ) -> tuple[BatchProgress, int]:
        """One attempt at the batch in a transaction of its own, aborted when a step fails."""
        producer = self.producer
        try:
            producer.begin()
            result = self._write_batch(local, batch_id, started)
            producer.commit(self.settings.delivery_timeout_s)
        except BaseException as failure:
            self.fenced = self.fenced or isinstance(failure, ProducerFenced)
            try:
                producer.abort(self.settings.delivery_timeout_s)
            except ProducerFenced:
                # A fenced producer's send or flush may fail without saying why: the abort says.
                self.fenced = True
                raise
            raise
        return result

    def _write_batch(
        self, local: pa.Table, batch_id: int, started: float
    ) -> tuple[BatchProgress, int]:
        """Steps 2-4 of the module's order, inside the batch's transaction: the batch's progress
        and how many records it wrote."""
        kinds = local["out"]
        records = local.filter(pc.equal(kinds, "record"))
        loaded = local.filter(pc.equal(kinds, "loaded"))
        stats = local.filter(pc.equal(kinds, "stats"))
        responses = local.filter(pc.equal(kinds, "response"))
        dead_letters = local.filter(pc.equal(kinds, "dead_letter"))
        commits = local.filter(pc.equal(kinds, "group_commits"))

        if records.num_rows:
            # In apply order within a partition of the offsets topic (a record's ``shard``).
            records = records.sort_by([("shard", "ascending"), ("seq", "ascending")])
            self.send(self.settings.offsets_topic, records, partitions="shard")

        sink_records = _sink_records(pa.concat_tables([loaded, records]))
        self.cover(self.planned_ends(batch_id))
        # A called shard holds its state: a shard without state loads it on its first call.
        self.loading_shards.difference_update(stats["shard"].to_pylist())
        counters = {
            name: int(pc.sum(stats[name]).as_py() or 0)
            for name in ("input_rows", "commits_applied", "rejected", "tombstones", "state_keys")
        }
        groups = python_list(commits["group_id"])
        progress = BatchProgress(
            batch_id=batch_id,
            ingest_offsets=dict(self.ingest_offsets),
            tenant_offsets={t: dict(by_p) for t, by_p in self.tenant_offsets.items()},
            # A group lives on one shard: one row each.
            group_commits=dict(zip(groups, python_list(commits["commits_applied"]), strict=True)),
            **counters,
            duration_ms=int((time.monotonic() - started) * 1000),
            timestamp_ms=int(time.time() * 1000),
        )

        def write_sink() -> None:
            self.sink.write_batch(batch_id, sink_records, progress)
            if not self.loading_shards:
                self.sink.set_status("ACTIVE")

        self._with_sink_retries(batch_id, write_sink)

        # Answers after the sink, readable with the records at the commit: a commit is
        # acknowledged only once its record is durable and readable.
        # Each answer to its requester's responses topic: the job's (``tenant`` null) or a tenant's.
        tenant = responses["tenant"]
        for index in pc.unique(tenant).to_pylist():
            if index is None:
                topic, theirs = self.settings.responses_topic, pc.is_null(tenant)
            else:
                topic = self.settings.tenant_responses_topics[index]
                theirs = pc.equal(tenant, index)
            answers = responses.filter(theirs)
            self.producer.send(topic, python_list(answers["key"]), python_list(answers["value"]))
        if dead_letters.num_rows:
            keys, values = python_list(dead_letters["key"]), python_list(dead_letters["value"])
            self.producer.send(self.settings.dead_letter_topic, keys, values)
        # Acknowledged and committed by the caller's commit.
        return progress, records.num_rows

    def cover(self, ends: Mapping[str, Mapping[int, int]]) -> None:
        """Advance the progress to a batch's planned ``ends``, never back. Spark's planned end,
        not the last message + 1: read_committed skips transaction markers and aborted
        requests, and a partition ending with one would never be covered."""
        own = self.settings.ingest_topic
        for topic, by_partition in ends.items():
            covered = (
                self.ingest_offsets if topic == own else self.tenant_offsets.setdefault(topic, {})
            )
            for partition, end in by_partition.items():
                covered[partition] = max(covered.get(partition, 0), end)

    def _with_sink_retries(self, batch_id: int, write: Callable[[], object]) -> None:
        """Run ``write`` (one transaction, idempotent per batch id), retrying while the sink
        fails for up to ``sink_write_timeout_s``; then the error fails the query."""
        with_sink_retries(write, self.settings.sink_write_timeout_s, f"batch {batch_id}", log)


def _sink_records(table: pa.Table) -> pa.Table:
    """Records in apply order (shard, seq) with RECORD_FRAME columns; loaded records, which
    come without their bytes, get empty ones (the sink tells tombstones by a null value)."""
    if not table.num_rows:
        return RECORD_FRAME_SCHEMA.empty_table()
    table = table.sort_by([("shard", "ascending"), ("seq", "ascending")])
    columns = {f.name: table[f.name].cast(f.type) for f in RECORD_FRAME_SCHEMA}
    empty = pa.scalar(b"", pa.binary())
    columns["key"] = pc.fill_null(columns["key"], empty)
    columns["value"] = pc.if_else(
        table["is_tombstone"], pa.scalar(None, pa.binary()), pc.fill_null(columns["value"], empty)
    )
    return pa.table(columns, schema=RECORD_FRAME_SCHEMA)
