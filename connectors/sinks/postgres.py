"""The PostgreSQL sink (psycopg 3): one transaction per micro-batch, upserts via COPY for bulk.

Writing a batch: ``SELECT last_batch_id … FOR UPDATE`` on the status row serialises writers and
makes the batch idempotent; then, for batches of at least ``copy_threshold`` offset changes, the
deduplicated upserts and tombstones are COPYed (binary) into session temp tables and applied with
one ``INSERT … SELECT … ON CONFLICT … DO UPDATE`` and one ``DELETE … USING``; smaller batches use
``executemany`` (pipelined). The progress row is updated in the same transaction.

Failures: if the server or the connection fails during a batch, the transaction is gone, the
batch raises :class:`~connectors.sinks.values.SinkWriteError` and nothing of it is kept. The
sink does *not* retry the batch itself: raised from ``foreachBatch`` the error fails the
streaming query loudly, and the restarted query replays the batch from its checkpoint. The
broken connection is dropped, and the next call (write or read) connects afresh. A connection
found dead *before* a batch starts (server restart, idle timeout: the first statement fails) is
replaced and the batch runs on the new one, since nothing of it reached the server. Reads retry
once on a fresh connection when the connection turns out to be broken (they are idempotent).

Readers in other processes open their own sink (``open_sink(url, read_only=True)`` runs no DDL and
sets ``default_transaction_read_only``); each read is one statement, so it sees whole batches.
Offsets are rewritten far more often than inserted: ``consumer_offsets`` keeps 30% of each page
free (``fillfactor = 70``) so that an update can stay on its page as a HOT update and skip
writing a new primary-key entry. Key columns use ``COLLATE "C"``: byte-order comparisons are
faster than locale-aware ones, and listings sort by code point as in SQLite.

The write path, the reads and the contract are :class:`~connectors.sinks.base.Sink`'s; this
module supplies the connection, its transactions, COPY for bulk batches and the SQL.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, LiteralString

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from connectors.sinks.base import Sink
from connectors.sinks.batch import OFFSET_KEY_COLUMNS, OFFSET_UPSERT_COLUMNS, PreparedBatch, rows
from connectors.sinks.core import Statements
from connectors.sinks.tables import PROGRESS_COLUMNS, STATUS_COLUMNS
from connectors.sinks.url import redact_url
from connectors.sinks.values import SinkError, now_ms

log = logging.getLogger(__name__)

_APPLICATION_NAME: Final = "spark-consumer-offsets-sink"
# Session temp tables for bulk batches; ON COMMIT DELETE ROWS empties them after every batch.
_STAGE_UPSERTS: Final = "sink_stage_offset_upserts"
_STAGE_DELETES: Final = "sink_stage_offset_deletes"
_OFFSET_VALUE_COLUMNS: Final = (
    "topic",
    "partition",
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
    "expire_timestamp_ms",
)
_UPSERT_TYPES: Final = ["text", "text", "int4", "int8", "int4", "text", "int8", "int8"]
_DELETE_TYPES: Final = ["text", "text", "int4"]
_HISTORY_TYPES: Final = ["int8", "int8", "text", "text", "int4", "int8", "int4", "text", "int8"]
# The columns of an applied commit, shared by the offsets and the history table.
_COMMIT_DDL: Final = """group_id text COLLATE "C" NOT NULL,
                topic text COLLATE "C" NOT NULL,
                "partition" integer NOT NULL,
                committed_offset bigint NOT NULL,
                leader_epoch integer NOT NULL,
                metadata text NOT NULL,
                commit_timestamp_ms bigint NOT NULL,"""


def _columns(names: Sequence[str]) -> sql.Composed:
    return sql.SQL(", ").join(sql.Identifier(n) for n in names)


def _q(text: LiteralString) -> sql.SQL:
    return sql.SQL(text)


class PostgresSink(Sink):
    """:class:`Sink` on PostgreSQL; see the module docstring for transactions and failures."""

    _driver_error = psycopg.Error

    def __init__(
        self,
        conninfo: str,
        *,
        table_prefix: str = "",
        schema: str | None = None,
        keep_history: bool = False,
        read_only: bool = False,
        copy_threshold: int = 1000,
        connect_timeout_s: int = 10,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._conninfo = conninfo
        self.copy_threshold = copy_threshold
        self._connect_timeout_s = connect_timeout_s
        self._schema = schema or None
        super().__init__(
            redact_url(conninfo),
            table_prefix=table_prefix,
            keep_history=keep_history,
            read_only=read_only,
            clock=clock,
        )

        def table(name: str) -> sql.Identifier:
            return sql.Identifier(self._schema, name) if self._schema else sql.Identifier(name)

        self._t = {role: table(name) for role, name in self._names.tables().items()}
        # CREATE INDEX names are unqualified: the index lives in its table's schema.
        self._t["history_index"] = sql.Identifier(self._names.history_index)
        self._t["history_time_index"] = sql.Identifier(self._names.history_time_index)
        self._t["stage_upserts"] = sql.Identifier(_STAGE_UPSERTS)
        self._t["stage_deletes"] = sql.Identifier(_STAGE_DELETES)
        self._sql = self._statements()
        self._open()

    # --- connection and transactions -----------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        given = conninfo_to_dict(self._conninfo)
        extra: dict[str, Any] = {}
        if "application_name" not in given:
            extra["application_name"] = _APPLICATION_NAME
        if "connect_timeout" not in given:
            extra["connect_timeout"] = self._connect_timeout_s
        try:
            # autocommit: reads are single statements and leave no idle transaction behind;
            # writes open explicit transactions.
            conn = psycopg.connect(self._conninfo, autocommit=True, **extra)
        except psycopg.Error as exc:
            raise SinkError(f"cannot connect to sink {self.url}: {exc}") from exc
        try:
            if self.read_only:
                conn.execute("SET default_transaction_read_only = on")
            else:
                self._create_stage_tables(conn)
        except psycopg.Error as exc:
            conn.close()
            raise SinkError(f"cannot prepare the connection to {self.url}: {exc}") from exc
        return conn

    def _lost(self, conn: psycopg.Connection[Any]) -> bool:
        return bool(conn.closed or conn.broken)

    def _transaction(
        self, conn: psycopg.Connection[Any], body: Callable[[Statements], bool]
    ) -> None:
        """One transaction on the autocommit connection; it commits even a skipped batch's
        locking read (nothing was written)."""
        with conn.transaction(), conn.cursor() as cur:
            body(cur)

    def _run(
        self, statement: sql.Composed, params: Sequence[Any] = (), *, action: str = "read failed"
    ) -> list[tuple[Any, ...]]:
        """Run one autocommit statement; retry once on a fresh connection if it was broken."""
        with self._lock:
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    with conn.cursor() as cur:
                        cur.execute(statement, params)
                        return cur.fetchall() if cur.description else []
                except psycopg.Error as exc:
                    lost = self._lost(conn)
                    if lost:
                        self._discard()
                    if not lost or attempt == 2:
                        raise SinkError(f"{self.url}: {action}: {exc}") from exc
            raise AssertionError("unreachable")

    def _read_chunks(
        self, statement: sql.Composed, consume: Callable[[list[tuple[Any, ...]]], None], size: int
    ) -> None:
        """As :meth:`_run`: retried once on a fresh connection if it was broken before any
        row was handed on."""
        with self._lock:
            for attempt in (1, 2):
                conn = self._connection()
                handed = False
                try:
                    with conn.cursor() as cur:
                        cur.execute(statement)
                        while found := cur.fetchmany(size):
                            handed = True
                            consume(found)
                        return
                except psycopg.Error as exc:
                    lost = self._lost(conn)
                    if lost:
                        self._discard()
                    if not lost or attempt == 2 or handed:
                        raise SinkError(f"{self.url}: read failed: {exc}") from exc

    def _fetch_partitions(
        self, group_id: str, wanted: Sequence[tuple[str, int]]
    ) -> list[tuple[Any, ...]]:
        topics = sorted({topic for topic, _ in wanted})
        numbers = sorted({partition for _, partition in wanted})
        return self._run(self._sql["fetch_partitions"], (group_id, topics, numbers))

    # --- bulk writes ---------------------------------------------------------------------------

    def _write_offsets(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """From ``copy_threshold`` offset changes on: COPY into the stage tables, then one
        upsert and one delete; below it, the base's ``executemany`` (pipelined by psycopg)."""
        if batch.offset_changes < self.copy_threshold:
            super()._write_offsets(tx, batch_id, batch)
            return
        if batch.offset_upserts.num_rows:
            upserts = rows(batch.offset_upserts, OFFSET_UPSERT_COLUMNS)
            self._copy(tx, "copy_upserts", upserts, _UPSERT_TYPES)
            tx.execute(self._sql["upsert_offsets_staged"], (batch_id,))
        if batch.offset_deletes.num_rows:
            deletes = rows(batch.offset_deletes, OFFSET_KEY_COLUMNS)
            self._copy(tx, "copy_deletes", deletes, _DELETE_TYPES)
            tx.execute(self._sql["delete_offsets_staged"])

    def _write_history(
        self, tx: Statements, history: Iterable[tuple[Any, ...]], count: int
    ) -> None:
        if count >= self.copy_threshold:
            self._copy(tx, "copy_history", history, _HISTORY_TYPES)
        else:
            super()._write_history(tx, history, count)

    def _copy(
        self,
        cur: Any,
        statement: str,
        data: Iterable[tuple[Any, ...]],
        types: list[str],
    ) -> None:
        with cur.copy(self._sql[statement]) as copy:
            copy.set_types(types)
            for row in data:
                copy.write_row(row)

    # --- schema and statements -----------------------------------------------------------------

    def _baseline_statements(self) -> list[sql.Composable]:
        t = self._t
        statements: list[sql.Composable] = [
            sql.SQL(
                """CREATE TABLE IF NOT EXISTS {offsets} (
                """
                + _COMMIT_DDL
                + """
                expire_timestamp_ms bigint,
                batch_id bigint NOT NULL,
                PRIMARY KEY (group_id, topic, "partition"))
                WITH (fillfactor = 70)"""
            ).format(offsets=t["offsets"]),
            sql.SQL(
                """CREATE TABLE IF NOT EXISTS {groups} (
                group_id text COLLATE "C" NOT NULL PRIMARY KEY,
                generation integer,
                members integer,
                batch_id bigint NOT NULL)"""
            ).format(groups=t["groups"]),
            sql.SQL(
                """CREATE TABLE IF NOT EXISTS {status} (
                id smallint NOT NULL PRIMARY KEY CHECK (id = 1),
                status text NOT NULL CHECK (status IN ('LOADING', 'ACTIVE', 'STOPPED')),
                detail text NOT NULL,
                last_batch_id bigint NOT NULL,
                ingest_offsets text NOT NULL,
                input_rows bigint NOT NULL,
                commits_applied bigint NOT NULL,
                rejected bigint NOT NULL,
                tombstones bigint NOT NULL,
                state_keys bigint NOT NULL,
                duration_ms bigint NOT NULL,
                batch_timestamp_ms bigint,
                skipped_records bigint NOT NULL,
                updated_at_ms bigint NOT NULL)"""
            ).format(status=t["status"]),
            sql.SQL(
                """CREATE TABLE IF NOT EXISTS {history} (
                batch_id bigint NOT NULL,
                seq bigint NOT NULL,
                """
                + _COMMIT_DDL
                + """
                PRIMARY KEY (batch_id, seq))"""
            ).format(history=t["history"]),
            sql.SQL(
                'CREATE INDEX IF NOT EXISTS {index} ON {history} (group_id, topic, "partition",'
                " batch_id)"
            ).format(index=t["history_index"], history=t["history"]),
            sql.SQL(
                """CREATE TABLE IF NOT EXISTS {log_end} (
                topic text COLLATE "C" NOT NULL,
                "partition" integer NOT NULL,
                log_end_offset bigint NOT NULL,
                updated_at_ms bigint NOT NULL,
                PRIMARY KEY (topic, "partition"))"""
            ).format(log_end=t["log_end"]),
            sql.SQL(
                """CREATE TABLE IF NOT EXISTS {members} (
                group_id text COLLATE "C" NOT NULL,
                member_id text COLLATE "C" NOT NULL,
                batch_id bigint NOT NULL,
                PRIMARY KEY (group_id, member_id))"""
            ).format(members=t["members"]),
            sql.SQL(
                """CREATE TABLE IF NOT EXISTS {source} (
                id smallint NOT NULL PRIMARY KEY CHECK (id = 1),
                cluster_id text NOT NULL,
                cluster_name text NOT NULL,
                updated_at_ms bigint NOT NULL)"""
            ).format(source=t["source"]),
        ]
        return statements

    def _migration_statements(self, version: int) -> list[sql.Composable]:
        t = self._t
        if version == 2:
            return [
                _q("CREATE INDEX IF NOT EXISTS {} ON {} (commit_timestamp_ms)").format(
                    t["history_time_index"], t["history"]
                ),
                _q("ALTER TABLE {} ADD COLUMN IF NOT EXISTS heartbeat_at_ms bigint").format(
                    t["status"]
                ),
                # History retention deletes a little every minute: vacuum the table after 2% of
                # it is dead rather than PostgreSQL's 20%, so freed space is reused soon.
                _q(
                    "ALTER TABLE {} SET (autovacuum_vacuum_scale_factor = 0.02,"
                    " autovacuum_vacuum_insert_scale_factor = 0.02)"
                ).format(t["history"]),
            ]
        if version == 3:
            return [
                _q(
                    "CREATE TABLE IF NOT EXISTS {} (topic text NOT NULL,"
                    ' "partition" integer NOT NULL, log_end_offset bigint NOT NULL,'
                    " first_seen_ms bigint NOT NULL, last_seen_ms bigint NOT NULL,"
                    ' PRIMARY KEY (topic, "partition", log_end_offset))'
                ).format(t["samples"])
            ]
        if version == 4:
            return [
                _q(
                    'CREATE TABLE IF NOT EXISTS {} (group_id text COLLATE "C" NOT NULL PRIMARY KEY,'
                    " commits bigint NOT NULL, updated_at_ms bigint NOT NULL)"
                ).format(t["commits"])
            ]
        if version == 5:
            # The name PostgreSQL gave the baseline's CHECK (<table>_<column>_check).
            check = sql.Identifier(f"{self._names.status}_status_check")
            return [
                _q(
                    "ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}, ADD CONSTRAINT {}"
                    " CHECK (status IN ('LOADING', 'STARTING', 'ACTIVE', 'STOPPED'))"
                ).format(t["status"], check, check)
            ]
        raise ValueError(f"no sink schema step to version {version}")

    def _table_exists_query(self, table: str) -> tuple[sql.Composed, Sequence[Any]]:
        return (
            _q(
                "SELECT 1 FROM information_schema.tables"
                " WHERE table_schema = COALESCE(%s, current_schema()) AND table_name = %s"
            ).format(),
            (self._schema, table),
        )

    def _lock_schema(self, tx: Statements) -> None:
        """A transaction-scoped advisory lock per (schema, prefix): concurrent CREATE … IF NOT
        EXISTS can still collide in the catalog. Then the schema, if one is named."""
        lock_key = zlib.crc32(f"{self._schema}.{self._names.prefix}".encode()) - 2**31
        tx.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
        # Only a missing schema is created: CREATE SCHEMA needs the CREATE privilege on the
        # database even with IF NOT EXISTS, which a role writing into a given schema lacks
        # (deploy/postgres/roles.sql).
        exists = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
        if self._schema and not tx.execute(exists, (self._schema,)).fetchone():
            tx.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self._schema)))

    def _create_stage_tables(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            sql.SQL(
                'CREATE TEMP TABLE IF NOT EXISTS {} (group_id text, topic text, "partition"'
                " integer, committed_offset bigint, leader_epoch integer, metadata text,"
                " commit_timestamp_ms bigint, expire_timestamp_ms bigint) ON COMMIT DELETE ROWS"
            ).format(self._t["stage_upserts"])
        )
        conn.execute(
            sql.SQL(
                'CREATE TEMP TABLE IF NOT EXISTS {} (group_id text, topic text, "partition"'
                " integer) ON COMMIT DELETE ROWS"
            ).format(self._t["stage_deletes"])
        )

    def _statements(self) -> dict[str, sql.Composed]:
        t = self._t
        set_values = _q(
            "committed_offset = EXCLUDED.committed_offset, leader_epoch = EXCLUDED.leader_epoch,"
            " metadata = EXCLUDED.metadata, commit_timestamp_ms = EXCLUDED.commit_timestamp_ms,"
            " expire_timestamp_ms = EXCLUDED.expire_timestamp_ms, batch_id = EXCLUDED.batch_id"
        )
        upsert_columns = _columns(["group_id", *_OFFSET_VALUE_COLUMNS, "batch_id"])
        stage_columns = _columns(["group_id", *_OFFSET_VALUE_COLUMNS])
        key_match = _q(
            'o.group_id = d.group_id AND o.topic = d.topic AND o."partition" = d."partition"'
        )
        return {
            "create_schema_table": _q(
                "CREATE TABLE IF NOT EXISTS {} (version integer NOT NULL PRIMARY KEY,"
                " description text NOT NULL, applied_at_ms bigint NOT NULL)"
            ).format(t["schema"]),
            "schema_version": _q("SELECT max(version) FROM {}").format(t["schema"]),
            "record_schema_version": _q(
                "INSERT INTO {} (version, description, applied_at_ms) VALUES (%s, %s, %s)"
            ).format(t["schema"]),
            "insert_status": _q(
                "INSERT INTO {} (id, status, detail, last_batch_id, ingest_offsets,"
                " input_rows, commits_applied, rejected, tombstones, state_keys,"
                " duration_ms, batch_timestamp_ms, skipped_records, updated_at_ms)"
                " VALUES (1, 'STOPPED', '', -1, '{{}}', 0, 0, 0, 0, 0, 0, NULL, 0, %s)"
                " ON CONFLICT (id) DO NOTHING"
            ).format(t["status"]),
            "heartbeat": _q("UPDATE {} SET heartbeat_at_ms = %s WHERE id = 1").format(t["status"]),
            "history_bounds": _q("SELECT min(batch_id), max(batch_id) FROM {}").format(
                t["history"]
            ),
            "shift_history": _q("UPDATE {} SET batch_id = batch_id - %s").format(t["history"]),
            "purge_history": _q(
                "DELETE FROM {h} WHERE (batch_id, seq) IN (SELECT batch_id, seq FROM {h}"
                " WHERE commit_timestamp_ms < %s LIMIT %s)"
            ).format(h=t["history"]),
            **{
                f"count_{role}": _q("SELECT count(*) FROM {}").format(t[role])
                for role in self._names.tables()
            },
            "last_batch": _q("SELECT last_batch_id FROM {} WHERE id = 1 FOR UPDATE").format(
                t["status"]
            ),
            "upsert_offset": _q(
                "INSERT INTO {offsets} ({cols}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                ' ON CONFLICT (group_id, topic, "partition") DO UPDATE SET {set}'
            ).format(offsets=t["offsets"], cols=upsert_columns, set=set_values),
            "upsert_offsets_staged": _q(
                "INSERT INTO {offsets} ({cols}) SELECT {stage_cols}, %s FROM {stage}"
                ' ON CONFLICT (group_id, topic, "partition") DO UPDATE SET {set}'
            ).format(
                offsets=t["offsets"],
                cols=upsert_columns,
                stage_cols=stage_columns,
                stage=t["stage_upserts"],
                set=set_values,
            ),
            "copy_upserts": _q("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
                t["stage_upserts"], stage_columns
            ),
            "delete_offset": _q(
                'DELETE FROM {} WHERE group_id = %s AND topic = %s AND "partition" = %s'
            ).format(t["offsets"]),
            "delete_offsets_staged": _q("DELETE FROM {} AS o USING {} AS d WHERE {}").format(
                t["offsets"], t["stage_deletes"], key_match
            ),
            "copy_deletes": _q("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
                t["stage_deletes"], _columns(OFFSET_KEY_COLUMNS)
            ),
            "upsert_group": _q(
                "INSERT INTO {} (group_id, generation, members, batch_id) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (group_id) DO UPDATE SET generation = EXCLUDED.generation,"
                " members = EXCLUDED.members, batch_id = EXCLUDED.batch_id"
            ).format(t["groups"]),
            "delete_group": _q("DELETE FROM {} WHERE group_id = %s").format(t["groups"]),
            "insert_history": _q(
                'INSERT INTO {} (batch_id, seq, group_id, topic, "partition", committed_offset,'
                " leader_epoch, metadata, commit_timestamp_ms)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            ).format(t["history"]),
            "copy_history": _q(
                'COPY {} (batch_id, seq, group_id, topic, "partition", committed_offset,'
                " leader_epoch, metadata, commit_timestamp_ms) FROM STDIN (FORMAT BINARY)"
            ).format(t["history"]),
            "progress": _q("UPDATE {} SET {} WHERE id = 1").format(
                t["status"],
                sql.SQL(", ").join(
                    sql.SQL("{} = %s").format(sql.Identifier(c)) for c in PROGRESS_COLUMNS
                ),
            ),
            "set_status": _q(
                "UPDATE {} SET status = %s, detail = %s, updated_at_ms = %s WHERE id = 1"
            ).format(t["status"]),
            "clear_offsets": _q("DELETE FROM {}").format(t["offsets"]),
            "clear_groups": _q("DELETE FROM {}").format(t["groups"]),
            "reset_status": _q(
                "UPDATE {} SET status = %s, detail = %s, last_batch_id = -1,"
                " ingest_offsets = '{{}}', updated_at_ms = %s WHERE id = 1"
            ).format(t["status"]),
            "status": _q("SELECT {} FROM {} WHERE id = 1").format(
                _columns(STATUS_COLUMNS), t["status"]
            ),
            "fetch_group": _q(
                'SELECT {} FROM {} WHERE group_id = %s ORDER BY topic, "partition"'
            ).format(_columns(_OFFSET_VALUE_COLUMNS), t["offsets"]),
            # A superset of the request (any listed topic with any listed partition) in one index
            # scan; fetch_answer picks the exact pairs. Cheaper than joining unnest(text[]).
            "fetch_partitions": _q(
                "SELECT {} FROM {} WHERE group_id = %s AND topic = ANY(%s::text[])"
                ' AND "partition" = ANY(%s::integer[])'
            ).format(_columns(_OFFSET_VALUE_COLUMNS), t["offsets"]),
            "upsert_log_end": _q(
                'INSERT INTO {} (topic, "partition", log_end_offset, updated_at_ms)'
                " VALUES (%s, %s, %s, %s)"
                ' ON CONFLICT (topic, "partition") DO UPDATE SET'
                " log_end_offset = EXCLUDED.log_end_offset, updated_at_ms = EXCLUDED.updated_at_ms"
            ).format(t["log_end"]),
            "log_end": _q(
                'SELECT topic, "partition", log_end_offset, updated_at_ms FROM {}'
                ' ORDER BY topic, "partition"'
            ).format(t["log_end"]),
            "clear_log_end": _q("DELETE FROM {}").format(t["log_end"]),
            "samples": _q(
                'SELECT topic, "partition", log_end_offset, first_seen_ms, last_seen_ms FROM {}'
                ' ORDER BY topic, "partition", log_end_offset'
            ).format(t["samples"]),
            "upsert_sample": _q(
                'INSERT INTO {} AS s (topic, "partition", log_end_offset, first_seen_ms,'
                " last_seen_ms) VALUES (%s, %s, %s, %s, %s)"
                ' ON CONFLICT (topic, "partition", log_end_offset) DO UPDATE SET'
                " first_seen_ms = LEAST(s.first_seen_ms, EXCLUDED.first_seen_ms),"
                " last_seen_ms = GREATEST(s.last_seen_ms, EXCLUDED.last_seen_ms)"
            ).format(t["samples"]),
            "sample_heads": _q(
                'SELECT topic, "partition", MAX(log_end_offset), MAX(last_seen_ms), COUNT(*)'
                ' FROM {} GROUP BY topic, "partition"'
            ).format(t["samples"]),
            "partition_samples": _q(
                "SELECT log_end_offset, first_seen_ms, last_seen_ms FROM {}"
                ' WHERE topic = %s AND "partition" = %s ORDER BY log_end_offset'
            ).format(t["samples"]),
            "delete_partition_samples": _q(
                'DELETE FROM {} WHERE topic = %s AND "partition" = %s'
            ).format(t["samples"]),
            "samples_since": _q(
                'SELECT topic, "partition", log_end_offset, first_seen_ms, last_seen_ms FROM {}'
                ' WHERE last_seen_ms >= %s ORDER BY topic, "partition", log_end_offset'
            ).format(t["samples"]),
            "groups_recent_commits": _q(
                'SELECT group_id, topic, "partition", committed_offset, commit_timestamp_ms'
                " FROM (SELECT *, row_number() OVER (PARTITION BY"
                ' group_id, topic, "partition" ORDER BY batch_id DESC, seq DESC) AS newest'
                " FROM {} WHERE group_id = ANY(%s::text[])) AS h WHERE newest <= %s"
                ' ORDER BY group_id, topic, "partition", batch_id DESC, seq DESC'
            ).format(t["history"]),
            "all_offsets": _q(
                'SELECT group_id, topic, "partition", committed_offset, commit_timestamp_ms'
                ' FROM {} ORDER BY group_id, topic, "partition"'
            ).format(t["offsets"]),
            "group_exists": _q(
                "SELECT 1 WHERE EXISTS (SELECT 1 FROM {} WHERE group_id = %s)"
                " OR EXISTS (SELECT 1 FROM {} WHERE group_id = %s)"
            ).format(t["offsets"], t["groups"]),
            "delete_sample": _q(
                'DELETE FROM {} WHERE topic = %s AND "partition" = %s AND log_end_offset = %s'
            ).format(t["samples"]),
            "upsert_member": _q(
                "INSERT INTO {} (group_id, member_id, batch_id) VALUES (%s, %s, %s)"
                " ON CONFLICT (group_id, member_id) DO UPDATE SET batch_id = EXCLUDED.batch_id"
            ).format(t["members"]),
            "delete_member": _q("DELETE FROM {} WHERE group_id = %s AND member_id = %s").format(
                t["members"]
            ),
            "clear_members": _q("DELETE FROM {}").format(t["members"]),
            "add_group_commits": _q(
                "INSERT INTO {} AS c (group_id, commits, updated_at_ms) VALUES (%s, %s, %s)"
                " ON CONFLICT (group_id) DO UPDATE SET commits = c.commits + excluded.commits,"
                " updated_at_ms = excluded.updated_at_ms"
            ).format(t["commits"]),
            "forget_group_commits": _q(
                "DELETE FROM {} WHERE group_id = %s"
                " AND NOT EXISTS (SELECT 1 FROM {} WHERE group_id = %s)"
            ).format(t["commits"], t["offsets"]),
            "group_commits": _q("SELECT group_id, commits FROM {}").format(t["commits"]),
            "committed_topics": _q("SELECT DISTINCT topic FROM {} ORDER BY topic").format(
                t["offsets"]
            ),
            "source_cluster": _q(
                "SELECT cluster_id, cluster_name, updated_at_ms FROM {} WHERE id = 1"
            ).format(t["source"]),
            "bind_source": _q(
                "INSERT INTO {} (id, cluster_id, cluster_name, updated_at_ms)"
                " VALUES (1, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET"
                " cluster_name = EXCLUDED.cluster_name, updated_at_ms = EXCLUDED.updated_at_ms"
            ).format(t["source"]),
            "list_groups": _q(
                "SELECT k.group_id, COALESCE(o.n, 0), g.generation,"
                " CASE WHEN g.group_id IS NULL THEN NULL ELSE COALESCE(g.members, m.n, 0) END"
                " FROM (SELECT group_id FROM {offsets} UNION SELECT group_id FROM {groups}) AS k"
                " LEFT JOIN (SELECT group_id, count(*) AS n FROM {offsets} GROUP BY group_id)"
                " AS o ON o.group_id = k.group_id"
                " LEFT JOIN {groups} AS g ON g.group_id = k.group_id"
                " LEFT JOIN (SELECT group_id, count(*) AS n FROM {members} GROUP BY group_id)"
                " AS m ON m.group_id = k.group_id ORDER BY k.group_id"
            ).format(offsets=t["offsets"], groups=t["groups"], members=t["members"]),
        }

    def _recent_history_query(self) -> sql.Composed:
        return _q(
            'SELECT group_id, topic, "partition", committed_offset, leader_epoch, metadata,'
            " commit_timestamp_ms, batch_id FROM (SELECT *, row_number() OVER (PARTITION BY"
            ' topic, "partition" ORDER BY batch_id DESC, seq DESC) AS newest'
            " FROM {} WHERE group_id = %s) AS h WHERE newest <= %s"
            ' ORDER BY topic, "partition", batch_id DESC, seq DESC'
        ).format(self._t["history"])

    def _groups_recent_commits(
        self, group_ids: Sequence[str], per_partition: int
    ) -> list[tuple[Any, ...]]:
        return self._run(self._sql["groups_recent_commits"], (list(group_ids), per_partition))

    def _history_query(self, conditions: Sequence[str]) -> sql.Composed:
        # The conditions are the base's fixed column names, not user input.
        where = sql.SQL(" AND ").join(
            sql.SQL(f"{column} = %s")  # type: ignore[arg-type]
            for column in conditions
        )
        return _q(
            'SELECT group_id, topic, "partition", committed_offset, leader_epoch, metadata,'
            " commit_timestamp_ms, batch_id FROM {} WHERE {}"
            " ORDER BY batch_id DESC, seq DESC LIMIT %s"
        ).format(self._t["history"], where)
