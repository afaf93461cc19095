"""The coordinator status row: status, reset, heartbeat, and the source cluster."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.statements import CLEARED_ON_RESET
from connectors.sinks.values import (
    COORDINATOR_STATES,
    BatchProgress,
    CoordinatorState,
    CoordinatorStatus,
    SinkError,
    SourceCluster,
)


class StatusRow(SinkCore):
    """The coordinator status row, the writer's heartbeat and the cluster a mirror holds."""

    def set_status(self, status: CoordinatorState, detail: str = "") -> None:
        """Set the coordinator status row (batch progress is left as it is)."""
        params = self._status_params(status, detail)
        self._write_one("set_status", params, f"cannot set status {status}")

    def reset(self, status: CoordinatorState, detail: str = "") -> None:
        """Empty the state's tables and forget the batch progress in one transaction, as a job
        starting a new checkpoint does. History stays, moved below batch id 0 (order kept) so
        the new batch ids neither collide with it nor sort before it."""
        status, detail, now = self._status_params(status, detail)

        def clear(tx: Statements) -> bool:
            lowest, highest = tx.execute(self._sql["history_bounds"]).fetchone()
            if highest is not None and highest >= 0:
                # Every moved row lands below every row there is, so no key collides midway
                # (PostgreSQL checks a unique key row by row).
                tx.execute(self._sql["shift_history"], (highest + 1 + max(0, -lowest),))
            for role in CLEARED_ON_RESET:
                tx.execute(self._sql[f"clear_{role}"])
            tx.execute(self._sql["reset_status"], (status, detail, -1, "{}", now))
            return True

        self._write(clear, "cannot reset")

    def heartbeat(self) -> None:
        """Record that the writer is alive now (the sink's clock), so readers tell a running
        writer from a dead one."""
        self._check_writable()
        self._write_one("heartbeat", (self._clock(),), "cannot record a heartbeat")

    def bind_source_cluster(self, cluster_id: str, cluster_name: str) -> None:
        """Record that this sink mirrors cluster ``cluster_id``; SinkError when it holds another
        (mixing two would merge their groups)."""
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

    def _status_params(self, status: str, detail: str) -> tuple[str, str, int]:
        """(status, detail, now) of a writable sink's status change; NUL in the free-text
        detail replaced (PostgreSQL text cannot hold it)."""
        if status not in COORDINATOR_STATES:
            raise ValueError(f"status must be one of {sorted(COORDINATOR_STATES)}, got {status!r}")
        self._check_writable()
        return status, detail.replace("\x00", "\ufffd"), self._clock()


#: The key of the status row's ingest-offsets JSON under which tenants' topics are kept.
TENANTS_KEY: Final = "tenants"


def _by_partition(offsets: Mapping[int, int]) -> dict[str, int]:
    return {str(int(p)): int(o) for p, o in sorted(offsets.items())}


def progress_values(progress: BatchProgress, at_ms: int) -> tuple[Any, ...]:
    """The values of ``PROGRESS_COLUMNS`` for a batch committed at ``at_ms``; the ingest
    offsets as JSON, each tenant's topic under ``"tenants"``."""
    offsets: dict[str, object] = dict(_by_partition(progress.ingest_offsets))
    if progress.tenant_offsets:
        tenants = sorted(progress.tenant_offsets.items())
        offsets[TENANTS_KEY] = {topic: _by_partition(by) for topic, by in tenants}
    p = progress
    counters = (p.input_rows, p.commits_applied, p.rejected, p.tombstones, p.state_keys)
    # skipped_records stays 0: every record is stored (connectors.sinks.text).
    return (p.batch_id, json.dumps(offsets), *counters, p.duration_ms, p.timestamp_ms, 0, at_ms)


def status_from_row(row: Sequence[Any]) -> CoordinatorStatus:
    """The status from a row in ``STATUS_COLUMNS`` order."""
    status, detail, last_batch_id, ingest = row[:4]
    data = json.loads(ingest or "{}")
    offsets = {int(p): int(o) for p, o in data.items() if p != TENANTS_KEY}
    tenants = data.get(TENANTS_KEY, {})
    tenant_offsets = {t: {int(p): int(o) for p, o in by.items()} for t, by in tenants.items()}
    # row[4:11]: the counters, the duration and the batch's time, in BatchProgress's order.
    progress = BatchProgress(last_batch_id, offsets, tenant_offsets, {}, *row[4:11])
    return CoordinatorStatus(
        status=status,
        detail=detail,
        last_batch_id=last_batch_id,
        ingest_offsets=dict(offsets),
        updated_at_ms=row[12],
        last_progress=progress if last_batch_id >= 0 else None,
        heartbeat_at_ms=row[13],
        tenant_offsets=tenant_offsets,
    )
