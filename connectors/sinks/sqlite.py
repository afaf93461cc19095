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

The write path, the reads and the contract are :class:`~connectors.sinks.base.Sink`'s; this
module supplies the connection, ``BEGIN IMMEDIATE`` transactions and the SQL.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from connectors.sinks.base import Sink
from connectors.sinks.core import Statements
from connectors.sinks.tables import PROGRESS_COLUMNS, STATUS_COLUMNS
from connectors.sinks.values import SinkError, now_ms

log = logging.getLogger(__name__)

_SYNCHRONOUS: Final = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})
# Stay well under SQLITE_MAX_VARIABLE_NUMBER (32766 since 3.32, 999 before).
_IN_CHUNK: Final = 500
# Pages (4 KiB) one incremental vacuum frees: 8 MiB, a few milliseconds of the write lock.
_VACUUM_PAGES: Final = 2048
_OFFSET_COLUMNS: Final = (
    "topic",
    '"partition"',
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
    "expire_timestamp_ms",
)
# The columns of an applied commit, shared by the offsets and the history table.
_COMMIT_DDL: Final = """group_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            "partition" INTEGER NOT NULL,
            committed_offset INTEGER NOT NULL,
            leader_epoch INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            commit_timestamp_ms INTEGER NOT NULL,"""

# Each partition's newest rows numbered over the key index alone (it holds the primary key),
# then only those rows read from the table: a fraction of the table lookups.
_GROUPS_RECENT_COMMITS: Final = (
    'SELECT h.group_id, h.topic, h."partition", h.committed_offset, h.commit_timestamp_ms'
    " FROM (SELECT batch_id, seq, ROW_NUMBER() OVER"
    ' (PARTITION BY group_id, topic, "partition" ORDER BY batch_id DESC, seq DESC) AS newest'
    " FROM {history} WHERE group_id IN ({marks})) AS k JOIN {history} AS h"
    " ON h.batch_id = k.batch_id AND h.seq = k.seq WHERE k.newest <= ?"
    ' ORDER BY h.group_id, h.topic, h."partition", h.batch_id DESC, h.seq DESC'
)


def quote_identifier(name: str) -> str:
    """A double-quoted SQLite identifier (names are validated upstream: defence in depth)."""
    return '"' + name.replace('"', '""') + '"'


class SqliteSink(Sink):
    """:class:`Sink` on a SQLite file; see the module docstring for concurrency and durability."""

    _driver_error = sqlite3.Error

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
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {sorted(_SYNCHRONOUS)}: {synchronous!r}")
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = int(busy_timeout_ms)
        super().__init__(
            f"sqlite:///{self.path}",  # an absolute path gives sqlite:////abs/path
            table_prefix=table_prefix,
            keep_history=keep_history,
            read_only=read_only,
            clock=clock,
        )
        names = self._names
        self._t = {role: quote_identifier(name) for role, name in names.tables().items()}
        self._t["history_index"] = quote_identifier(names.history_index)
        self._t["history_time_index"] = quote_identifier(names.history_time_index)
        self._sql = self._statements()
        self._open()

    # --- connection and transactions -----------------------------------------------------------

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
                # Pages freed by history retention return to the file system in small steps
                # (``reclaim_space``); only a database without tables takes this setting, an
                # older file reuses its free pages for new rows instead.
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    conn.close()
                    raise SinkError(f"{self.url}: cannot enable WAL journal mode (got {mode})")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.Error as exc:
            raise SinkError(f"cannot open sink {self.url}: {exc}") from exc
        return conn

    def _lost(self, conn: sqlite3.Connection) -> bool:
        # A local file does not drop the connection; a failed statement discards it instead.
        return False

    def _transaction(self, conn: sqlite3.Connection, body: Callable[[Statements], bool]) -> None:
        """``BEGIN IMMEDIATE`` takes the write lock first, so two writers serialise."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("COMMIT" if body(conn) else "ROLLBACK")
        except BaseException:
            self._rollback(conn)
            raise

    def _rollback(self, conn: sqlite3.Connection) -> None:
        """Roll back whatever is open; a connection that cannot is discarded (reopened later)."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            log.warning("%s: rollback failed; reopening the connection", self.url)
            if conn is self._conn:
                self._discard()

    def _run(
        self, statement: str, params: Sequence[Any] = (), *, action: str = "read failed"
    ) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._connection().execute(statement, params).fetchall()
            except sqlite3.Error as exc:
                self._discard()
                raise SinkError(f"{self.url}: {action}: {exc}") from exc

    def _read_chunks(
        self, statement: str, consume: Callable[[list[tuple[Any, ...]]], None], size: int
    ) -> None:
        with self._lock:
            try:
                cursor = self._connection().execute(statement)
                while found := cursor.fetchmany(size):
                    consume(found)
            except sqlite3.Error as exc:
                self._discard()
                raise SinkError(f"{self.url}: read failed: {exc}") from exc

    def reclaim_space(self) -> None:
        """Give up to :data:`_VACUUM_PAGES` free pages back to the file system (a file created
        with ``auto_vacuum = INCREMENTAL``; older files keep them and reuse them for new rows)."""
        self._check_writable()
        with self._lock:
            try:
                # executescript steps the pragma to its end; execute() would free one page.
                self._connection().executescript(f"PRAGMA incremental_vacuum({_VACUUM_PAGES});")
            except sqlite3.Error as exc:
                self._discard()
                raise SinkError(f"{self.url}: cannot reclaim free pages: {exc}") from exc

    def _fetch_partitions(
        self, group_id: str, wanted: Sequence[tuple[str, int]]
    ) -> list[tuple[Any, ...]]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append(partition)
        statements = []
        for topic, parts in by_topic.items():
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
        found: list[tuple[Any, ...]] = []
        with self._lock:
            conn = self._connection()
            try:
                # Several statements read one snapshot only inside one read transaction.
                if len(statements) > 1:
                    conn.execute("BEGIN DEFERRED")
                for sql, params in statements:
                    found.extend(conn.execute(sql, params))
                if conn.in_transaction:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._discard()
                raise SinkError(f"{self.url}: read failed: {exc}") from exc
        return found

    # --- schema and statements -----------------------------------------------------------------

    def _baseline_statements(self) -> list[str]:
        t = self._t
        ddl = f"""
        CREATE TABLE IF NOT EXISTS {t["offsets"]} (
            {_COMMIT_DDL}
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
            {_COMMIT_DDL}
            PRIMARY KEY (batch_id, seq)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS {t["history_index"]}
            ON {t["history"]} (group_id, topic, "partition", batch_id);
        CREATE TABLE IF NOT EXISTS {t["log_end"]} (
            topic TEXT NOT NULL,
            "partition" INTEGER NOT NULL,
            log_end_offset INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL,
            PRIMARY KEY (topic, "partition")
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS {t["members"]} (
            group_id TEXT NOT NULL,
            member_id TEXT NOT NULL,
            batch_id INTEGER NOT NULL,
            PRIMARY KEY (group_id, member_id)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS {t["source"]} (
            id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
            cluster_id TEXT NOT NULL,
            cluster_name TEXT NOT NULL,
            updated_at_ms INTEGER NOT NULL
        );
        """
        return [statement for statement in ddl.split(";") if statement.strip()]

    def _migration_statements(self, version: int) -> list[str]:
        t = self._t
        if version == 2:
            return [
                f"CREATE INDEX IF NOT EXISTS {t['history_time_index']}"
                f" ON {t['history']} (commit_timestamp_ms)",
                f"ALTER TABLE {t['status']} ADD COLUMN heartbeat_at_ms INTEGER",
            ]
        if version == 3:
            return [
                f"""CREATE TABLE IF NOT EXISTS {t["samples"]} (
                    topic TEXT NOT NULL,
                    "partition" INTEGER NOT NULL,
                    log_end_offset INTEGER NOT NULL,
                    first_seen_ms INTEGER NOT NULL,
                    last_seen_ms INTEGER NOT NULL,
                    PRIMARY KEY (topic, "partition", log_end_offset)
                ) WITHOUT ROWID"""
            ]
        if version == 4:
            return [
                f"""CREATE TABLE IF NOT EXISTS {t["commits"]} (
                    group_id TEXT NOT NULL PRIMARY KEY,
                    commits INTEGER NOT NULL,
                    updated_at_ms INTEGER NOT NULL
                ) WITHOUT ROWID"""
            ]
        if version == 5:
            # SQLite cannot alter a CHECK constraint: the one-row table is copied into a new one.
            new = quote_identifier(self._names.status + "_v5")
            return [
                f"""CREATE TABLE {new} (
                    id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
                    status TEXT NOT NULL
                        CHECK (status IN ('LOADING', 'STARTING', 'ACTIVE', 'STOPPED')),
                    detail TEXT NOT NULL, last_batch_id INTEGER NOT NULL,
                    ingest_offsets TEXT NOT NULL, input_rows INTEGER NOT NULL,
                    commits_applied INTEGER NOT NULL, rejected INTEGER NOT NULL,
                    tombstones INTEGER NOT NULL, state_keys INTEGER NOT NULL,
                    duration_ms INTEGER NOT NULL, batch_timestamp_ms INTEGER,
                    skipped_records INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL,
                    heartbeat_at_ms INTEGER)""",
                f"INSERT INTO {new} SELECT * FROM {t['status']}",
                f"DROP TABLE {t['status']}",
                f"ALTER TABLE {new} RENAME TO {t['status']}",
            ]
        raise ValueError(f"no sink schema step to version {version}")

    def _table_exists_query(self, table: str) -> tuple[str, Sequence[Any]]:
        return ("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))

    def _statements(self) -> dict[str, str]:
        t = self._t
        value_cols = ", ".join(_OFFSET_COLUMNS)
        return {
            "create_schema_table": (
                f"CREATE TABLE IF NOT EXISTS {t['schema']} (version INTEGER NOT NULL PRIMARY KEY,"
                " description TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
            ),
            "schema_version": f"SELECT MAX(version) FROM {t['schema']}",
            "record_schema_version": (
                f"INSERT INTO {t['schema']} (version, description, applied_at_ms) VALUES (?, ?, ?)"
            ),
            "heartbeat": f"UPDATE {t['status']} SET heartbeat_at_ms = ? WHERE id = 1",
            "history_bounds": f"SELECT MIN(batch_id), MAX(batch_id) FROM {t['history']}",
            "shift_history": f"UPDATE {t['history']} SET batch_id = batch_id - ?",
            "purge_history": (
                f"DELETE FROM {t['history']} WHERE (batch_id, seq) IN (SELECT batch_id, seq"
                f" FROM {t['history']} WHERE commit_timestamp_ms < ? LIMIT ?)"
            ),
            **{f"count_{role}": f"SELECT COUNT(*) FROM {t[role]}" for role in self._names.tables()},
            "insert_status": (
                f"INSERT INTO {t['status']} (id, status, detail, last_batch_id, ingest_offsets,"
                " input_rows, commits_applied, rejected, tombstones, state_keys, duration_ms,"
                " batch_timestamp_ms, skipped_records, updated_at_ms)"
                " VALUES (1, 'STOPPED', '', -1, '{}', 0, 0, 0, 0, 0, 0, NULL, 0, ?)"
                " ON CONFLICT (id) DO NOTHING"
            ),
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
            "clear_offsets": f"DELETE FROM {t['offsets']}",
            "clear_groups": f"DELETE FROM {t['groups']}",
            "reset_status": (
                f"UPDATE {t['status']} SET status = ?, detail = ?, last_batch_id = -1,"
                " ingest_offsets = '{}', updated_at_ms = ? WHERE id = 1"
            ),
            "status": f"SELECT {', '.join(STATUS_COLUMNS)} FROM {t['status']} WHERE id = 1",
            "fetch_group": (
                f"SELECT {value_cols} FROM {t['offsets']}"
                ' WHERE group_id = ? ORDER BY topic, "partition"'
            ),
            "upsert_log_end": (
                f'INSERT INTO {t["log_end"]} (topic, "partition", log_end_offset, updated_at_ms)'
                " VALUES (?, ?, ?, ?)"
                ' ON CONFLICT (topic, "partition") DO UPDATE SET'
                " log_end_offset = excluded.log_end_offset, updated_at_ms = excluded.updated_at_ms"
            ),
            "log_end": (
                f'SELECT topic, "partition", log_end_offset, updated_at_ms FROM {t["log_end"]}'
                ' ORDER BY topic, "partition"'
            ),
            "clear_log_end": f"DELETE FROM {t['log_end']}",
            "samples": (
                f'SELECT topic, "partition", log_end_offset, first_seen_ms, last_seen_ms'
                f' FROM {t["samples"]} ORDER BY topic, "partition", log_end_offset'
            ),
            "upsert_sample": (
                f'INSERT INTO {t["samples"]} (topic, "partition", log_end_offset, first_seen_ms,'
                " last_seen_ms) VALUES (?, ?, ?, ?, ?)"
                ' ON CONFLICT (topic, "partition", log_end_offset) DO UPDATE SET'
                " first_seen_ms = MIN(first_seen_ms, excluded.first_seen_ms),"
                " last_seen_ms = MAX(last_seen_ms, excluded.last_seen_ms)"
            ),
            "sample_heads": (
                f'SELECT topic, "partition", MAX(log_end_offset), MAX(last_seen_ms), COUNT(*)'
                f' FROM {t["samples"]} GROUP BY topic, "partition"'
            ),
            "partition_samples": (
                f"SELECT log_end_offset, first_seen_ms, last_seen_ms FROM {t['samples']}"
                ' WHERE topic = ? AND "partition" = ? ORDER BY log_end_offset'
            ),
            "delete_partition_samples": (
                f'DELETE FROM {t["samples"]} WHERE topic = ? AND "partition" = ?'
            ),
            "samples_since": (
                f'SELECT topic, "partition", log_end_offset, first_seen_ms, last_seen_ms'
                f" FROM {t['samples']} WHERE last_seen_ms >= ?"
                ' ORDER BY topic, "partition", log_end_offset'
            ),
            "all_offsets": (
                f'SELECT group_id, topic, "partition", committed_offset, commit_timestamp_ms'
                f' FROM {t["offsets"]} ORDER BY group_id, topic, "partition"'
            ),
            "group_exists": (
                f"SELECT 1 WHERE EXISTS (SELECT 1 FROM {t['offsets']} WHERE group_id = ?)"
                f" OR EXISTS (SELECT 1 FROM {t['groups']} WHERE group_id = ?)"
            ),
            "delete_sample": (
                f'DELETE FROM {t["samples"]} WHERE topic = ? AND "partition" = ?'
                " AND log_end_offset = ?"
            ),
            "upsert_member": (
                f"INSERT INTO {t['members']} (group_id, member_id, batch_id) VALUES (?, ?, ?)"
                " ON CONFLICT (group_id, member_id) DO UPDATE SET batch_id = excluded.batch_id"
            ),
            "delete_member": f"DELETE FROM {t['members']} WHERE group_id = ? AND member_id = ?",
            "clear_members": f"DELETE FROM {t['members']}",
            "add_group_commits": (
                f"INSERT INTO {t['commits']} (group_id, commits, updated_at_ms) VALUES (?, ?, ?)"
                " ON CONFLICT (group_id) DO UPDATE SET commits = commits + excluded.commits,"
                " updated_at_ms = excluded.updated_at_ms"
            ),
            "forget_group_commits": (
                f"DELETE FROM {t['commits']} WHERE group_id = ?"
                f" AND NOT EXISTS (SELECT 1 FROM {t['offsets']} WHERE group_id = ?)"
            ),
            "group_commits": f"SELECT group_id, commits FROM {t['commits']}",
            "committed_topics": f"SELECT DISTINCT topic FROM {t['offsets']} ORDER BY topic",
            "source_cluster": (
                f"SELECT cluster_id, cluster_name, updated_at_ms FROM {t['source']} WHERE id = 1"
            ),
            "bind_source": (
                f"INSERT INTO {t['source']} (id, cluster_id, cluster_name, updated_at_ms)"
                " VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
                " cluster_name = excluded.cluster_name, updated_at_ms = excluded.updated_at_ms"
            ),
            "list_groups": (
                f"SELECT k.group_id, COALESCE(o.n, 0), g.generation,"
                f" CASE WHEN g.group_id IS NULL THEN NULL ELSE COALESCE(g.members, m.n, 0) END"
                f" FROM (SELECT group_id FROM {t['offsets']} UNION SELECT group_id FROM"
                f" {t['groups']}) AS k LEFT JOIN (SELECT group_id, COUNT(*) AS n FROM"
                f" {t['offsets']} GROUP BY group_id) AS o ON o.group_id = k.group_id"
                f" LEFT JOIN {t['groups']} AS g ON g.group_id = k.group_id"
                f" LEFT JOIN (SELECT group_id, COUNT(*) AS n FROM {t['members']}"
                f" GROUP BY group_id) AS m ON m.group_id = k.group_id ORDER BY k.group_id"
            ),
        }

    def _recent_history_query(self) -> str:
        return (
            'SELECT group_id, topic, "partition", committed_offset, leader_epoch, metadata,'
            " commit_timestamp_ms, batch_id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY"
            ' topic, "partition" ORDER BY batch_id DESC, seq DESC) AS newest'
            f" FROM {self._t['history']} WHERE group_id = ?) AS h WHERE newest <= ?"
            ' ORDER BY topic, "partition", batch_id DESC, seq DESC'
        )

    def _groups_recent_commits(
        self, group_ids: Sequence[str], per_partition: int
    ) -> list[tuple[Any, ...]]:
        found: list[tuple[Any, ...]] = []
        with self._lock:
            conn = self._connection()
            try:
                if len(group_ids) > _IN_CHUNK:  # one snapshot for every chunk
                    conn.execute("BEGIN DEFERRED")
                for i in range(0, len(group_ids), _IN_CHUNK):
                    chunk = group_ids[i : i + _IN_CHUNK]
                    marks = ", ".join("?" * len(chunk))
                    found.extend(
                        conn.execute(
                            _GROUPS_RECENT_COMMITS.format(history=self._t["history"], marks=marks),
                            (*chunk, per_partition),
                        )
                    )
                if conn.in_transaction:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._discard()
                raise SinkError(f"{self.url}: read failed: {exc}") from exc
        return found

    def _history_query(self, conditions: Sequence[str]) -> str:
        where = " AND ".join(f"{column} = ?" for column in conditions)
        return (
            f'SELECT group_id, topic, "partition", committed_offset, leader_epoch, metadata,'
            f" commit_timestamp_ms, batch_id FROM {self._t['history']}"
            f" WHERE {where} ORDER BY batch_id DESC, seq DESC LIMIT ?"
        )
