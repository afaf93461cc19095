"""The sink's tables, defined once for both dialects (SQLAlchemy Core), named with the optional
prefix (and PostgreSQL schema). Key columns compare bytes in PostgreSQL (``COLLATE "C"``): faster
than a locale, and listings sort by code point as in SQLite."""

from __future__ import annotations

import functools
import re
from typing import Any, Final, get_args

import sqlalchemy as sa
from sqlalchemy.sql import quoted_name

from connectors.sinks.values import CoordinatorState, StandbyState

_PREFIX_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# PostgreSQL truncates identifiers at 63 bytes; the longest derived name is
# "<prefix>offset_commit_history_key_idx" (30 characters).
_MAX_PREFIX_LEN: Final = 32
#: The history's indexes, before the prefix: by key then batch (schema 1, dropped by schema 8:
#: each key-led index costs a batch a page write per group-partition it commits), by commit
#: time (schema 2) and by key then commit time (schema 7: the as-of reads, thinning's bucket
#: lookups and every per-group read).
HISTORY_KEY_INDEX: Final = "offset_commit_history_key_idx"
HISTORY_TIME_INDEX: Final = "offset_commit_history_time_idx"
HISTORY_AS_OF_INDEX: Final = "offset_commit_history_asof_idx"


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


def _quoted(values: Any) -> str:
    """The values of a ``Literal`` type as an SQL list: ``'A', 'B'``."""
    return ", ".join(f"'{value}'" for value in get_args(values))


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


@functools.cache
def define_tables(prefix: str, schema: str | None = None) -> dict[str, sa.Table]:
    """The sink's tables by role, as this release has them; ValueError for an unsafe prefix."""
    if prefix and (not _PREFIX_RE.match(prefix) or len(prefix) > _MAX_PREFIX_LEN):
        raise ValueError(
            f"table_prefix must match ^[A-Za-z_][A-Za-z0-9_]*$ and have at most"
            f" {_MAX_PREFIX_LEN} characters, got {prefix!r}"
        )
    md = sa.MetaData(schema=schema)
    history = sa.Table(
        prefix + "offset_commit_history",
        md,
        _col("batch_id", _BIG),
        _col("seq", _BIG),
        *_commit_columns(),
        sa.PrimaryKeyConstraint("batch_id", "seq"),
        **_NO_ROWID,
    )
    sa.Index(prefix + HISTORY_TIME_INDEX, "commit_timestamp_ms", _table=history)
    sa.Index(
        prefix + HISTORY_AS_OF_INDEX,
        "group_id",
        "topic",
        PARTITION,
        "commit_timestamp_ms",
        _table=history,
    )
    return {
        "offsets": sa.Table(
            prefix + "consumer_offsets",
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
            prefix + "consumer_groups",
            md,
            _col("group_id", _KEY, primary_key=True),
            _col("generation", sa.Integer, nullable=True),
            _col("members", sa.Integer, nullable=True),
            _col("batch_id", _BIG),
            **_NO_ROWID,
        ),
        "status": status_table(md, prefix + "coordinator_status"),
        "history": history,
        "log_end": sa.Table(
            prefix + "topic_log_end_offsets",
            md,
            _col("topic", _KEY),
            _col(PARTITION, sa.Integer),
            _col("log_end_offset", _BIG),
            _col("updated_at_ms", _BIG),
            sa.PrimaryKeyConstraint("topic", PARTITION),
            **_NO_ROWID,
        ),
        "samples": sa.Table(
            prefix + "topic_log_end_samples",
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
            prefix + "source_cluster",
            md,
            _one_row_id(),
            _col("cluster_id", sa.Text),
            _col("cluster_name", sa.Text),
            _col("updated_at_ms", _BIG),
        ),
        "members": sa.Table(
            prefix + "consumer_group_members",
            md,
            _col("group_id", _KEY),
            _col("member_id", _KEY),
            _col("batch_id", _BIG),
            sa.PrimaryKeyConstraint("group_id", "member_id"),
            **_NO_ROWID,
        ),
        "schema": sa.Table(
            prefix + "sink_schema_version",
            md,
            _col("version", sa.Integer, primary_key=True),
            _col("description", sa.Text),
            _col("applied_at_ms", _BIG),
        ),
        "commits": sa.Table(
            prefix + "consumer_group_commit_counts",
            md,
            _col("group_id", _KEY, primary_key=True),
            _col("commits", _BIG),
            _col("updated_at_ms", _BIG),
            **_NO_ROWID,
        ),
        # One row per deployment: the job (or mirror) that may write (``connectors.sinks.lease``).
        "lease": sa.Table(
            prefix + "deployment_lease",
            md,
            _col("name", _KEY, primary_key=True),
            _col("epoch", _BIG),
            _col("holder", sa.Text),
            _col("renewed_at_ms", _BIG),
            _col("expires_at_ms", _BIG),
            **_NO_ROWID,
        ),
        # The processes waiting to take a deployment's lease over (``Sink.register_standby``).
        "standbys": sa.Table(
            prefix + "deployment_standbys",
            md,
            _col("name", _KEY),
            _col("holder", _KEY),
            _col("state", sa.Text, sa.CheckConstraint(f"state IN ({_quoted(StandbyState)})")),
            _col("heartbeat_at_ms", _BIG),
            sa.PrimaryKeyConstraint("name", "holder"),
            **_NO_ROWID,
        ),
    }
