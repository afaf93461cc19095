"""The SQLite sink: one database file, written by the job, read concurrently by other processes.

Concurrency: the database runs in WAL mode, so readers never block the writer and the writer
never blocks readers; a reader sees the last batch committed before its statement (or read
transaction) started, never part of a batch. Readers open their *own* connection — in another
process, ``open_sink("sqlite:///path.db", read_only=True)`` — instead of sharing the writer's
sink. WAL needs the -wal/-shm files next to the database, so every process must see the same
local filesystem (not NFS). ``busy_timeout`` makes a second writer or a checkpoint wait instead of
failing with "database is locked".

Durability: ``synchronous=NORMAL`` (the default) keeps the database consistent across process
and OS crashes, but an OS crash or power loss may lose the last committed batches. Spark will
not replay a batch it has marked committed, so those keys stay stale until they next change;
pass ``synchronous="FULL"`` where that matters more than write latency.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa

from connectors.sinks.base import (
    GROUP_UPSERT_COLUMNS,
    HISTORY_COLUMNS,
    OFFSET_KEY_COLUMNS,
    OFFSET_UPSERT_COLUMNS,
    PROGRESS_COLUMNS,
    STATUS_COLUMNS,
    BatchProgress,
    CommitHistoryEntry,
    CommittedOffset,
    CoordinatorState,
    CoordinatorStatus,
    GroupListing,
    PreparedBatch,
    Sink,
    SinkError,
    SinkWriteError,
    TableNames,
    check_history_args,
    check_status,
    check_write_args,
    clean_detail,
    fetch_answer,
    has_nul,
    log_skipped_batch,
    now_ms,
    prepare_batch,
    progress_values,
    rows,
    status_from_row,
)
from state.coordinator.model import TopicPartition

log = logging.getLogger(__name__)

_SYNCHRONOUS: Final = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})
# Stay well under SQLITE_MAX_VARIABLE_NUMBER (32766 since 3.32, 999 before).
_IN_CHUNK: Final = 500
_OFFSET_COLUMNS: Final = (
    "topic",
    '"partition"',
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
    "expire_timestamp_ms",
)


def quote_identifier(name: str) -> str:
    """A double-quoted SQLite identifier (names are validated upstream: defence in depth)."""
    return '"' + name.replace('"', '""') + '"'


class SqliteSink(Sink):
    """:class:`Sink` on a SQLite file; see the module docstring for concurrency and durability."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table_prefix: str = "",
        keep_history: bool = False,
        read_only: bool = False,
        busy_timeout_ms: int = 10_000,
        synchronous: str = "NORMAL",
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.path = os.fspath(path)
        self.url = f"sqlite:///{self.path}"  # an absolute path gives sqlite:////abs/path
        self.keep_history = keep_history
        self.read_only = read_only
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {sorted(_SYNCHRONOUS)}: {synchronous!r}")
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._clock = clock
        self._names = TableNames(table_prefix)
        self._t = {
            "offsets": quote_identifier(self._names.offsets),
            "groups": quote_identifier(self._names.groups),
            "status": quote_identifier(self._names.status),
            "history": quote_identifier(self._names.history),
            "history_index": quote_identifier(self._names.history_index),
        }
        self._sql = self._statements()
        # One connection per sink, serialised by a lock: foreachBatch writes from one driver
        # thread, but the same process may read (e.g. a status endpoint) from another.
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        with self._lock:
            conn = self._connection()
            if not read_only:
                self._create_tables(conn)
        log.info("opened sink %s (read_only=%s)", self.url, read_only)

    # --- connection ----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                uri = Path(self.path).resolve().as_uri() + "?mode=ro"
                conn = sqlite3.connect(
                    uri,
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=self._busy_timeout_ms / 1000,
                )
            else:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                # isolation_level=None: no implicit transactions; each batch is an explicit
                # BEGIN IMMEDIATE … COMMIT and each read statement its own snapshot.
                conn = sqlite3.connect(
                    self.path,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=self._busy_timeout_ms / 1000,
                )
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            if not self.read_only:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    conn.close()
                    raise SinkError(f"{self.url}: cannot enable WAL journal mode (got {mode})")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.Error as exc:
            raise SinkError(f"cannot open sink {self.url}: {exc}") from exc
        return conn

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _discard(self) -> None:
        """Drop a connection in an unknown state; the next call opens a fresh one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._discard()

    # --- schema --------------------------------------------------------------------------------

    def _create_tables(self, conn: sqlite3.Connection) -> None:
        t = self._t
        ddl = f"""
        CREATE TABLE IF NOT EXISTS {t["offsets"]} (
            group_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            "partition" INTEGER NOT NULL,
            committed_offset INTEGER NOT NULL,
            leader_epoch INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            commit_timestamp_ms INTEGER NOT NULL,
            expire_timestamp_ms INTEGER,
            batch_id INTEGER NOT NULL,
            PRIMARY KEY (group_id, topic, "partition")
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS {t["groups"]} (
            group_id TEXT NOT NULL PRIMARY KEY,
            generation INTEGER,
            members INTEGER,
            batch_id INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS {t["status"]} (
            id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
            status TEXT NOT NULL CHECK (status IN ('LOADING', 'ACTIVE', 'STOPPED')),
            detail TEXT NOT NULL,
            last_batch_id INTEGER NOT NULL,
            ingest_offsets TEXT NOT NULL,
            input_rows INTEGER NOT NULL,
            commits_applied INTEGER NOT NULL,
            rejected INTEGER NOT NULL,
            tombstones INTEGER NOT NULL,
            state_keys INTEGER NOT NULL,
            duration_ms INTEGER NOT NULL,
            batch_timestamp_ms INTEGER,
            skipped_records INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS {t["history"]} (
            batch_id INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            group_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            "partition" INTEGER NOT NULL,
            committed_offset INTEGER NOT NULL,
            leader_epoch INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            commit_timestamp_ms INTEGER NOT NULL,
            PRIMARY KEY (batch_id, seq)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS {t["history_index"]}
            ON {t["history"]} (group_id, topic, "partition", batch_id);
        """
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in ddl.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                f"INSERT INTO {t['status']} (id, status, detail, last_batch_id, ingest_offsets,"
                " input_rows, commits_applied, rejected, tombstones, state_keys, duration_ms,"
                " batch_timestamp_ms, skipped_records, updated_at_ms)"
                " VALUES (1, 'STOPPED', '', -1, '{}', 0, 0, 0, 0, 0, 0, NULL, 0, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (self._clock(),),
            )
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise SinkError(f"cannot create the sink tables in {self.url}: {exc}") from exc

    def _statements(self) -> dict[str, str]:
        t = self._t
        value_cols = ", ".join(_OFFSET_COLUMNS)
        return {
            "last_batch": f"SELECT last_batch_id FROM {t['status']} WHERE id = 1",
            "upsert_offset": (
                f"INSERT INTO {t['offsets']} (group_id, {value_cols}, batch_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ' ON CONFLICT (group_id, topic, "partition") DO UPDATE SET'
                " committed_offset = excluded.committed_offset,"
                " leader_epoch = excluded.leader_epoch,"
                " metadata = excluded.metadata,"
                " commit_timestamp_ms = excluded.commit_timestamp_ms,"
                " expire_timestamp_ms = excluded.expire_timestamp_ms,"
                " batch_id = excluded.batch_id"
            ),
            "delete_offset": (
                f'DELETE FROM {t["offsets"]} WHERE group_id = ? AND topic = ? AND "partition" = ?'
            ),
            "upsert_group": (
                f"INSERT INTO {t['groups']} (group_id, generation, members, batch_id)"
                " VALUES (?, ?, ?, ?)"
                " ON CONFLICT (group_id) DO UPDATE SET generation = excluded.generation,"
                " members = excluded.members, batch_id = excluded.batch_id"
            ),
            "delete_group": f"DELETE FROM {t['groups']} WHERE group_id = ?",
            "insert_history": (
                f'INSERT INTO {t["history"]} (batch_id, seq, group_id, topic, "partition",'
                " committed_offset, leader_epoch, metadata, commit_timestamp_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            "progress": (
                f"UPDATE {t['status']} SET "
                + ", ".join(f"{c} = ?" for c in PROGRESS_COLUMNS)
                + " WHERE id = 1"
            ),
            "set_status": (
                f"UPDATE {t['status']} SET status = ?, detail = ?, updated_at_ms = ? WHERE id = 1"
            ),
            "status": f"SELECT {', '.join(STATUS_COLUMNS)} FROM {t['status']} WHERE id = 1",
            "fetch_group": (
                f"SELECT {value_cols} FROM {t['offsets']}"
                ' WHERE group_id = ? ORDER BY topic, "partition"'
            ),
            "list_groups": (
                f"SELECT k.group_id, COALESCE(o.n, 0), g.generation, g.members FROM"
                f" (SELECT group_id FROM {t['offsets']} UNION SELECT group_id FROM {t['groups']})"
                f" AS k LEFT JOIN (SELECT group_id, COUNT(*) AS n FROM {t['offsets']}"
                f" GROUP BY group_id) AS o ON o.group_id = k.group_id"
                f" LEFT JOIN {t['groups']} AS g ON g.group_id = k.group_id ORDER BY k.group_id"
            ),
        }

    # --- writing -------------------------------------------------------------------------------

    def write_batch(self, batch_id: int, records: pa.Table, progress: BatchProgress) -> bool:
        """See :meth:`Sink.write_batch`; one ``BEGIN IMMEDIATE`` transaction per batch.

        The last batch id is read after BEGIN IMMEDIATE has taken the write lock, so two
        writers cannot both apply the same batch.
        """
        check_write_args(batch_id, progress)
        if self.read_only:
            raise SinkError(f"{self.url} is open read-only")
        prepared = prepare_batch(records)
        started = time.perf_counter()
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                (last_batch_id,) = conn.execute(self._sql["last_batch"]).fetchone()
                if batch_id <= last_batch_id:
                    conn.execute("ROLLBACK")
                    log_skipped_batch(self, batch_id, last_batch_id)
                    return False
                self._apply_records(conn, batch_id, prepared)
                self._record_progress(conn, progress, prepared.skipped)
                conn.execute("COMMIT")
            except BaseException as exc:
                self._rollback(conn)
                if isinstance(exc, Exception):
                    raise SinkWriteError(
                        f"{self.url}: batch {batch_id} not written (replaying it is safe): {exc}"
                    ) from exc
                raise
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

    def _apply_records(self, conn: sqlite3.Connection, batch_id: int, batch: PreparedBatch) -> None:
        sql = self._sql
        if batch.offset_upserts.num_rows:
            conn.executemany(
                sql["upsert_offset"], rows(batch.offset_upserts, OFFSET_UPSERT_COLUMNS, batch_id)
            )
        if batch.offset_deletes.num_rows:
            conn.executemany(sql["delete_offset"], rows(batch.offset_deletes, OFFSET_KEY_COLUMNS))
        if batch.group_upserts.num_rows:
            conn.executemany(
                sql["upsert_group"], rows(batch.group_upserts, GROUP_UPSERT_COLUMNS, batch_id)
            )
        if batch.group_deletes.num_rows:
            conn.executemany(sql["delete_group"], rows(batch.group_deletes, ["group_id"]))
        if self.keep_history and batch.history.num_rows:
            history = rows(batch.history, ["__seq", *HISTORY_COLUMNS])
            conn.executemany(sql["insert_history"], ((batch_id, *row) for row in history))

    def _record_progress(
        self, conn: sqlite3.Connection, progress: BatchProgress, skipped: int
    ) -> None:
        conn.execute(self._sql["progress"], progress_values(progress, skipped, self._clock()))

    def _rollback(self, conn: sqlite3.Connection) -> None:
        """Roll back whatever is open; a connection that cannot is discarded (reopened later)."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            log.warning("%s: rollback failed; reopening the connection", self.url)
            if conn is self._conn:
                self._discard()

    def set_status(self, status: CoordinatorState, detail: str = "") -> None:
        check_status(status)
        if self.read_only:
            raise SinkError(f"{self.url} is open read-only")
        with self._lock:
            try:
                self._connection().execute(
                    self._sql["set_status"], (status, clean_detail(detail), self._clock())
                )
            except sqlite3.Error as exc:
                self._discard()
                raise SinkError(f"{self.url}: cannot set status {status}: {exc}") from exc

    def reset(self, status: CoordinatorState, detail: str = "") -> None:
        check_status(status)
        if self.read_only:
            raise SinkError(f"{self.url} is open read-only")
        t = self._t
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(f"DELETE FROM {t['offsets']}")
                conn.execute(f"DELETE FROM {t['groups']}")
                conn.execute(
                    f"UPDATE {t['status']} SET status = ?, detail = ?, last_batch_id = -1,"
                    " ingest_offsets = '{}', updated_at_ms = ? WHERE id = 1",
                    (status, clean_detail(detail), self._clock()),
                )
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise SinkError(f"{self.url}: cannot reset: {exc}") from exc

    # --- reading -------------------------------------------------------------------------------

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._connection().execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                self._discard()
                raise SinkError(f"{self.url}: read failed: {exc}") from exc

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> list[CommittedOffset]:
        if partitions is None:
            if has_nul(group_id):
                return []  # never stored (see connectors.sink)
            return [
                _offset(group_id, row) for row in self._read(self._sql["fetch_group"], (group_id,))
            ]
        if not partitions:
            return []
        stored: dict[tuple[str, int], CommittedOffset] = {}
        wanted: dict[str, list[int]] = {}
        for topic, partition in partitions:
            if not has_nul(group_id, topic):
                wanted.setdefault(topic, []).append(int(partition))
        statements = []
        for topic, parts in wanted.items():
            unique = sorted(set(parts))
            for i in range(0, len(unique), _IN_CHUNK):
                chunk = unique[i : i + _IN_CHUNK]
                marks = ", ".join("?" * len(chunk))
                statements.append(
                    (
                        f"SELECT {', '.join(_OFFSET_COLUMNS)} FROM {self._t['offsets']}"
                        f' WHERE group_id = ? AND topic = ? AND "partition" IN ({marks})',
                        (group_id, topic, *chunk),
                    )
                )
        with self._lock:
            conn = self._connection()
            try:
                # Several statements read one snapshot only inside one read transaction.
                if len(statements) > 1:
                    conn.execute("BEGIN DEFERRED")
                for sql, params in statements:
                    for row in conn.execute(sql, params):
                        offset = _offset(group_id, row)
                        stored[(offset.topic, offset.partition)] = offset
                if conn.in_transaction:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._discard()
                raise SinkError(f"{self.url}: read failed: {exc}") from exc
        return fetch_answer(group_id, partitions, stored)

    def list_groups(self) -> list[GroupListing]:
        listings = [
            GroupListing(group_id=g, partitions=n, generation=gen, members=members)
            for g, n, gen, members in self._read(self._sql["list_groups"])
        ]
        return listings  # SQLite's BINARY collation already orders by code point

    def status(self) -> CoordinatorStatus:
        found = self._read(self._sql["status"])
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
        check_history_args(topic, partition, limit)
        if has_nul(group_id, topic):
            return []
        where = ["group_id = ?"]
        params: list[Any] = [group_id]
        if topic is not None:
            where.append("topic = ?")
            params.append(topic)
        if partition is not None:
            where.append('"partition" = ?')
            params.append(int(partition))
        sql = (
            f'SELECT group_id, topic, "partition", committed_offset, leader_epoch, metadata,'
            f" commit_timestamp_ms, batch_id FROM {self._t['history']}"
            f" WHERE {' AND '.join(where)} ORDER BY batch_id DESC, seq DESC LIMIT ?"
        )
        return [CommitHistoryEntry(*row) for row in self._read(sql, (*params, int(limit)))]


def _offset(group_id: str, row: Sequence[Any]) -> CommittedOffset:
    topic, partition, offset, epoch, metadata, commit_ts, expire_ts = row
    return CommittedOffset(
        group_id, topic, partition, offset, epoch, metadata, commit_ts, expire_ts
    )
