"""The PostgreSQL sink (psycopg 3): its connection, transactions, and COPY for bulk batches.

``SELECT last_batch_id … FOR UPDATE`` on the status row serialises writers. From
``copy_threshold`` offset changes on, a batch's upserts and deletes are COPYed (binary) into
session temp tables and applied with one statement each; smaller batches use ``executemany``
(pipelined). A read-only sink sets ``default_transaction_read_only``.
"""

from __future__ import annotations

import contextlib
import functools
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import psycopg
import sqlalchemy as sa
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateTable

from connectors.sinks.base import Sink
from connectors.sinks.batch import OFFSET_KEY_COLUMNS, OFFSET_UPSERT_COLUMNS, PreparedBatch, rows
from connectors.sinks.core import Statements
from connectors.sinks.statements import compile_sql, dialect, upsert
from connectors.sinks.tables import define_tables
from connectors.sinks.url import redact_url
from connectors.sinks.values import SinkError, now_ms

_APPLICATION_NAME: Final = "spark-consumer-offsets-sink"


@functools.cache
def _bulk_statements(
    prefix: str, schema: str | None
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """COPY into session temp tables (``ON COMMIT DELETE ROWS`` empties them after every
    batch), then one upsert and one ``DELETE … USING`` from them; and each COPY's column
    types (the tables' own, as psycopg names them)."""
    t = define_tables(prefix, schema)
    offsets, history = t["offsets"], t["history"]
    md = sa.MetaData()
    temp = {"prefixes": ["TEMPORARY"], "postgresql_on_commit": "DELETE ROWS"}
    staged = [sa.Column(c.name, c.type) for c in offsets.c if c.name != "batch_id"]
    upserts = sa.Table("sink_stage_offset_upserts", md, *staged, **temp)
    keys = [sa.Column(c.name, c.type) for c in offsets.primary_key]
    deletes = sa.Table("sink_stage_offset_deletes", md, *keys, **temp)
    on = dialect("postgresql")
    quote = on.identifier_preparer

    def copy(table: sa.Table) -> str:
        columns = ", ".join(quote.quote(c.name) for c in table.c)
        return f"COPY {quote.format_table(table)} ({columns}) FROM STDIN (FORMAT BINARY)"

    def types(table: sa.Table) -> list[str]:
        return [c.type.compile(on).split()[0].lower() for c in table.c]  # no COLLATE

    rows_of = sa.select(*upserts.c, sa.bindparam("batch_id"))
    copy_types = {"copy_upserts": upserts, "copy_deletes": deletes, "copy_history": history}
    return {
        "create_stage_upserts": compile_sql(CreateTable(upserts, if_not_exists=True), on),
        "create_stage_deletes": compile_sql(CreateTable(deletes, if_not_exists=True), on),
        "copy_upserts": copy(upserts),
        "copy_deletes": copy(deletes),
        "copy_history": copy(history),
        "upsert_offsets_staged": compile_sql(
            upsert(postgresql.insert, offsets, *(c.name for c in keys), rows=rows_of),
            on,
            ("batch_id",),
        ),
        "delete_offsets_staged": compile_sql(
            sa.delete(offsets).where(*(offsets.c[c.name] == c for c in deletes.c)), on
        ),
    }, {name: types(table) for name, table in copy_types.items()}


class PostgresSink(Sink):
    """:class:`Sink` on PostgreSQL."""

    dialect_name = "postgresql"
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
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._conninfo = conninfo
        self.copy_threshold = copy_threshold
        super().__init__(
            redact_url(conninfo),
            table_prefix=table_prefix,
            keep_history=keep_history,
            read_only=read_only,
            clock=clock,
            schema=schema,
        )
        self._bulk, self._copy_types = _bulk_statements(self._prefix, self._schema)
        # (lease name, epoch) → the connection whose session holds that advisory lock.
        self._epoch_locks: dict[tuple[str, int], Any] = {}
        self._open()

    def _connect(self) -> psycopg.Connection[Any]:
        given = conninfo_to_dict(self._conninfo)
        extra: dict[str, Any] = {}
        if "application_name" not in given:
            extra["application_name"] = _APPLICATION_NAME
        if "connect_timeout" not in given:
            extra["connect_timeout"] = 10  # seconds
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
                conn.execute(self._bulk["create_stage_upserts"])
                conn.execute(self._bulk["create_stage_deletes"])
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

    def _end_when_quiet(self, tx: Statements, ttl_ms: int) -> None:
        """``SET LOCAL idle_in_transaction_session_timeout``: the server ends the session of a
        write whose client went quiet, which drops its row lock and its epoch lock. A long write
        keeps the server busy (statements, COPY), never idle."""
        tx.execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, true)", (str(ttl_ms),)
        )

    def _bind_list(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def _table_exists_params(self, table: str) -> tuple[object, ...]:
        return (self._schema, table)

    def _write_offsets(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """From ``copy_threshold`` offset changes on: COPY into the stage tables, then one
        upsert and one delete; below it, the base's ``executemany`` (pipelined by psycopg)."""
        if batch.offset_changes < self.copy_threshold:
            super()._write_offsets(tx, batch_id, batch)
            return
        if batch.offset_upserts.num_rows:
            upserts = rows(batch.offset_upserts, OFFSET_UPSERT_COLUMNS)
            self._copy(tx, "copy_upserts", upserts)
            tx.execute(self._bulk["upsert_offsets_staged"], (batch_id,))
        if batch.offset_deletes.num_rows:
            deletes = rows(batch.offset_deletes, OFFSET_KEY_COLUMNS)
            self._copy(tx, "copy_deletes", deletes)
            tx.execute(self._bulk["delete_offsets_staged"])

    def _write_history(
        self, tx: Statements, history: Iterable[tuple[Any, ...]], count: int
    ) -> None:
        if count >= self.copy_threshold:
            self._copy(tx, "copy_history", history)
        else:
            super()._write_history(tx, history, count)

    def _copy(self, cur: Any, statement: str, data: Iterable[tuple[Any, ...]]) -> None:
        with cur.copy(self._bulk[statement]) as copy:
            copy.set_types(self._copy_types[statement])
            for row in data:
                copy.write_row(row)

    def _epoch_lock_key(self, name: str, epoch: int) -> tuple[int, int]:
        """The two-int4 advisory lock of (lease, epoch): a key space apart from
        ``_lock_schema``'s single bigint."""
        lease_key = zlib.crc32(f"{self._schema}.{self._prefix}lease:{name}".encode()) - 2**31
        return lease_key, (epoch + 2**31) % 2**32 - 2**31

    def _lock_epoch(self, tx: Statements, name: str, epoch: int) -> bool:
        """The session advisory lock on ``epoch``, held on this sink's connection: the server
        drops it when the connection dies. Taken once per connection (they nest)."""
        if self._epoch_locks.get((name, epoch)) is self._conn:
            return True
        key = self._epoch_lock_key(name, epoch)
        got = bool(tx.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()[0])
        if got:
            self._epoch_locks[(name, epoch)] = self._conn
        return got

    def _unlock_epoch(self, name: str, epoch: int) -> None:
        with self._lock:
            conn = self._epoch_locks.pop((name, epoch), None)
            if conn is not None and conn is self._conn and not self._lost(conn):
                with contextlib.suppress(psycopg.Error):
                    conn.execute(
                        "SELECT pg_advisory_unlock(%s, %s)", self._epoch_lock_key(name, epoch)
                    )

    def _lock_schema(self, tx: Statements) -> None:
        """A transaction-scoped advisory lock per (schema, prefix): concurrent CREATE … IF NOT
        EXISTS can still collide in the catalog. Then the schema, if one is named."""
        lock_key = zlib.crc32(f"{self._schema}.{self._prefix}".encode()) - 2**31
        tx.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
        # Only a missing schema is created: CREATE SCHEMA needs the CREATE privilege on the
        # database even with IF NOT EXISTS, which a role writing into a given schema lacks
        # (deploy/postgres/roles.sql).
        exists = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
        if self._schema and not tx.execute(exists, (self._schema,)).fetchone():
            tx.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self._schema)))
