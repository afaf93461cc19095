"""The sink's tables, defined once for both dialects (SQLAlchemy Core): names and columns.

Every sink has the same tables — ``consumer_offsets``, ``consumer_groups``,
``coordinator_status`` (one row), ``offset_commit_history``, ``topic_log_end_offsets``,
``topic_log_end_samples`` (lag in seconds), ``source_cluster`` (one row, a mirror's),
``consumer_group_members``, ``consumer_group_commit_counts`` and ``sink_schema_version`` — named
with the optional prefix (and, in PostgreSQL, schema). Types are PostgreSQL's; SQLite's are its
``INTEGER`` and ``TEXT``. Key columns compare bytes in PostgreSQL (``COLLATE "C"``): faster than
a locale, and listings sort by code point as in SQLite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final, get_args

import sqlalchemy as sa
from sqlalchemy.sql import quoted_name

from connectors.sinks.values import CoordinatorState

_PREFIX_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# PostgreSQL truncates identifiers at 63 bytes; the longest derived name is
# "<prefix>offset_commit_history_key_idx" (30 characters).
_MAX_PREFIX_LEN: Final = 32

#: Table (and index) name by role, before the prefix.
_NAMES: Final = {
    "offsets": "consumer_offsets",
    "groups": "consumer_groups",
    "status": "coordinator_status",
    "history": "offset_commit_history",
    "history_index": "offset_commit_history_key_idx",
    "history_time_index": "offset_commit_history_time_idx",
    "log_end": "topic_log_end_offsets",
    "samples": "topic_log_end_samples",
    "source": "source_cluster",
    "members": "consumer_group_members",
    "schema": "sink_schema_version",
    "commits": "consumer_group_commit_counts",
}

#: Roles that name an index, not a table.
_INDEXES: Final = frozenset({"history_index", "history_time_index"})


def validate_table_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a safe identifier prefix ("" or ^[A-Za-z_][A-Za-z0-9_]*$)."""
    if prefix == "":
        return prefix
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise ValueError(f"table_prefix must match ^[A-Za-z_][A-Za-z0-9_]*$, got {prefix!r}")
    if len(prefix) > _MAX_PREFIX_LEN:
        raise ValueError(f"table_prefix must be at most {_MAX_PREFIX_LEN} characters: {prefix!r}")
    return prefix


@dataclass(frozen=True, slots=True)
class TableNames:
    """Unquoted names of the sink's tables; each backend quotes them with its own rules.

    Raises ValueError for an unsafe ``prefix`` (see :func:`validate_table_prefix`).
    """

    prefix: str = ""
    offsets: str = field(init=False)
    groups: str = field(init=False)
    status: str = field(init=False)
    history: str = field(init=False)
    history_index: str = field(init=False)
    history_time_index: str = field(init=False)
    log_end: str = field(init=False)
    samples: str = field(init=False)
    source: str = field(init=False)
    members: str = field(init=False)
    schema: str = field(init=False)
    commits: str = field(init=False)

    def __post_init__(self) -> None:
        validate_table_prefix(self.prefix)
        for role, name in _NAMES.items():
            object.__setattr__(self, role, f"{self.prefix}{name}")

    def tables(self) -> dict[str, str]:
        """The tables' names by role ("offsets", "groups", "status", "history", "log_end",
        "samples", "source", "members", "schema", "commits")."""
        return {role: getattr(self, role) for role in _NAMES if role not in _INDEXES}


#: Kafka's int64 fields: ``bigint``; SQLite's ``INTEGER`` is 64-bit already.
_BIG: Final = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_SMALL: Final = sa.SmallInteger().with_variant(sa.Integer(), "sqlite")
_KEY: Final = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
#: A keyword in both dialects: always quoted.
PARTITION: Final = quoted_name("partition", quote=True)
#: The states the baseline's status row allowed (schema 5 added STARTING).
STATES_V1: Final = ("LOADING", "ACTIVE", "STOPPED")
#: Most tables are their primary key: SQLite stores them as one B-tree (no rowid).
_NO_ROWID: Final = {"sqlite_with_rowid": False}


def _col(
    name: str, type_: Any, *args: Any, nullable: bool = False, primary_key: bool = False
) -> sa.Column[Any]:
    return sa.Column(
        name, type_, *args, nullable=nullable, primary_key=primary_key, autoincrement=False
    )


def _commit_columns() -> list[sa.Column[Any]]:
    """The columns of an applied commit, shared by the offsets and the history table."""
    return [
        _col("group_id", _KEY),
        _col("topic", _KEY),
        _col(PARTITION, sa.Integer),
        _col("committed_offset", _BIG),
        _col("leader_epoch", sa.Integer),
        _col("metadata", sa.Text),
        _col("commit_timestamp_ms", _BIG),
    ]


def _one_row_id() -> sa.Column[Any]:
    return _col("id", _SMALL, sa.CheckConstraint("id = 1"), primary_key=True)


def status_table(
    metadata: sa.MetaData,
    name: str,
    states: tuple[str, ...] = get_args(CoordinatorState),
    heartbeat: bool = True,
) -> sa.Table:
    """The coordinator status row's table, allowing ``states``; with ``heartbeat_at_ms``
    unless it is the baseline's (schema 1)."""
    allowed = ", ".join(f"'{state}'" for state in states)
    counters = ("input_rows", "commits_applied", "rejected", "tombstones", "state_keys")
    return sa.Table(
        name,
        metadata,
        _one_row_id(),
        _col("status", sa.Text, sa.CheckConstraint(f"status IN ({allowed})")),
        _col("detail", sa.Text),
        _col("last_batch_id", _BIG),
        _col("ingest_offsets", sa.Text),
        *(_col(counter, _BIG) for counter in counters),
        _col("duration_ms", _BIG),
        _col("batch_timestamp_ms", _BIG, nullable=True),
        _col("skipped_records", _BIG),
        _col("updated_at_ms", _BIG),
        *([_col("heartbeat_at_ms", _BIG, nullable=True)] if heartbeat else []),
    )


def define_tables(names: TableNames, schema: str | None = None) -> dict[str, sa.Table]:
    """The sink's tables by role (``TableNames.tables``' roles), as this release has them."""
    md = sa.MetaData(schema=schema)
    history = sa.Table(
        names.history,
        md,
        _col("batch_id", _BIG),
        _col("seq", _BIG),
        *_commit_columns(),
        sa.PrimaryKeyConstraint("batch_id", "seq"),
        **_NO_ROWID,
    )
    sa.Index(names.history_index, "group_id", "topic", PARTITION, "batch_id", _table=history)
    sa.Index(names.history_time_index, "commit_timestamp_ms", _table=history)
    return {
        "offsets": sa.Table(
            names.offsets,
            md,
            *_commit_columns(),
            _col("expire_timestamp_ms", _BIG, nullable=True),
            _col("batch_id", _BIG),
            sa.PrimaryKeyConstraint("group_id", "topic", PARTITION),
            # Offsets are rewritten far more often than inserted: 30% of each page kept free
            # lets an update stay on its page (HOT) and skip a new primary-key entry.
            postgresql_with={"fillfactor": 70},
            **_NO_ROWID,
        ),
        "groups": sa.Table(
            names.groups,
            md,
            _col("group_id", _KEY, primary_key=True),
            _col("generation", sa.Integer, nullable=True),
            _col("members", sa.Integer, nullable=True),
            _col("batch_id", _BIG),
            **_NO_ROWID,
        ),
        "status": status_table(md, names.status),
        "history": history,
        "log_end": sa.Table(
            names.log_end,
            md,
            _col("topic", _KEY),
            _col(PARTITION, sa.Integer),
            _col("log_end_offset", _BIG),
            _col("updated_at_ms", _BIG),
            sa.PrimaryKeyConstraint("topic", PARTITION),
            **_NO_ROWID,
        ),
        "samples": sa.Table(
            names.samples,
            md,
            _col("topic", sa.Text),  # schema 3 created it without COLLATE "C"
            _col(PARTITION, sa.Integer),
            _col("log_end_offset", _BIG),
            _col("first_seen_ms", _BIG),
            _col("last_seen_ms", _BIG),
            sa.PrimaryKeyConstraint("topic", PARTITION, "log_end_offset"),
            **_NO_ROWID,
        ),
        "source": sa.Table(
            names.source,
            md,
            _one_row_id(),
            _col("cluster_id", sa.Text),
            _col("cluster_name", sa.Text),
            _col("updated_at_ms", _BIG),
        ),
        "members": sa.Table(
            names.members,
            md,
            _col("group_id", _KEY),
            _col("member_id", _KEY),
            _col("batch_id", _BIG),
            sa.PrimaryKeyConstraint("group_id", "member_id"),
            **_NO_ROWID,
        ),
        "schema": sa.Table(
            names.schema,
            md,
            _col("version", sa.Integer, primary_key=True),
            _col("description", sa.Text),
            _col("applied_at_ms", _BIG),
        ),
        "commits": sa.Table(
            names.commits,
            md,
            _col("group_id", _KEY, primary_key=True),
            _col("commits", _BIG),
            _col("updated_at_ms", _BIG),
            **_NO_ROWID,
        ),
    }
