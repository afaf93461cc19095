"""The queryable sink: where the streaming job writes compacted offsets and users read them.

The streaming job calls :meth:`Sink.write_batch` from ``foreachBatch`` on the driver, once per
micro-batch, with the batch's records (``state.formats.frames.RECORD_FRAME_SCHEMA``) as a pyarrow
Table. The sink keeps the *compacted* view of the offsets topic — the last value per key, tombstones
removed — so readers answer OffsetFetch without replaying the log.

Contract shared by every sink (the contract tests run it against each implementation):

* A batch is applied in one transaction together with its progress row: readers see all of a
  batch or none of it, and a failed batch leaves the previous state intact.
* A batch is deduplicated to the last record per key before it is applied (offsets keyed by
  ``(group_id, topic, partition)``, group metadata by ``group_id``); a null ``value`` is a
  tombstone and deletes the key. Applying the deduplicated batch equals applying every record in
  log order.
* Batches are idempotent per batch id: a batch id at or below the last committed one changes
  nothing and ``write_batch`` returns False (Spark replays the last batch after a restart).
* Values always travel as bound parameters; identifiers (the optional table prefix, the schema)
  are validated and quoted.
* Every string is stored, NUL included (PostgreSQL ``text`` cannot hold NUL): names and metadata
  go through ``connectors.sinks.text``, which escapes NUL, and every reader here takes and
  returns the original strings.

:class:`Sink` implements that contract once — argument checks, the read-only guard, idempotency
by batch id, what one batch's transaction does, the reads, logging — and a backend supplies only
its connection, its transactions and its SQL statements (the abstract hooks). Sinks are opened
with ``connectors.sinks.open.open_sink`` from a URL; messages and logs only ever show the URL
redacted (``connectors.sinks.url.redact_url``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final, Protocol

import pyarrow as pa

from connectors.closing import CloseOnExit
from connectors.sinks.batch import (
    GROUP_KEY_COLUMNS,
    GROUP_UPSERT_COLUMNS,
    HISTORY_COLUMNS,
    MEMBER_KEY_COLUMNS,
    OFFSET_KEY_COLUMNS,
    OFFSET_UPSERT_COLUMNS,
    SEQ,
    PreparedBatch,
    prepare_batch,
    prepare_members,
    rows,
)
from connectors.sinks.log_end_samples import DEFAULT_KEEP, LogEndSample, thin
from connectors.sinks.schema import (
    BASELINE,
    SCHEMA_VERSION,
    Migration,
    steps_after,
    too_new_message,
    too_old_message,
)
from connectors.sinks.tables import (
    TableNames,
    committed_from_row,
    history_from_row,
    progress_values,
    status_from_row,
)
from connectors.sinks.text import original_column, original_text, stored_text
from connectors.sinks.values import (
    COORDINATOR_STATES,
    NO_OFFSET,
    BatchProgress,
    CommitHistoryEntry,
    CommittedOffset,
    CoordinatorState,
    CoordinatorStatus,
    GroupListing,
    LogEndOffset,
    SinkError,
    SinkWriteError,
    SourceCluster,
)
from state.coordinator.model import TopicPartition

log = logging.getLogger(__name__)

#: :meth:`Sink.offset_columns`' columns: every committed offset, sorted by group, topic and
#: partition.
OFFSET_COLUMNS_SCHEMA: Final = pa.schema(
    [
        ("group_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("commit_timestamp_ms", pa.int64()),
    ]
)
#: Rows of a big read held as Python objects at a time (:meth:`Sink._read_chunks`).
_READ_CHUNK: Final = 10_000


class Statements(Protocol):
    """What a transaction runs statements on: a sqlite3 connection or a psycopg cursor."""

    def execute(self, statement: Any, params: Any = ..., /) -> Any: ...

    def executemany(self, statement: Any, params: Any, /) -> Any: ...


class Sink(ABC, CloseOnExit):
    """A store of the compacted offsets state, written per micro-batch and read by users.

    One instance holds one connection guarded by a lock; readers in other processes open their
    own sink (``open_sink(url, read_only=True)``) rather than sharing this one.

    A backend's constructor calls ``super().__init__``, builds :attr:`_sql` (its statements by
    name: ``last_batch``, ``upsert_offset``, ``delete_offset``, ``upsert_group``,
    ``delete_group``, ``insert_history``, ``progress``, ``set_status``, ``clear_offsets``,
    ``clear_groups``, ``reset_status``, ``status``, ``fetch_group``, ``list_groups``,
    ``upsert_log_end``, ``log_end``, ``clear_log_end``, ``samples``, ``upsert_sample``,
    ``delete_sample``, ``sample_heads``, ``partition_samples``, ``delete_partition_samples``,
    ``samples_since``, ``all_offsets``, ``group_exists``, ``committed_topics``,
    ``upsert_member``, ``delete_member``, ``clear_members``, ``add_group_commits``,
    ``forget_group_commits``, ``group_commits``, ``source_cluster``, ``bind_source``), then calls
    :meth:`_open`.
    """

    #: The sink's URL with secrets masked: the only form used in messages and logs.
    url: str
    #: Whether ``write_batch`` appends offset records to ``offset_commit_history``.
    keep_history: bool
    #: A read-only sink runs no DDL and refuses every write.
    read_only: bool
    #: The driver's base exception: what the backend's connection raises.
    _driver_error: ClassVar[type[Exception]]
    _sql: dict[str, Any]

    def __init__(
        self,
        url: str,
        *,
        table_prefix: str,
        keep_history: bool,
        read_only: bool,
        clock: Callable[[], int],
    ) -> None:
        self.url = url
        self.keep_history = keep_history
        self.read_only = read_only
        self._clock = clock
        self._names = TableNames(table_prefix)
        # One connection per sink, serialised by a lock: foreachBatch writes from one driver
        # thread, but the same process may read (e.g. a status endpoint) from another.
        self._lock = threading.RLock()
        self._conn: Any = None

    def _open(self) -> None:
        """Connect and, unless read-only, create or migrate the tables (``schema``): the end of a
        backend's constructor. A read-only sink checks the schema version instead."""
        with self._lock:
            conn = self._connection()
            if self.read_only:
                self._check_schema_readable()
            else:
                self._migrate(conn)
        log.info("opened sink %s (read_only=%s)", self.url, self.read_only)

    def _migrate(self, conn: Any) -> None:
        """Bring the tables to :data:`SCHEMA_VERSION` in one transaction (see ``schema``)."""
        applied: list[Migration] = []
        found = 0

        def migrate(tx: Statements) -> bool:
            nonlocal found
            self._lock_schema(tx)
            tx.execute(self._sql["create_schema_table"])
            found = self._schema_version(tx)
            if found > SCHEMA_VERSION:
                raise SinkError(too_new_message(self.url, found))
            for step in steps_after(found):
                statements = (
                    self._baseline_statements()
                    if step.version == BASELINE.version
                    else self._migration_statements(step.version)
                )
                for statement in statements:
                    tx.execute(statement)
                tx.execute(
                    self._sql["record_schema_version"],
                    (step.version, step.description, self._clock()),
                )
                applied.append(step)
            tx.execute(self._sql["insert_status"], (self._clock(),))
            return True

        try:
            self._transaction(conn, migrate)
        except self._driver_error as exc:
            raise SinkError(
                f"cannot create or migrate the sink tables in {self.url}: {exc}"
            ) from exc
        if found and applied:
            log.warning(
                "%s: sink schema migrated from version %d to %d (%s)",
                self.url,
                found,
                SCHEMA_VERSION,
                "; ".join(f"{step.version}: {step.description}" for step in applied),
            )

    def _schema_version(self, tx: Statements) -> int:
        """The sink's schema version: the newest recorded step, 1 for the tables of a release
        before versions (no step recorded), 0 for no tables."""
        (newest,) = tx.execute(self._sql["schema_version"]).fetchone()
        if newest is not None:
            return int(newest)
        return 1 if tx.execute(*self._table_exists_query(self._names.offsets)).fetchone() else 0

    def _check_schema_readable(self) -> None:
        """Refuse (SinkError) a read-only open of a sink older than this release."""
        found = self.schema_version()
        if 0 < found < SCHEMA_VERSION:
            raise SinkError(too_old_message(self.url, found))

    def schema_version(self) -> int:
        """The schema version recorded in the sink (0: none; see ``connectors.sinks.schema``)."""
        if not self._run(*self._table_exists_query(self._names.schema)):
            return 1 if self._run(*self._table_exists_query(self._names.offsets)) else 0
        (newest,) = self._run(self._sql["schema_version"])[0]
        return int(newest or 1)

    # --- the backend's hooks -------------------------------------------------------------------

    @abstractmethod
    def _connect(self) -> Any:
        """A new connection, ready for use; SinkError (URL redacted) when it cannot be made."""

    @abstractmethod
    def _lost(self, conn: Any) -> bool:
        """Whether ``conn`` is known to be dead (the server or the network dropped it)."""

    @abstractmethod
    def _baseline_statements(self) -> list[Any]:
        """DDL creating schema 1's tables if missing (``schema.BASELINE``), in order."""

    @abstractmethod
    def _migration_statements(self, version: int) -> list[Any]:
        """DDL of the step that brings schema ``version - 1`` to ``version``, in order."""

    @abstractmethod
    def _table_exists_query(self, table: str) -> tuple[Any, Sequence[Any]]:
        """A statement and its parameters returning a row only if ``table`` (unquoted, in the
        sink's schema) exists."""

    def _lock_schema(self, tx: Statements) -> None:
        """Serialise concurrent migrations of the same tables inside ``tx`` (and create the
        namespace the tables live in). SQLite's ``BEGIN IMMEDIATE`` already does."""

    @abstractmethod
    def _transaction(self, conn: Any, body: Callable[[Statements], bool]) -> None:
        """Run ``body`` in one write transaction on ``conn``.

        Commits when ``body`` returns True; when it returns False nothing was written and the
        backend may commit or roll back. Rolls back and re-raises on any exception.
        """

    @abstractmethod
    def _run(
        self, statement: Any, params: Sequence[Any] = (), *, action: str = "read failed"
    ) -> list[tuple[Any, ...]]:
        """Run one statement on its own (no batch transaction) and return its rows.

        Takes the lock; raises SinkError ``"<url>: <action>: <driver message>"`` on failure.
        """

    @abstractmethod
    def _read_chunks(
        self, statement: Any, consume: Callable[[list[tuple[Any, ...]]], None], size: int
    ) -> None:
        """Run one read statement (no parameters) and hand its rows to ``consume``, ``size`` at
        a time: a big read holds one chunk of Python rows at a time, not all of them (less
        memory, and less work for the garbage collector). Takes the lock; SinkError as
        :meth:`_run`."""

    @abstractmethod
    def _fetch_partitions(
        self, group_id: str, wanted: Sequence[tuple[str, int]]
    ) -> list[tuple[Any, ...]]:
        """Offset rows (``fetch_group``'s columns) of ``group_id`` for at least the ``wanted``
        (topic, partition) pairs, read in one snapshot; extra rows are ignored."""

    @abstractmethod
    def _history_query(self, conditions: Sequence[str]) -> Any:
        """The history SELECT filtered by ``column = <param>`` for each of ``conditions``,
        newest first, with a final ``LIMIT <param>``."""

    @abstractmethod
    def _recent_history_query(self) -> Any:
        """The history SELECT of one group (param 1) keeping each partition's newest rows up
        to param 2, by topic and partition, newest first within each."""

    @abstractmethod
    def _groups_recent_commits(
        self, group_ids: Sequence[str], per_partition: int
    ) -> list[tuple[Any, ...]]:
        """(group, topic, partition, offset, commit time) of the stored ``group_ids``' history:
        each partition's newest up to ``per_partition``, by group, topic and partition, newest
        first within each; in one snapshot."""

    # --- the connection ------------------------------------------------------------------------

    def _connection(self) -> Any:
        """The open connection, replacing one known to be lost; call with the lock held."""
        conn = self._conn
        if conn is not None and self._lost(conn):
            log.warning("%s: connection lost; reconnecting", self.url)
            self._discard()
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _discard(self) -> None:
        """Drop a connection in an unknown state; the next call opens a fresh one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(self._driver_error):
                conn.close()

    def close(self) -> None:
        """Close the connection; the sink must not be used afterwards."""
        with self._lock:
            self._discard()

    # --- writing -------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.read_only:
            raise SinkError(f"{self.url} is open read-only")

    def write_batch(
        self,
        batch_id: int,
        records: pa.Table,
        progress: BatchProgress,
        members: pa.Table | None = None,
    ) -> bool:
        """Apply one micro-batch and its progress atomically; False if ``batch_id`` was done.

        ``records`` follows ``RECORD_FRAME_SCHEMA`` in log order. Returns False, changing
        nothing, when ``batch_id`` is at or below the last committed batch id (read under the
        transaction's write lock, so two writers cannot both apply a batch). Raises ValueError
        (before touching the store) for records that break the frame contract, and
        :class:`SinkWriteError` when the store fails; either way nothing of the batch is kept.
        A connection found dead before the batch reached the store is replaced and the batch
        runs on the new one; the sink retries nothing else (Spark replays the batch).
        ``members`` (a mirror's consumer-protocol members, ``MEMBER_SCHEMA``) are applied in
        the same transaction.
        """
        _check_write_args(batch_id, progress)
        self._check_writable()
        prepared = prepare_batch(records)
        member_upserts, member_deletes = prepare_members(members)
        started = time.perf_counter()
        begun = False
        last_batch_id = -1

        def apply(tx: Statements) -> bool:
            nonlocal begun, last_batch_id
            last_batch_id = self._last_batch_id(tx)
            begun = True
            if batch_id <= last_batch_id:
                return False
            self._apply_records(tx, batch_id, prepared)
            if member_upserts.num_rows:
                tx.executemany(
                    self._sql["upsert_member"], rows(member_upserts, MEMBER_KEY_COLUMNS, batch_id)
                )
            if member_deletes.num_rows:
                tx.executemany(self._sql["delete_member"], rows(member_deletes, MEMBER_KEY_COLUMNS))
            self._count_commits(tx, progress, prepared)
            self._record_progress(tx, progress)
            return True

        with self._lock:
            for attempt in (1, 2):
                conn = self._connection()
                begun = False
                try:
                    self._transaction(conn, apply)
                    break
                except Exception as exc:
                    lost = self._lost(conn)
                    if lost:
                        self._discard()  # the next call reconnects
                    if lost and not begun and attempt == 1:
                        # The connection died while idle (server restart, idle timeout): nothing
                        # of this batch reached the server, so it is safe to start over.
                        log.warning(
                            "%s: connection lost before batch %d; retrying", self.url, batch_id
                        )
                        continue
                    raise SinkWriteError(
                        f"{self.url}: batch {batch_id} not written (replaying it is safe): {exc}"
                    ) from exc
        if batch_id <= last_batch_id:
            _log_skipped_batch(self.url, batch_id, last_batch_id)
            return False
        log.debug(
            "%s: batch %d: %d offset upserts, %d offset deletes, %d group changes in %.1f ms",
            self.url,
            batch_id,
            prepared.offset_upserts.num_rows,
            prepared.offset_deletes.num_rows,
            prepared.group_upserts.num_rows + prepared.group_deletes.num_rows,
            (time.perf_counter() - started) * 1000,
        )
        return True

    def write_snapshot(self, batch_id: int, records: pa.Table) -> bool:
        """Upsert a rebuilt shard's state (its records, ``RECORD_FRAME_SCHEMA``) ahead of batch
        ``batch_id``, in a transaction of its own; False, changing nothing, when that batch was
        already written (a replay).

        A rebuild carries every shard's whole state in its first batch: written shard by shard,
        the driver holds one shard's rows at a time instead of millions. Readers see none of it
        as an answer: the sink is LOADING until the rebuild's batch is written. No history: a
        snapshot is state, not commits.
        """
        self._check_writable()
        prepared = prepare_batch(records)
        written = False

        def apply(tx: Statements) -> bool:
            nonlocal written
            if batch_id <= self._last_batch_id(tx):
                return False
            self._write_state(tx, batch_id, prepared)
            written = True
            return True

        self._write(apply, f"snapshot for batch {batch_id} not written")
        return written

    def write_loaded(self, records: pa.Table) -> None:
        """Upsert a rebuilt shard's state (its records, ``RECORD_FRAME_SCHEMA``) in a transaction
        of its own, from the process that rebuilt it, while the rest of the rebuild goes on.

        Unlike :meth:`write_snapshot` it needs no batch id (a Spark worker does not know it):
        a shard's state loaded from the offsets topic holds everything the sink has of that
        shard, because every batch appends to the topic before it writes the sink, so writing
        it again (a replayed rebuild, a retried task) writes the same rows. Rows are tagged with
        the batch after the last one written: the batch that loads them.
        """
        self._check_writable()
        prepared = prepare_batch(records)

        def apply(tx: Statements) -> bool:
            self._write_state(tx, self._last_batch_id(tx) + 1, prepared)
            return True

        self._write(apply, "rebuilt shard state not written")

    def _last_batch_id(self, tx: Statements) -> int:
        """The last committed batch id, read with the lock that serialises writers."""
        found = tx.execute(self._sql["last_batch"]).fetchone()
        if found is None:
            raise SinkError(f"{self.url}: the coordinator status row is missing")
        return int(found[0])

    def _apply_records(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """Offsets, then group metadata, then (if kept) history; every row tagged ``batch_id``."""
        self._write_state(tx, batch_id, batch)
        if self.keep_history and batch.history.num_rows:
            history = rows(batch.history, (SEQ, *HISTORY_COLUMNS))
            self._write_history(tx, ((batch_id, *row) for row in history), batch.history.num_rows)

    def _write_state(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """The batch's offsets, then its group metadata, every row tagged ``batch_id``."""
        self._write_offsets(tx, batch_id, batch)
        self._write_groups(tx, batch_id, batch)

    def _write_groups(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """Upsert and delete the batch's group metadata rows."""
        if batch.group_upserts.num_rows:
            tx.executemany(
                self._sql["upsert_group"],
                rows(batch.group_upserts, GROUP_UPSERT_COLUMNS, batch_id),
            )
        if batch.group_deletes.num_rows:
            tx.executemany(self._sql["delete_group"], rows(batch.group_deletes, GROUP_KEY_COLUMNS))

    def _write_offsets(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """Upsert and delete the batch's offsets, one statement per row (a backend may bulk)."""
        if batch.offset_upserts.num_rows:
            tx.executemany(
                self._sql["upsert_offset"],
                rows(batch.offset_upserts, OFFSET_UPSERT_COLUMNS, batch_id),
            )
        if batch.offset_deletes.num_rows:
            tx.executemany(
                self._sql["delete_offset"], rows(batch.offset_deletes, OFFSET_KEY_COLUMNS)
            )

    def _write_history(
        self, tx: Statements, history: Iterable[tuple[Any, ...]], count: int
    ) -> None:
        """Insert ``count`` history rows ``(batch_id, seq, *HISTORY_COLUMNS)`` (a backend may
        bulk)."""
        tx.executemany(self._sql["insert_history"], history)

    def _count_commits(self, tx: Statements, progress: BatchProgress, batch: PreparedBatch) -> None:
        """Add the batch's commits to each group's counter; forget the counter of a group whose
        last offset this batch deleted (its rows stay bounded by the groups there are)."""
        if progress.group_commits:
            now = self._clock()
            tx.executemany(
                self._sql["add_group_commits"],
                [
                    (stored_text(group), int(count), now)
                    for group, count in sorted(progress.group_commits.items())
                    if count > 0
                ],
            )
        if batch.offset_deletes.num_rows:
            deleted = set(batch.offset_deletes.column("group_id").to_pylist())
            tx.executemany(self._sql["forget_group_commits"], [(g, g) for g in sorted(deleted)])

    def group_commits(self) -> dict[str, int]:
        """Each group's commits counter: offset commits applied (one per partition) since the
        group's offsets were last all deleted (schema step 4)."""
        return {
            original_text(group): int(count)
            for group, count in self._run(self._sql["group_commits"])
        }

    def _record_progress(self, tx: Statements, progress: BatchProgress) -> None:
        tx.execute(self._sql["progress"], progress_values(progress, self._clock()))

    def set_status(self, status: CoordinatorState, detail: str = "") -> None:
        """Set the coordinator status row (batch progress is left as it is)."""
        _check_status(status)
        self._check_writable()
        self._run(
            self._sql["set_status"],
            (status, _clean_detail(detail), self._clock()),
            action=f"cannot set status {status}",
        )

    def reset(self, status: CoordinatorState, detail: str = "") -> None:
        """Empty the offsets and groups tables and forget the batch progress, in one transaction.

        The sink is a view of the job's state: when the job starts a new checkpoint (batch ids
        restart at 0 and the state is rebuilt from the offsets topic) the view starts over too.
        History, if kept, stays: its rows move below batch id 0 (order kept), so the new
        batch ids 0, 1, … neither collide with them nor sort before them.
        """
        _check_status(status)
        self._check_writable()

        def clear(tx: Statements) -> bool:
            lowest, highest = tx.execute(self._sql["history_bounds"]).fetchone()
            if highest is not None and highest >= 0:
                # Every moved row lands below every row there is, so no key collides midway
                # (PostgreSQL checks a unique key row by row).
                tx.execute(self._sql["shift_history"], (highest + 1 + max(0, -lowest),))
            tx.execute(self._sql["clear_offsets"])
            tx.execute(self._sql["clear_groups"])
            tx.execute(self._sql["clear_log_end"])
            tx.execute(self._sql["clear_members"])
            tx.execute(self._sql["reset_status"], (status, _clean_detail(detail), self._clock()))
            return True

        self._write(clear, "cannot reset")

    def _write(self, body: Callable[[Statements], bool], action: str) -> None:
        """Run ``body`` in one write transaction outside the batch path; SinkError
        ``"<url>: <action>: <driver message>"`` on failure."""
        with self._lock:
            conn = self._connection()
            try:
                self._transaction(conn, body)
            except self._driver_error as exc:
                if self._lost(conn):
                    self._discard()
                raise SinkError(f"{self.url}: {action}: {exc}") from exc

    def heartbeat(self) -> None:
        """Record that the writer is alive now (the sink's clock), in a transaction of its own.

        The job and the mirror call it every few seconds, also when idle, so that readers can
        tell a running writer from one that died without setting its status.
        """
        self._check_writable()
        now = self._clock()

        def beat(tx: Statements) -> bool:
            tx.execute(self._sql["heartbeat"], (now,))
            return True

        self._write(beat, "cannot record a heartbeat")

    def purge_history(self, older_than_ms: int, limit: int) -> int:
        """Delete at most ``limit`` history rows committed before ``older_than_ms``, in one
        short transaction; the number deleted. Callers repeat it until it returns less than
        ``limit`` (``connectors.sinks.retention``), so no single delete holds the write lock
        long enough to stall a batch."""
        self._check_writable()
        if limit < 1:
            raise ValueError(f"purge_history: limit must be >= 1, got {limit}")
        deleted = 0

        def purge(tx: Statements) -> bool:
            nonlocal deleted
            cursor = tx.execute(self._sql["purge_history"], (int(older_than_ms), int(limit)))
            deleted = max(int(getattr(cursor, "rowcount", 0) or 0), 0)
            return True

        self._write(purge, "cannot delete expired history")
        return deleted

    def reclaim_space(self) -> None:
        """Return free pages to the file system where the backend needs asking (SQLite's
        incremental vacuum); PostgreSQL's autovacuum does it on its own."""

    def table_rows(self) -> dict[str, int]:
        """Rows per table, by table name (with the prefix): what an operator watches grow."""
        return {
            name: int(self._run(self._sql[f"count_{role}"])[0][0])
            for role, name in self._names.tables().items()
        }

    def write_log_end_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Store the log-end offsets of ``(topic, partition)``s as read from the cluster now.

        Not part of any batch: a mirror refreshes them on an interval so readers compute lag
        without a connection to the mirrored cluster.
        """
        self._check_writable()
        if not offsets:
            return
        now = self._clock()
        params = [(stored_text(t), int(p), int(o), now) for (t, p), o in offsets.items()]

        def upsert(tx: Statements) -> bool:
            tx.executemany(self._sql["upsert_log_end"], params)
            self._merge_samples(tx, offsets, now, DEFAULT_KEEP)
            return True

        self._write(upsert, "cannot write log-end offsets")

    def record_log_end_samples(
        self,
        offsets: Mapping[tuple[str, int], int],
        at_ms: int | None = None,
        keep: int = DEFAULT_KEEP,
    ) -> None:
        """Add log-end offsets read at ``at_ms`` (default: now) to each partition's table of
        (offset, time) points (``connectors.sinks.log_end_samples``): a repeated offset extends
        its point, a new one adds a point, and a partition keeps at most ``keep`` points
        (thinned in the same transaction). Several writers may sample the same partitions:
        points merge by offset, and a sample older than a partition's newest point is ignored.
        :meth:`write_log_end_offsets` records its offsets here too.
        """
        self._check_writable()
        if not offsets:
            return
        at = self._clock() if at_ms is None else int(at_ms)

        def record(tx: Statements) -> bool:
            self._merge_samples(tx, offsets, at, keep)
            return True

        self._write(record, "cannot write log-end samples")

    def _merge_samples(
        self, tx: Statements, offsets: Mapping[tuple[str, int], int], at_ms: int, keep: int
    ) -> None:
        """Merge one round of samples into the table inside ``tx``, reading only each
        partition's newest point and count (one aggregate), and a partition's points only
        when it has outgrown ``keep`` by a fifth (then it is thinned back to ``keep``): the
        same points as :func:`merge_sample` then :func:`thin`, at a fraction of the reads."""
        heads = {
            (topic, int(partition)): (int(newest), int(last), int(count))
            for topic, partition, newest, last, count in tx.execute(
                self._sql["sample_heads"]
            ).fetchall()
        }
        upserts: list[tuple[Any, ...]] = []
        restarted: list[tuple[Any, ...]] = []
        grown: list[tuple[str, int]] = []
        for (raw_topic, raw_partition), raw_offset in offsets.items():
            topic, partition, offset = stored_text(raw_topic), int(raw_partition), int(raw_offset)
            head = heads.get((topic, partition))
            if head is not None:
                newest, last, count = head
                if at_ms < last:
                    continue  # another writer sampled it later: time only moves forward
                if offset < newest:
                    restarted.append((topic, partition))  # recreated or truncated
                elif offset > newest and count + 1 > keep + keep // 5:
                    grown.append((topic, partition))
            upserts.append((topic, partition, offset, at_ms, at_ms))
        if restarted:
            tx.executemany(self._sql["delete_partition_samples"], restarted)
        if upserts:
            tx.executemany(self._sql["upsert_sample"], upserts)
        deletes: list[tuple[Any, ...]] = []
        for topic, partition in grown:
            points = [
                LogEndSample(int(o), int(first), int(last))
                for o, first, last in tx.execute(
                    self._sql["partition_samples"], (topic, partition)
                ).fetchall()
            ]
            kept = {p.offset for p in thin(points, keep)}
            deletes.extend((topic, partition, p.offset) for p in points if p.offset not in kept)
        if deletes:
            tx.executemany(self._sql["delete_sample"], deletes)

    def log_end_samples_since(self, since_ms: int) -> list[tuple[str, int, LogEndSample]]:
        """Points seen at or after ``since_ms`` (``last_seen_ms``), as (topic, partition,
        point): what a reader that loaded the table before needs to catch up."""
        return [
            (original_text(topic), int(partition), LogEndSample(int(o), int(first), int(last)))
            for topic, partition, o, first, last in self._run(
                self._sql["samples_since"], (int(since_ms),)
            )
        ]

    def log_end_samples(
        self, topics: Iterable[str] | None = None
    ) -> dict[TopicPartition, list[LogEndSample]]:
        """Each partition's (offset, time) points, oldest first (of every topic, or of
        ``topics``): what lag in seconds interpolates (``log_end_samples.lag_ms``)."""
        wanted = None if topics is None else {stored_text(t) for t in topics}
        found: dict[TopicPartition, list[LogEndSample]] = {}
        for topic, partition, offset, first, last in self._run(self._sql["samples"]):
            if wanted is None or topic in wanted:
                found.setdefault(TopicPartition(original_text(topic), int(partition)), []).append(
                    LogEndSample(int(offset), int(first), int(last))
                )
        return found

    def bind_source_cluster(self, cluster_id: str, cluster_name: str) -> None:
        """Record that this sink mirrors cluster ``cluster_id``; SinkError when it already holds
        another cluster (a sink, or a table prefix of a database, mirrors one cluster: mixing
        two would merge their groups). Checked and written in one transaction."""
        self._check_writable()
        found: list[Any] = []

        def bind(tx: Statements) -> bool:
            found.extend(tx.execute(self._sql["source_cluster"]).fetchall())
            if found and found[0][0] != cluster_id:
                return False
            tx.execute(self._sql["bind_source"], (cluster_id, cluster_name, self._clock()))
            return True

        self._write(bind, "cannot record the source cluster")
        if found and found[0][0] != cluster_id:
            raise SinkError(
                f"{self.url} holds cluster {found[0][0]} ({found[0][1]}), not {cluster_id} "
                f"({cluster_name}): a sink mirrors one cluster; give this one its own sink URL "
                "or table_prefix"
            )

    # --- reading -------------------------------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> list[CommittedOffset]:
        """Kafka's OffsetFetch over the sink.

        ``partitions=None``: every partition of the group with a committed offset, sorted by
        topic then partition. Otherwise one answer per requested partition in request order,
        with offset -1, metadata "" and leader epoch -1 where nothing is committed.
        """
        stored_group = stored_text(group_id)
        if partitions is None:
            found = self._run(self._sql["fetch_group"], (stored_group,))
            return [committed_from_row(group_id, row) for row in found]
        if not partitions:
            return []
        wanted = [(stored_text(tp[0]), int(tp[1])) for tp in partitions]
        stored: dict[tuple[str, int], CommittedOffset] = {}
        for row in self._fetch_partitions(stored_group, wanted):
            offset = committed_from_row(group_id, row)
            stored[(offset.topic, offset.partition)] = offset
        return [
            stored.get((tp[0], tp[1]))
            or CommittedOffset(group_id=group_id, topic=tp[0], partition=tp[1], offset=NO_OFFSET)
            for tp in partitions
        ]

    def all_offsets(self) -> list[tuple[str, str, int, int, int]]:
        """Every committed offset as (group, topic, partition, offset, commit time ms), sorted
        by group, topic and partition, in one query: what a scrape of every group reads."""
        return [
            (original_text(g), original_text(t), int(p), int(o), int(ts))
            for g, t, p, o, ts in self._run(self._sql["all_offsets"])
        ]

    def offset_columns(self) -> pa.Table:
        """:meth:`all_offsets` as columns (:data:`OFFSET_COLUMNS_SCHEMA`), same order: what a
        vectorised pass over every group reads, with no Python object per row kept."""
        batches: list[pa.RecordBatch] = []

        def add(found: list[tuple[Any, ...]]) -> None:
            columns = zip(*found, strict=True)
            batches.append(
                pa.record_batch(
                    [
                        pa.array(c, f.type)
                        for c, f in zip(columns, OFFSET_COLUMNS_SCHEMA, strict=True)
                    ],
                    schema=OFFSET_COLUMNS_SCHEMA,
                )
            )

        self._read_chunks(self._sql["all_offsets"], add, _READ_CHUNK)
        table = pa.Table.from_batches(batches, OFFSET_COLUMNS_SCHEMA).combine_chunks()
        for name in ("group_id", "topic"):
            i = table.schema.get_field_index(name)
            column = table.column(i)
            if column.num_chunks:
                table = table.set_column(i, name, original_column(column.combine_chunks()))
        return table

    def group_exists(self, group_id: str) -> bool:
        """Whether the sink has offsets or group metadata of ``group_id`` (two index probes)."""
        stored = stored_text(group_id)
        return bool(self._run(self._sql["group_exists"], (stored, stored)))

    def list_groups(self) -> list[GroupListing]:
        """Every group with offsets or group metadata, sorted by group id (code point order)."""
        return [
            GroupListing(
                group_id=original_text(g), partitions=int(n), generation=gen, members=members
            )
            for g, n, gen, members in self._run(self._sql["list_groups"])
        ]

    def log_end_offsets(
        self, topics: Iterable[str] | None = None
    ) -> dict[TopicPartition, LogEndOffset]:
        """Stored log-end offsets (of every topic, or of ``topics``), with when they were read."""
        wanted = None if topics is None else set(topics)
        found = {}
        for topic, partition, offset, updated in self._run(self._sql["log_end"]):
            entry = LogEndOffset(original_text(topic), int(partition), int(offset), int(updated))
            if wanted is None or entry.topic in wanted:
                found[entry.topic_partition] = entry
        return found

    def committed_topics(self) -> list[str]:
        """Every topic with a committed offset in the sink."""
        return [original_text(t) for (t,) in self._run(self._sql["committed_topics"])]

    def source_cluster(self) -> SourceCluster | None:
        """The cluster a mirror's sink holds; None for a job's sink."""
        found = self._run(self._sql["source_cluster"])
        return SourceCluster(*found[0]) if found else None

    def status(self) -> CoordinatorStatus:
        """The coordinator status row."""
        found = self._run(self._sql["status"])
        if not found:
            raise SinkError(f"{self.url}: the coordinator status row is missing")
        return status_from_row(found[0])

    def history(
        self,
        group_id: str,
        topic: str | None = None,
        partition: int | None = None,
        limit: int = 100,
    ) -> list[CommitHistoryEntry]:
        """The group's offset commits, newest first, at most ``limit``.

        Empty unless the writer runs with ``keep_history=True`` (a reader cannot know, so this
        reads whatever history the store holds). ``partition`` requires ``topic``.
        """
        if partition is not None and topic is None:
            raise ValueError("history: partition requires topic")
        if limit < 1:
            raise ValueError(f"history: limit must be >= 1, got {limit}")
        conditions = ["group_id"]
        params: list[Any] = [stored_text(group_id)]
        if topic is not None:
            conditions.append("topic")
            params.append(stored_text(topic))
        if partition is not None:
            conditions.append('"partition"')  # a keyword in both dialects
            params.append(int(partition))
        found = self._run(self._history_query(conditions), (*params, int(limit)))
        return [history_from_row(row) for row in found]

    def recent_history(
        self, group_id: str, per_partition: int
    ) -> dict[TopicPartition, list[CommitHistoryEntry]]:
        """Each partition's last ``per_partition`` commits of the group, newest first, in one
        query (Burrow's window of every partition at once)."""
        if per_partition < 1:
            raise ValueError(f"history: per_partition must be >= 1, got {per_partition}")
        found = self._run(self._recent_history_query(), (stored_text(group_id), per_partition))
        windows: dict[TopicPartition, list[CommitHistoryEntry]] = {}
        for row in found:
            entry = history_from_row(row)
            windows.setdefault(TopicPartition(entry.topic, entry.partition), []).append(entry)
        return windows

    def groups_recent_commits(
        self, group_ids: Sequence[str], per_partition: int
    ) -> dict[tuple[str, str, int], list[tuple[int, int]]]:
        """The last ``per_partition`` commits of each partition of several groups at once, as
        (offset, commit time ms), newest first, by (group, topic, partition): Burrow's windows
        for a pass over every group, fewer queries and no object per commit."""
        if per_partition < 1:
            raise ValueError(f"history: per_partition must be >= 1, got {per_partition}")
        windows: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
        if not group_ids:
            return windows
        stored = [stored_text(g) for g in group_ids]
        key: tuple[str, str, int] | None = None
        window: list[tuple[int, int]] = []
        for group, topic, partition, offset, at in self._groups_recent_commits(
            stored, per_partition
        ):
            if key is None or key != (group, topic, partition):
                key, window = (group, topic, partition), []
                windows[(original_text(group), original_text(topic), partition)] = window
            window.append((offset, at))
        return windows


# --- helpers of the template ------------------------------------------------------------------


def _check_write_args(batch_id: int, progress: BatchProgress) -> None:
    """Validate ``write_batch``'s arguments (Spark batch ids start at 0)."""
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ValueError(f"batch_id must be an int >= 0, got {batch_id!r}")
    if progress.batch_id != batch_id:
        raise ValueError(f"progress is for batch {progress.batch_id}, not batch {batch_id}")


def _check_status(status: str) -> None:
    if status not in COORDINATOR_STATES:
        raise ValueError(f"status must be one of {sorted(COORDINATOR_STATES)}, got {status!r}")


def _log_skipped_batch(url: str, batch_id: int, last_batch_id: int) -> None:
    """Log a batch id at or below the last committed one (returned False, nothing written)."""
    if batch_id == last_batch_id:
        # The normal replay of the last batch after a restart.
        log.info("%s: batch %d already committed, skipped", url, batch_id)
    else:
        log.warning(
            "%s: batch %d is older than the last committed batch %d and was skipped; if the "
            "job's checkpoint was reset, its batch ids restart at 0 and the sink ignores them "
            "until they pass %d",
            url,
            batch_id,
            last_batch_id,
            last_batch_id,
        )


def _clean_detail(detail: str) -> str:
    """A status detail with NUL replaced (it is free text; PostgreSQL text cannot hold NUL)."""
    return detail.replace("\x00", "\ufffd")
