"""Every statement of the sink, said once for both dialects (SQLAlchemy Core), compiled once
per (dialect, prefix, schema) to the SQL text the sink runs on its own DBAPI connection: the hot
path executes plain strings. Parameters are positional, in the order each statement declares.
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

from connectors.sinks.tables import PARTITION, define_tables

#: Columns of the status row, in the order ``status_from_row`` reads them.
STATUS_COLUMNS: Final = (
    *("status", "detail", "last_batch_id", "ingest_offsets", "input_rows", "commits_applied"),
    *("rejected", "tombstones", "state_keys", "duration_ms", "batch_timestamp_ms"),
    *("skipped_records", "updated_at_ms", "heartbeat_at_ms"),
)
#: Columns that ``write_batch`` sets on the status row.
PROGRESS_COLUMNS: Final = STATUS_COLUMNS[2:13]
_COMMIT: Final = ("topic", PARTITION, "committed_offset", "leader_epoch", "metadata")
#: An offset as OffsetFetch reads it (``CommittedOffset`` after the group).
OFFSET_VALUE_COLUMNS: Final = (*_COMMIT, "commit_timestamp_ms", "expire_timestamp_ms")
#: A history row as read (``CommitHistoryEntry``'s fields).
HISTORY_READ_COLUMNS: Final = ("group_id", *_COMMIT, "commit_timestamp_ms", "batch_id")
#: The filters ``Sink.history`` combines, each naming a statement ``history:<filters>``.
HISTORY_FILTERS: Final = (("group_id",), ("group_id", "topic"), ("group_id", "topic", PARTITION))
#: The tables ``Sink.reset`` empties, in order.
CLEARED_ON_RESET: Final = ("offsets", "groups", "log_end", "members")
_TABLE_EXISTS: Final = {
    "sqlite": "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :table",
    "postgresql": "SELECT 1 FROM information_schema.tables"
    " WHERE table_schema = COALESCE(:schema, current_schema()) AND table_name = :table",
}
_ONE: Final = sa.literal_column("1")
_ZERO: Final = sa.literal_column("0")
_EMPTY: Final = sa.literal_column("''")
#: The database's clock in milliseconds since the epoch.
_DB_NOW_MS: Final = {
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    "postgresql": "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS bigint)",
}

Built = tuple[Any, tuple[str, ...]]
_p: Final = sa.bindparam


def dialect(name: str) -> Dialect:
    """The compiling dialect of ``name`` ("sqlite" or "postgresql"), with psycopg's ``%s``."""
    if name == "sqlite":
        return sqlite.dialect()
    pg = PGDialect(paramstyle="format")
    pg.bind_typing = BindTyping.NONE  # psycopg adapts each value; no "::TYPE" casts
    return pg


def compile_sql(statement: Any, on: Dialect, params: tuple[str, ...] = ()) -> str:
    """``statement``'s SQL text; AssertionError unless it binds ``params`` in that order."""
    compiled = statement.compile(dialect=on)
    found = tuple(getattr(compiled, "positiontup", None) or ())
    if found != tuple(params):
        raise AssertionError(f"statement binds {found}, expected {params}: {compiled}")
    return str(compiled)


def _equal(table: Any, *columns: str) -> list[Any]:
    return [table.c[column] == _p(column) for column in columns]


def _delete(table: sa.Table, *key: str) -> Built:
    return sa.delete(table).where(*_equal(table, *key)), key


def _insert(table: sa.Table) -> Built:
    names = tuple(c.name for c in table.c)
    return sa.insert(table).values({name: _p(name) for name in names}), names


def _select(
    table: Any, *columns: str, by: tuple[str, ...] = (), order: tuple[Any, ...] = ()
) -> Built:
    stmt = sa.select(*(table.c[c] for c in columns)).where(*_equal(table, *by))
    return stmt.order_by(*(table.c[c] if isinstance(c, str) else c for c in order)), by


def _set_status(st: sa.Table, *columns: str) -> Built:
    """An UPDATE of the status row's ``columns`` (given in the table's order)."""
    return sa.update(st).where(st.c.id == _ONE).values({c: _p(c) for c in columns}), columns


def upsert(
    insert: Callable[..., Any], table: sa.Table, *keys: str, rows: Any = None, **update: Any
) -> Any:
    """INSERT of every column (one parameter each, in table order, or the columns of ``rows``,
    a SELECT); on a duplicate of ``keys`` an update of ``update`` (column → expression), by
    default every other column set to the inserted value."""
    names = [c.name for c in table.c]
    if rows is None:
        stmt = insert(table).values({name: _p(name) for name in names})
    else:
        stmt = insert(table).from_select(names, rows)
    set_ = update or {name: stmt.excluded[name] for name in names if name not in keys}
    return stmt.on_conflict_do_update(index_elements=list(keys), set_=set_)


def _newest_first(h: Any, *by: Any) -> Any:
    """Row number of a history row among those of ``by``, newest first (log order)."""
    order = (h.c.batch_id.desc(), h.c.seq.desc())
    return sa.func.row_number().over(partition_by=by, order_by=order).label("newest")


@functools.cache
def statements(dialect_name: str, prefix: str, schema: str | None) -> dict[str, str]:
    """Every statement by name, compiled for the dialect and the tables' names."""
    on = dialect(dialect_name)
    built = _build(define_tables(prefix, schema), dialect_name)
    return {name: compile_sql(stmt, on, params) for name, (stmt, params) in built.items()}


def _build(t: dict[str, sa.Table], dialect_name: str) -> dict[str, Built]:
    pg = dialect_name == "postgresql"
    insert = postgresql.insert if pg else sqlite.insert
    least, greatest = (sa.func.least, sa.func.greatest) if pg else (sa.func.min, sa.func.max)

    def upsert_all(table: sa.Table, *keys: str, **update: Any) -> Built:
        return upsert(insert, table, *keys, **update), tuple(c.name for c in table.c)

    def in_list(name: str, column: Any) -> Any:
        """``column`` is one of the values of parameter ``name``: a list for psycopg, JSON
        text for SQLite, as the backend's ``_bind_list`` makes it."""
        if pg:
            return column == sa.any_(_p(name))
        return column.in_(
            sa.select(sa.literal_column("value")).select_from(sa.func.json_each(_p(name)))
        )

    o, g, st, h, m = t["offsets"], t["groups"], t["status"], t["history"], t["members"]
    ls, sb = t["lease"], t["standbys"]
    # Lease times come from the database's clock, so contenders on other hosts (PostgreSQL)
    # agree; SQLite's is the host's (julianday: milliseconds, strftime('%s') has seconds).
    db_now = sa.literal_column(_DB_NOW_MS[dialect_name])
    lease_row = (ls.c.epoch, ls.c.holder, ls.c.renewed_at_ms, ls.c.expires_at_ms, db_now)
    renewed = {"renewed_at_ms": db_now, "expires_at_ms": db_now + _p("ttl_ms")}
    le, s, src, c = t["log_end"], t["samples"], t["source"], t["commits"]
    excluded = {name: insert(table).excluded for name, table in t.items()}
    # What a pass over every group reads of an offset or a commit.
    offset_at = ("group_id", "topic", PARTITION, "committed_offset", "commit_timestamp_ms")
    # History: one group's newest rows per partition; many groups' newest, numbered over the
    # as-of index alone (it holds the primary key) before those rows are read from the table.
    recent = (
        sa.select(*h.c, _newest_first(h, h.c.topic, h.c[PARTITION]))
        .where(h.c.group_id == _p("group_id"))
        .subquery("h")
    )
    windows = (
        sa.select(h.c.batch_id, h.c.seq, _newest_first(h, h.c.group_id, h.c.topic, h.c[PARTITION]))
        .where(in_list("group_ids", h.c.group_id))
        .subquery("k")
    )
    hh = h.alias("h")
    as_of = (
        sa.select(
            *h.c,
            sa.func.row_number()
            .over(
                partition_by=(h.c.topic, h.c[PARTITION]),
                order_by=(h.c.commit_timestamp_ms.desc(), h.c.batch_id.desc(), h.c.seq.desc()),
            )
            .label("newest"),
        )
        .where(h.c.group_id == _p("group_id"), h.c.commit_timestamp_ms <= _p("at"))
        .subquery("h")
    )
    expired = sa.select(h.c.batch_id, h.c.seq).where(h.c.commit_timestamp_ms < _p("before"))
    # Groups with offsets or metadata, their partitions and, for metadata, members.
    listed = sa.union(sa.select(o.c.group_id), sa.select(g.c.group_id)).subquery("k")
    counts = sa.select(o.c.group_id, sa.func.count().label("n")).group_by(o.c.group_id).subquery()
    joined = sa.select(m.c.group_id, sa.func.count().label("n")).group_by(m.c.group_id).subquery()
    members = sa.case(
        (g.c.group_id.is_(None), sa.null()), else_=sa.func.coalesce(g.c.members, joined.c.n, _ZERO)
    )
    built: dict[str, Built] = {
        # --- schema and status row
        "create_schema_table": (CreateTable(t["schema"], if_not_exists=True), ()),
        "table_exists": (
            sa.text(_TABLE_EXISTS[dialect_name]),
            ("schema", "table") if pg else ("table",),
        ),
        "schema_version": (sa.select(sa.func.max(t["schema"].c.version)), ()),
        "record_schema_version": _insert(t["schema"]),
        "insert_status": (
            insert(st)
            .values({col: _p(col) for col in ("id", *STATUS_COLUMNS[:-1])})
            .on_conflict_do_nothing(index_elements=["id"]),
            ("id", *STATUS_COLUMNS[:-1]),
        ),
        "status": (sa.select(*(st.c[col] for col in STATUS_COLUMNS)).where(st.c.id == _ONE), ()),
        "last_batch": (sa.select(st.c.last_batch_id).where(st.c.id == _ONE).with_for_update(), ()),
        "progress": _set_status(st, *PROGRESS_COLUMNS),
        "set_status": _set_status(st, "status", "detail", "updated_at_ms"),
        "reset_status": _set_status(
            st, "status", "detail", "last_batch_id", "ingest_offsets", "updated_at_ms"
        ),
        "heartbeat": _set_status(st, "heartbeat_at_ms"),
        # One row (id 1); bound only to the cluster it holds, if any.
        "source_cluster": _select(src, "cluster_id", "cluster_name", "updated_at_ms"),
        "bind_source": upsert_all(src, "id"),
        # --- the deployment lease (connectors.sinks.lease). FOR KEY SHARE: a write's fencing
        # check holds off a takeover (FOR UPDATE) until the write commits, but not the holder's
        # renewal (an UPDATE of no key column); SQLite: BEGIN IMMEDIATE holds off both.
        "lease": (
            sa.select(*lease_row)
            .where(ls.c.name == _p("name"))
            .with_for_update(read=True, key_share=True),
            ("name",),
        ),
        # Readers' (a read-only PostgreSQL transaction refuses FOR SHARE).
        "read_lease": (sa.select(*lease_row).where(ls.c.name == _p("name")), ("name",)),
        "leases": (sa.select(ls.c.name, *lease_row).order_by(ls.c.name), ()),
        # A contender skips a row locked by the holder's write or renewal (the holder is alive)
        # instead of waiting the write out.
        "lease_for_update": (
            sa.select(*lease_row).where(ls.c.name == _p("name")).with_for_update(skip_locked=True),
            ("name",),
        ),
        "insert_lease": (
            insert(ls)
            .values(name=_p("name"), epoch=_ZERO, holder=_EMPTY)
            .values(renewed_at_ms=_ZERO, expires_at_ms=_ZERO)
            .on_conflict_do_nothing(index_elements=["name"]),
            ("name",),
        ),
        "take_lease": (
            sa.update(ls)
            .where(ls.c.name == _p("name"))
            .values(epoch=_p("epoch"), holder=_p("holder"), **renewed),
            ("epoch", "holder", "ttl_ms", "name"),
        ),
        "renew_lease": (
            sa.update(ls).where(*_equal(ls, "name", "epoch", "holder")).values(**renewed),
            ("ttl_ms", "name", "epoch", "holder"),
        ),
        "release_lease": (
            sa.update(ls)
            .where(*_equal(ls, "name", "epoch", "holder"))
            .values(holder=_EMPTY, expires_at_ms=db_now),
            ("name", "epoch", "holder"),
        ),
        # --- the standbys waiting for a lease; heartbeats in the database's clock too
        "register_standby": (
            insert(sb)
            .values(name=_p("name"), holder=_p("holder"), state=_p("state"))
            .values(heartbeat_at_ms=db_now)
            .on_conflict_do_update(
                index_elements=["name", "holder"],
                set_={"state": excluded["standbys"].state, "heartbeat_at_ms": db_now},
            ),
            ("name", "holder", "state"),
        ),
        "expire_standbys": (
            sa.delete(sb).where(
                sb.c.name == _p("name"), sb.c.heartbeat_at_ms < db_now - _p("max_age_ms")
            ),
            ("name", "max_age_ms"),
        ),
        "drop_standby": _delete(sb, "name", "holder"),
        "standbys": (
            sa.select(sb.c.holder, sb.c.state, sb.c.heartbeat_at_ms, db_now - sb.c.heartbeat_at_ms)
            .where(sb.c.name == _p("name"), sb.c.heartbeat_at_ms >= db_now - _p("fresh_ms"))
            .order_by(sb.c.holder),
            ("name", "fresh_ms"),
        ),
        # --- batch writes
        "upsert_offset": upsert_all(o, "group_id", "topic", PARTITION),
        "delete_offset": _delete(o, "group_id", "topic", PARTITION),
        "upsert_group": upsert_all(g, "group_id"),
        "delete_group": _delete(g, "group_id"),
        "insert_history": _insert(h),
        "upsert_member": upsert_all(m, "group_id", "member_id"),
        "delete_member": _delete(m, "group_id", "member_id"),
        "add_group_commits": upsert_all(
            c,
            "group_id",
            commits=c.c.commits + excluded["commits"].commits,
            updated_at_ms=excluded["commits"].updated_at_ms,
        ),
        "forget_group_commits": (
            sa.delete(c).where(
                c.c.group_id == _p("group_id"), ~sa.exists().where(o.c.group_id == _p("group_id"))
            ),
            ("group_id", "group_id"),
        ),
        "history_bounds": (sa.select(sa.func.min(h.c.batch_id), sa.func.max(h.c.batch_id)), ()),
        "shift_history": (sa.update(h).values(batch_id=h.c.batch_id - _p("shift")), ("shift",)),
        # SQLite's compiler adds a bound OFFSET 0 to a LIMIT; a literal one keeps the
        # parameters the statement's own.
        "purge_history": (
            sa.delete(h).where(
                sa.tuple_(h.c.batch_id, h.c.seq).in_(expired.limit(_p("limit")).offset(_ZERO))
            ),
            ("before", "limit"),
        ),
        # Thinning (``state.commit_history``): rows in [since, before) with a later commit
        # (commit time, then log order) in their bucket of ``spacing`` ms; the bucket's rows
        # are found on the as-of index (key, commit time).
        "thinnable_history": (
            sa.select(h.c.batch_id, h.c.seq, h.c.commit_timestamp_ms)
            .where(
                h.c.commit_timestamp_ms >= _p("since"),
                h.c.commit_timestamp_ms < _p("before"),
                sa.exists().where(
                    hh.c.group_id == h.c.group_id,
                    hh.c.topic == h.c.topic,
                    hh.c[PARTITION] == h.c[PARTITION],
                    hh.c.commit_timestamp_ms >= h.c.commit_timestamp_ms,
                    hh.c.commit_timestamp_ms
                    < h.c.commit_timestamp_ms
                    - h.c.commit_timestamp_ms % _p("spacing")
                    + _p("spacing"),
                    sa.tuple_(hh.c.commit_timestamp_ms, hh.c.batch_id, hh.c.seq)
                    > sa.tuple_(h.c.commit_timestamp_ms, h.c.batch_id, h.c.seq),
                ),
            )
            .order_by(h.c.commit_timestamp_ms)
            .limit(_p("limit"))
            .offset(_ZERO),
            ("since", "before", "spacing", "spacing", "limit"),
        ),
        "delete_history_row": _delete(h, "batch_id", "seq"),
        # Commits applied since a batch: the oldest commit time among them (a catch-up's
        # commits land in ranges thinned already) and the newest batch.
        "history_since_batch": (
            sa.select(sa.func.min(h.c.commit_timestamp_ms), sa.func.max(h.c.batch_id)).where(
                h.c.batch_id > _p("batch_id")
            ),
            ("batch_id",),
        ),
        # --- reads
        "fetch_group": _select(
            o, *OFFSET_VALUE_COLUMNS, by=("group_id",), order=("topic", PARTITION)
        ),
        # A superset of the request (any listed topic with any listed partition) in one index
        # scan; the reader picks the exact pairs.
        "fetch_partitions": (
            sa.select(*(o.c[col] for col in OFFSET_VALUE_COLUMNS)).where(
                o.c.group_id == _p("group_id"),
                in_list("topics", o.c.topic),
                in_list("partitions", o.c[PARTITION]),
            ),
            ("group_id", "topics", "partitions"),
        ),
        "all_offsets": _select(o, *offset_at, order=("group_id", "topic", PARTITION)),
        "group_exists": (
            sa.select(_ONE).where(
                sa.exists().where(o.c.group_id == _p("group_id"))
                | sa.exists().where(g.c.group_id == _p("group_id"))
            ),
            ("group_id", "group_id"),
        ),
        "list_groups": (
            sa.select(
                listed.c.group_id, sa.func.coalesce(counts.c.n, _ZERO), g.c.generation, members
            )
            .select_from(
                listed.outerjoin(counts, counts.c.group_id == listed.c.group_id)
                .outerjoin(g, g.c.group_id == listed.c.group_id)
                .outerjoin(joined, joined.c.group_id == listed.c.group_id)
            )
            .order_by(listed.c.group_id),
            (),
        ),
        "committed_topics": (sa.select(o.c.topic).distinct().order_by(o.c.topic), ()),
        "group_commits": _select(c, "group_id", "commits"),
        **{
            f"count_{role}": (sa.select(sa.func.count()).select_from(tb), ())
            for role, tb in t.items()
        },
        "recent_history": (
            _select(
                recent,
                *HISTORY_READ_COLUMNS,
                order=("topic", PARTITION, recent.c.batch_id.desc(), recent.c.seq.desc()),
            )[0].where(recent.c.newest <= _p("per_partition")),
            ("group_id", "per_partition"),
        ),
        # The commit in force at a time of each partition of a group: its last at or before
        # it (commit time, then log order), read on the as-of index.
        "history_as_of": (
            _select(as_of, *HISTORY_READ_COLUMNS, order=("topic", PARTITION))[0].where(
                as_of.c.newest == _ONE
            ),
            ("group_id", "at"),
        ),
        # The partitions of a group with a commit kept in (after, before): an as-of answer
        # in a thinned bucket is exact when none is (``state.commit_history``).
        "history_partitions_between": (
            sa.select(h.c.topic, h.c[PARTITION])
            .distinct()
            .where(
                h.c.group_id == _p("group_id"),
                h.c.commit_timestamp_ms > _p("after"),
                h.c.commit_timestamp_ms < _p("before"),
            ),
            ("group_id", "after", "before"),
        ),
        "groups_recent_commits": (
            _select(
                hh,
                *offset_at,
                order=("group_id", "topic", PARTITION, hh.c.batch_id.desc(), hh.c.seq.desc()),
            )[0]
            .select_from(
                windows.join(
                    hh, (hh.c.batch_id == windows.c.batch_id) & (hh.c.seq == windows.c.seq)
                )
            )
            .where(windows.c.newest <= _p("per_partition")),
            ("group_ids", "per_partition"),
        ),
        # --- log-end offsets and their samples
        "upsert_log_end": upsert_all(le, "topic", PARTITION),
        "log_end": _select(le, *le.c.keys(), order=("topic", PARTITION)),
        "samples": _select(s, *s.c.keys(), order=("topic", PARTITION, "log_end_offset")),
        "samples_since": (
            _select(s, *s.c.keys(), order=("topic", PARTITION, "log_end_offset"))[0].where(
                s.c.last_seen_ms >= _p("since")
            ),
            ("since",),
        ),
        "sample_heads": (
            sa.select(
                s.c.topic,
                s.c[PARTITION],
                sa.func.max(s.c.log_end_offset),
                sa.func.max(s.c.last_seen_ms),
                sa.func.count(),
            ).group_by(s.c.topic, s.c[PARTITION]),
            (),
        ),
        "partition_samples": _select(
            s,
            "log_end_offset",
            "first_seen_ms",
            "last_seen_ms",
            by=("topic", PARTITION),
            order=("log_end_offset",),
        ),
        # Points merge by offset: the earliest first and the latest last time seen.
        "upsert_sample": upsert_all(
            s,
            "topic",
            PARTITION,
            "log_end_offset",
            first_seen_ms=least(s.c.first_seen_ms, excluded["samples"].first_seen_ms),
            last_seen_ms=greatest(s.c.last_seen_ms, excluded["samples"].last_seen_ms),
        ),
        "delete_sample": _delete(s, "topic", PARTITION, "log_end_offset"),
        "delete_partition_samples": _delete(s, "topic", PARTITION),
        **{f"clear_{role}": (sa.delete(t[role]), ()) for role in CLEARED_ON_RESET},
    }
    for filters in HISTORY_FILTERS:
        stmt, _ = _select(
            h, *HISTORY_READ_COLUMNS, by=filters, order=(h.c.batch_id.desc(), h.c.seq.desc())
        )
        built["history:" + " ".join(filters)] = (
            stmt.limit(_p("limit")).offset(_ZERO),
            (*filters, "limit"),
        )
    return built
