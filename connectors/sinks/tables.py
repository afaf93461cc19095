"""The sink's tables: their names (with the optional prefix) and the coordinator status row.

Every backend creates the same tables — ``consumer_offsets``, ``consumer_groups``,
``coordinator_status`` (one row), ``offset_commit_history``, and for a mirror's sink
``topic_log_end_offsets``, ``source_cluster`` (one row) and ``consumer_group_members``
(consumer-protocol members), and ``topic_log_end_samples`` (log-end offsets over time, for lag
in seconds: ``connectors.sinks.log_end_samples``) — and quotes the names with its
own rules; the status row is read and written through the column lists here, so the backends
agree on its layout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from connectors.sinks.text import original_text
from connectors.sinks.values import (
    BatchProgress,
    CommitHistoryEntry,
    CommittedOffset,
    CoordinatorStatus,
)

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


def committed_from_row(group_id: str, row: Sequence[Any]) -> CommittedOffset:
    """A stored offset of ``group_id`` from an offsets-table row read as (topic, partition,
    committed_offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms)."""
    topic, partition, offset, epoch, metadata, commit_ts, expire_ts = row
    return CommittedOffset(
        group_id,
        original_text(topic),
        partition,
        offset,
        epoch,
        original_text(metadata),
        commit_ts,
        expire_ts,
    )


def history_from_row(row: Sequence[Any]) -> CommitHistoryEntry:
    """A history entry from a row of the history query (``CommitHistoryEntry``'s fields)."""
    group_id, topic, partition, offset, epoch, metadata, commit_ts, batch_id = row
    return CommitHistoryEntry(
        original_text(group_id),
        original_text(topic),
        partition,
        offset,
        epoch,
        original_text(metadata),
        commit_ts,
        batch_id,
    )


# --- the coordinator status row ---------------------------------------------------------------

#: Columns of the status row read by :func:`status_from_row`.
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

#: Columns that ``write_batch`` sets on the status row, bound from :func:`progress_values`.
PROGRESS_COLUMNS: Final = STATUS_COLUMNS[2:13]


#: The key of the status row's ingest-offsets JSON under which tenants' topics are kept.
TENANTS_KEY: Final = "tenants"


def _partition_offsets(offsets: Mapping[int, int]) -> dict[str, int]:
    return {str(int(p)): int(o) for p, o in sorted(offsets.items())}


def encode_ingest_offsets(
    offsets: Mapping[int, int], tenant_offsets: Mapping[str, Mapping[int, int]] | None = None
) -> str:
    """The ingest offsets as the JSON text stored in the status row (partitions sorted): the
    job's ingest topic's partitions at the top, each tenant's topic under ``"tenants"``."""
    data: dict[str, object] = dict(_partition_offsets(offsets))
    if tenant_offsets:
        data[TENANTS_KEY] = {
            topic: _partition_offsets(by_partition)
            for topic, by_partition in sorted(tenant_offsets.items())
        }
    return json.dumps(data)


def decode_ingest_offsets(text: str | None) -> dict[int, int]:
    """The ingest topic's offsets of :func:`encode_ingest_offsets`; no text means no offsets."""
    data = json.loads(text or "{}")
    return {int(p): int(o) for p, o in data.items() if p != TENANTS_KEY}


def decode_tenant_offsets(text: str | None) -> dict[str, dict[int, int]]:
    """The tenants' topics' offsets of :func:`encode_ingest_offsets`."""
    tenants = json.loads(text or "{}").get(TENANTS_KEY, {})
    return {t: {int(p): int(o) for p, o in by_p.items()} for t, by_p in tenants.items()}


def progress_values(progress: BatchProgress, updated_at_ms: int) -> tuple[Any, ...]:
    """The values of :data:`PROGRESS_COLUMNS` for a committed batch, in that order."""
    return (
        progress.batch_id,
        encode_ingest_offsets(progress.ingest_offsets, progress.tenant_offsets),
        progress.input_rows,
        progress.commits_applied,
        progress.rejected,
        progress.tombstones,
        progress.state_keys,
        progress.duration_ms,
        progress.timestamp_ms,
        0,  # skipped_records: every record is stored (connectors.sinks.text)
        updated_at_ms,
    )


def status_from_row(row: Sequence[Any]) -> CoordinatorStatus:
    """Build the status from the row in :data:`STATUS_COLUMNS` order."""
    status, detail, last_batch_id, ingest, input_rows, commits, rejected = row[:7]
    # skipped_records (row[11]) stays in the table's layout; every record is stored now.
    tombstones, state_keys, duration_ms, batch_ts, _, updated_at, heartbeat = row[7:]
    offsets = decode_ingest_offsets(ingest)
    tenant_offsets = decode_tenant_offsets(ingest)
    progress = None
    if last_batch_id >= 0:
        progress = BatchProgress(
            batch_id=last_batch_id,
            ingest_offsets=offsets,
            tenant_offsets=tenant_offsets,
            input_rows=input_rows,
            commits_applied=commits,
            rejected=rejected,
            tombstones=tombstones,
            state_keys=state_keys,
            duration_ms=duration_ms,
            timestamp_ms=batch_ts,
        )
    return CoordinatorStatus(
        status=status,
        detail=detail,
        last_batch_id=last_batch_id,
        ingest_offsets=dict(offsets),
        updated_at_ms=updated_at,
        last_progress=progress,
        heartbeat_at_ms=heartbeat,
        tenant_offsets=tenant_offsets,
    )
