"""The coordinator status row: status, reset, heartbeat, and the source cluster."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.values import (
    COORDINATOR_STATES,
    BatchProgress,
    CoordinatorState,
    CoordinatorStatus,
    SinkError,
    SourceCluster,
)

log = logging.getLogger(__name__)


class StatusRow(SinkCore):
    """The coordinator status row, the writer's heartbeat and the cluster a mirror holds."""

    def set_status(self, status: CoordinatorState, detail: str = "") -> None:
        """Set the coordinator status row (batch progress is left as it is)."""
        _check_status(status)
        self._check_writable()
        self._run(
            "set_status",
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
            tx.execute(
                self._sql["reset_status"],
                (status, _clean_detail(detail), -1, "{}", self._clock()),
            )
            return True

        self._write(clear, "cannot reset")

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
            tx.execute(self._sql["bind_source"], (1, cluster_id, cluster_name, self._clock()))
            return True

        self._write(bind, "cannot record the source cluster")
        if found and found[0][0] != cluster_id:
            raise SinkError(
                f"{self.url} holds cluster {found[0][0]} ({found[0][1]}), not {cluster_id} "
                f"({cluster_name}): a sink mirrors one cluster; give this one its own sink URL "
                "or table_prefix"
            )

    def source_cluster(self) -> SourceCluster | None:
        """The cluster a mirror's sink holds; None for a job's sink."""
        found = self._run("source_cluster")
        return SourceCluster(*found[0]) if found else None

    def status(self) -> CoordinatorStatus:
        """The coordinator status row."""
        found = self._run("status")
        if not found:
            raise SinkError(f"{self.url}: the coordinator status row is missing")
        return status_from_row(found[0])


def _check_status(status: str) -> None:
    if status not in COORDINATOR_STATES:
        raise ValueError(f"status must be one of {sorted(COORDINATOR_STATES)}, got {status!r}")


def _clean_detail(detail: str) -> str:
    """A status detail with NUL replaced (it is free text; PostgreSQL text cannot hold NUL)."""
    return detail.replace("\x00", "\ufffd")


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
