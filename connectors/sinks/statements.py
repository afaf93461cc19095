"""Every statement of the sink, said once for both dialects (SQLAlchemy Core).

Statements are compiled once per process and (dialect, prefix, schema) to the SQL text the sink
runs on its own DBAPI connection (sqlite3, psycopg): the hot path executes plain strings, as it
would hand-written SQL. Parameters are positional (``?``, ``%s``); each statement lists its
parameters in the order callers bind them, and compiling checks that order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.engine.interfaces import BindTyping, Dialect
from sqlalchemy.schema import CreateTable
from sqlalchemy.sql.elements import ColumnElement

from connectors.sinks.tables import PARTITION, TableNames, define_tables

#: Columns of the status row, in the order ``status_from_row`` reads them.
STATUS_COLUMNS: Final = (
    "status",
    "detail",
    "last_batch_id",
    "ingest_offsets",
    "input_rows",
    "commits_applied",
    "rejected",
    "tombstones",
    "state_keys",
    "duration_ms",
    "batch_timestamp_ms",
    "skipped_records",
    "updated_at_ms",
    "heartbeat_at_ms",
)
#: Columns that ``write_batch`` sets on the status row.
PROGRESS_COLUMNS: Final = STATUS_COLUMNS[2:13]
#: An offset as OffsetFetch reads it (``committed_from_row``).
OFFSET_VALUE_COLUMNS: Final = (
    "topic",
    PARTITION,
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
    "expire_timestamp_ms",
)
#: A history row as read (``history_from_row``).
HISTORY_READ_COLUMNS: Final = (
    "group_id",
    "topic",
    PARTITION,
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
    "batch_id",
)
#: The filters :meth:`Sink.history` combines, each a key of the compiled statements.
HISTORY_FILTERS: Final = (("group_id",), ("group_id", "topic"), ("group_id", "topic", PARTITION))

#: Whether a table exists (the different catalogs), and its parameters.
_TABLE_EXISTS: Final = {
    "sqlite": ("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :table", "table"),
    "postgresql": (
        "SELECT 1 FROM information_schema.tables"
        " WHERE table_schema = COALESCE(:schema, current_schema()) AND table_name = :table",
        "schema table",
    ),
}
_ONE: Final = sa.literal_column("1")
_ZERO: Final = sa.literal_column("0")


def dialect(name: str) -> Dialect:
    """The compiling dialect of ``name`` ("sqlite" or "postgresql"), with psycopg's ``%s``."""
    if name == "sqlite":
        return sqlite.dialect()
    pg = PGDialect(paramstyle="format")
    # psycopg adapts each Python value itself; SQLAlchemy's "::TYPE" casts would only add noise.
    pg.bind_typing = BindTyping.NONE
    return pg


def compile_sql(statement: Any, on: Dialect, params: str = "") -> str:
    """``statement``'s SQL text; AssertionError unless its parameters are ``params`` (names
    separated by spaces) in that order."""
    compiled = statement.compile(dialect=on)
    found = tuple(getattr(compiled, "positiontup", None) or ())
    if found != tuple(params.split()):
        raise AssertionError(f"statement binds {found}, expected {params!r}: {compiled}")
    return str(compiled)


def _p(name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name)


def upsert(
    insert: Callable[..., Any], table: sa.Table, *keys: str, rows: Any = None, **update: Any
) -> Any:
    """INSERT of every column (one parameter each, in table order, or the columns of ``rows``,
    a SELECT); on a duplicate of ``keys`` an update of ``update`` (column → expression), by
    default every other column set to the inserted value."""
    if rows is None:
        stmt = insert(table).values({c.name: _p(c.name) for c in table.c})
    else:
        stmt = insert(table).from_select([c.name for c in table.c], rows)
    excluded = stmt.excluded
    set_ = update or {c.name: excluded[c.name] for c in table.c if c.name not in keys}
    return stmt.on_conflict_do_update(index_elements=list(keys), set_=set_)


def _in_list(name: str, column: ColumnElement[Any], dialect_name: str) -> ColumnElement[Any]:
    """``column`` is one of the values in parameter ``name``: a list for psycopg (``= ANY``),
    JSON text for SQLite (``json_each``), as the backend's ``_bind_list`` makes it."""
    if dialect_name == "postgresql":
        return column == sa.any_(_p(name))
    values = sa.select(sa.literal_column("value")).select_from(sa.func.json_each(_p(name)))
    return column.in_(values)


def _smaller(a: Any, b: Any) -> Any:
    return sa.case((a < b, a), else_=b)


def _larger(a: Any, b: Any) -> Any:
    return sa.case((a > b, a), else_=b)


def _newest_first(h: Any, *by: Any) -> Any:
    """Row number of a history row among those of ``by``, newest first (log order)."""
    order = (h.c.batch_id.desc(), h.c.seq.desc())
    return sa.func.row_number().over(partition_by=by, order_by=order).label("newest")


@functools.cache
def statements(dialect_name: str, prefix: str, schema: str | None) -> dict[str, str]:
    """Every statement by name, compiled for the dialect and the tables' names."""
    t = define_tables(TableNames(prefix), schema)
    on = dialect(dialect_name)
    return {
        name: compile_sql(stmt, on, params)
        for name, (stmt, params) in _build(t, dialect_name).items()
    }


def _build(t: dict[str, sa.Table], dialect_name: str) -> dict[str, tuple[Any, str]]:
    insert = postgresql.insert if dialect_name == "postgresql" else sqlite.insert
    o, g, st, h, m = t["offsets"], t["groups"], t["status"], t["history"], t["members"]
    le, s, src, c = t["log_end"], t["samples"], t["source"], t["commits"]
    offset_key = (o.c.group_id == _p("group_id"), o.c.topic == _p("topic"))
    sample_key = (s.c.topic == _p("topic"), s.c[PARTITION] == _p("partition"))
    status_row = st.c.id == _ONE
    newest = _newest_first(h, h.c.topic, h.c[PARTITION])
    recent = sa.select(*h.c, newest).where(h.c.group_id == _p("group_id")).subquery("h")
    keys = _newest_first(h, h.c.group_id, h.c.topic, h.c[PARTITION])
    windows = (
        sa.select(h.c.batch_id, h.c.seq, keys)
        .where(_in_list("group_ids", h.c.group_id, dialect_name))
        .subquery("k")
    )
    hh = h.alias("h")
    listed = sa.union(sa.select(o.c.group_id), sa.select(g.c.group_id)).subquery("k")
    counts = sa.select(o.c.group_id, sa.func.count().label("n")).group_by(o.c.group_id).subquery()
    joined = sa.select(m.c.group_id, sa.func.count().label("n")).group_by(m.c.group_id).subquery()
    oldest = sa.select(h.c.batch_id, h.c.seq).where(h.c.commit_timestamp_ms < _p("before"))
    built: dict[str, tuple[Any, str]] = {
        # --- schema and status row
        "create_schema_table": (CreateTable(t["schema"], if_not_exists=True), ""),
        "table_exists": (
            sa.text(_TABLE_EXISTS[dialect_name][0]),
            _TABLE_EXISTS[dialect_name][1],
        ),
        "schema_version": (sa.select(sa.func.max(t["schema"].c.version)), ""),
        "record_schema_version": (
            sa.insert(t["schema"]).values({col.name: _p(col.name) for col in t["schema"].c}),
            "version description applied_at_ms",
        ),
        "insert_status": (
            insert(st)
            .values({col: _p(col) for col in ("id", *STATUS_COLUMNS[:-1])})
            .on_conflict_do_nothing(index_elements=["id"]),
            "id " + " ".join(STATUS_COLUMNS[:-1]),
        ),
        "status": (sa.select(*(st.c[col] for col in STATUS_COLUMNS)).where(status_row), ""),
        "last_batch": (sa.select(st.c.last_batch_id).where(status_row).with_for_update(), ""),
        "progress": (
            sa.update(st).where(status_row).values({col: _p(col) for col in PROGRESS_COLUMNS}),
            " ".join(PROGRESS_COLUMNS),
        ),
        "set_status": (
            sa.update(st)
            .where(status_row)
            .values(status=_p("status"), detail=_p("detail"), updated_at_ms=_p("at")),
            "status detail at",
        ),
        "reset_status": (
            sa.update(st)
            .where(status_row)
            .values(
                status=_p("status"),
                detail=_p("detail"),
                last_batch_id=_p("last_batch_id"),
                ingest_offsets=_p("ingest_offsets"),
                updated_at_ms=_p("at"),
            ),
            "status detail last_batch_id ingest_offsets at",
        ),
        "heartbeat": (
            sa.update(st).where(status_row).values(heartbeat_at_ms=_p("at")),
            "at",
        ),
        "source_cluster": (
            sa.select(src.c.cluster_id, src.c.cluster_name, src.c.updated_at_ms).where(
                src.c.id == _ONE
            ),
            "",
        ),
        "bind_source": (
            upsert(
                insert,
                src,
                "id",
                cluster_name=insert(src).excluded.cluster_name,
                updated_at_ms=insert(src).excluded.updated_at_ms,
            ),
            "id cluster_id cluster_name updated_at_ms",
        ),
        # --- batch writes
        "upsert_offset": (
            upsert(insert, o, "group_id", "topic", PARTITION),
            "group_id topic partition committed_offset leader_epoch metadata"
            " commit_timestamp_ms expire_timestamp_ms batch_id",
        ),
        "delete_offset": (
            sa.delete(o).where(*offset_key, o.c[PARTITION] == _p("partition")),
            "group_id topic partition",
        ),
        "upsert_group": (
            upsert(insert, g, "group_id"),
            "group_id generation members batch_id",
        ),
        "delete_group": (sa.delete(g).where(g.c.group_id == _p("group_id")), "group_id"),
        "insert_history": (
            sa.insert(h).values({col.name: _p(col.name) for col in h.c}),
            "batch_id seq group_id topic partition committed_offset leader_epoch metadata"
            " commit_timestamp_ms",
        ),
        "upsert_member": (
            upsert(insert, m, "group_id", "member_id"),
            "group_id member_id batch_id",
        ),
        "delete_member": (
            sa.delete(m).where(m.c.group_id == _p("group_id"), m.c.member_id == _p("member_id")),
            "group_id member_id",
        ),
        "add_group_commits": (
            upsert(
                insert,
                c,
                "group_id",
                commits=c.c.commits + insert(c).excluded.commits,
                updated_at_ms=insert(c).excluded.updated_at_ms,
            ),
            "group_id commits updated_at_ms",
        ),
        "forget_group_commits": (
            sa.delete(c).where(
                c.c.group_id == _p("group_id"),
                ~sa.exists().where(o.c.group_id == _p("group_id")),
            ),
            "group_id group_id",
        ),
        "history_bounds": (sa.select(sa.func.min(h.c.batch_id), sa.func.max(h.c.batch_id)), ""),
        "shift_history": (sa.update(h).values(batch_id=h.c.batch_id - _p("shift")), "shift"),
        # SQLite's compiler adds a bound OFFSET 0 to every LIMIT; a literal one keeps the
        # parameters the statement's own.
        "purge_history": (
            sa.delete(h).where(
                sa.tuple_(h.c.batch_id, h.c.seq).in_(oldest.limit(_p("limit")).offset(_ZERO))
            ),
            "before limit",
        ),
        # --- reads
        "fetch_group": (
            sa.select(*(o.c[col] for col in OFFSET_VALUE_COLUMNS))
            .where(o.c.group_id == _p("group_id"))
            .order_by(o.c.topic, o.c[PARTITION]),
            "group_id",
        ),
        # A superset of the request (any listed topic with any listed partition) in one index
        # scan; the reader picks the exact pairs.
        "fetch_partitions": (
            sa.select(*(o.c[col] for col in OFFSET_VALUE_COLUMNS)).where(
                o.c.group_id == _p("group_id"),
                _in_list("topics", o.c.topic, dialect_name),
                _in_list("partitions", o.c[PARTITION], dialect_name),
            ),
            "group_id topics partitions",
        ),
        "all_offsets": (
            sa.select(
                o.c.group_id,
                o.c.topic,
                o.c[PARTITION],
                o.c.committed_offset,
                o.c.commit_timestamp_ms,
            ).order_by(o.c.group_id, o.c.topic, o.c[PARTITION]),
            "",
        ),
        "group_exists": (
            sa.select(_ONE).where(
                sa.exists().where(o.c.group_id == _p("group_id"))
                | sa.exists().where(g.c.group_id == _p("group_id"))
            ),
            "group_id group_id",
        ),
        "list_groups": (
            sa.select(
                listed.c.group_id,
                sa.func.coalesce(counts.c.n, _ZERO),
                g.c.generation,
                sa.case(
                    (g.c.group_id.is_(None), sa.null()),
                    else_=sa.func.coalesce(g.c.members, joined.c.n, _ZERO),
                ),
            )
            .select_from(
                listed.outerjoin(counts, counts.c.group_id == listed.c.group_id)
                .outerjoin(g, g.c.group_id == listed.c.group_id)
                .outerjoin(joined, joined.c.group_id == listed.c.group_id)
            )
            .order_by(listed.c.group_id),
            "",
        ),
        "committed_topics": (sa.select(o.c.topic).distinct().order_by(o.c.topic), ""),
        "group_commits": (sa.select(c.c.group_id, c.c.commits), ""),
        **{
            f"count_{role}": (sa.select(sa.func.count()).select_from(table), "")
            for role, table in t.items()
        },
        "recent_history": (
            sa.select(*(recent.c[col] for col in HISTORY_READ_COLUMNS))
            .where(recent.c.newest <= _p("per_partition"))
            .order_by(
                recent.c.topic, recent.c[PARTITION], recent.c.batch_id.desc(), recent.c.seq.desc()
            ),
            "group_id per_partition",
        ),
        # Each partition's newest rows numbered over the key index alone (it holds the primary
        # key), then only those rows read from the table: a fraction of the table lookups.
        "groups_recent_commits": (
            sa.select(
                hh.c.group_id,
                hh.c.topic,
                hh.c[PARTITION],
                hh.c.committed_offset,
                hh.c.commit_timestamp_ms,
            )
            .select_from(
                windows.join(
                    hh, (hh.c.batch_id == windows.c.batch_id) & (hh.c.seq == windows.c.seq)
                )
            )
            .where(windows.c.newest <= _p("per_partition"))
            .order_by(
                hh.c.group_id, hh.c.topic, hh.c[PARTITION], hh.c.batch_id.desc(), hh.c.seq.desc()
            ),
            "group_ids per_partition",
        ),
        # --- log-end offsets and their samples
        "upsert_log_end": (
            upsert(insert, le, "topic", PARTITION),
            "topic partition log_end_offset updated_at_ms",
        ),
        "log_end": (sa.select(*le.c).order_by(le.c.topic, le.c[PARTITION]), ""),
        "clear_log_end": (sa.delete(le), ""),
        "samples": (
            sa.select(*s.c).order_by(s.c.topic, s.c[PARTITION], s.c.log_end_offset),
            "",
        ),
        "samples_since": (
            sa.select(*s.c)
            .where(s.c.last_seen_ms >= _p("since"))
            .order_by(s.c.topic, s.c[PARTITION], s.c.log_end_offset),
            "since",
        ),
        "sample_heads": (
            sa.select(
                s.c.topic,
                s.c[PARTITION],
                sa.func.max(s.c.log_end_offset),
                sa.func.max(s.c.last_seen_ms),
                sa.func.count(),
            ).group_by(s.c.topic, s.c[PARTITION]),
            "",
        ),
        "partition_samples": (
            sa.select(s.c.log_end_offset, s.c.first_seen_ms, s.c.last_seen_ms)
            .where(*sample_key)
            .order_by(s.c.log_end_offset),
            "topic partition",
        ),
        "upsert_sample": (
            upsert(
                insert,
                s,
                "topic",
                PARTITION,
                "log_end_offset",
                first_seen_ms=_smaller(s.c.first_seen_ms, insert(s).excluded.first_seen_ms),
                last_seen_ms=_larger(s.c.last_seen_ms, insert(s).excluded.last_seen_ms),
            ),
            "topic partition log_end_offset first_seen_ms last_seen_ms",
        ),
        "delete_sample": (
            sa.delete(s).where(*sample_key, s.c.log_end_offset == _p("log_end_offset")),
            "topic partition log_end_offset",
        ),
        "delete_partition_samples": (sa.delete(s).where(*sample_key), "topic partition"),
        "clear_offsets": (sa.delete(o), ""),
        "clear_groups": (sa.delete(g), ""),
        "clear_members": (sa.delete(m), ""),
    }
    for filters in HISTORY_FILTERS:
        built["history:" + " ".join(filters)] = (
            sa.select(*(h.c[col] for col in HISTORY_READ_COLUMNS))
            .where(*(h.c[col] == _p(col) for col in filters))
            .order_by(h.c.batch_id.desc(), h.c.seq.desc())
            .limit(_p("limit"))
            .offset(_ZERO),
            " ".join(filters) + " limit",
        )
    return built
