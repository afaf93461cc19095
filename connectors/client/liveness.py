"""Whether the job (or the mirror) behind a sink is alive: the heartbeat of its status row (the
sink's clock) read against this machine's. The CLI and ``serve`` decide it here alone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from connectors.sinks import CoordinatorStatus
from connectors.sinks.values import now_ms

#: How often the job and the mirror record their heartbeat, also when idle.
HEARTBEAT_INTERVAL_S: Final = 5.0
#: A heartbeat older than this (three intervals) means the process is not responding.
STALE_AFTER_MS: Final = 15_000
#: The stored statuses of a live process: a request sent now is answered (LOADING: reads wait).
RESPONDING: Final = frozenset({"LOADING", "STARTING", "ACTIVE"})
#: The status shown for a LOADING, STARTING or ACTIVE row whose heartbeat is stale or missing.
NOT_RESPONDING: Final = "NOT RESPONDING"


@dataclass(frozen=True, slots=True)
class Liveness:
    """What a status row means now: ``status`` the stored one or :data:`NOT_RESPONDING`,
    ``last_seen_ms`` the last heartbeat (None: never) and ``age_ms`` its age."""

    status: str
    stored: str
    last_seen_ms: int | None
    age_ms: int | None

    @property
    def responding(self) -> bool:
        """A live LOADING, STARTING or ACTIVE process: requests sent now are answered."""
        return self.status in RESPONDING

    def describe(self) -> str:
        """One phrase for people: ``ACTIVE``, ``STOPPED``, or ``NOT RESPONDING (last seen
        2026-05-01T12:00:00Z, 42s ago)``."""
        if self.status != NOT_RESPONDING:
            return self.status
        return f"{NOT_RESPONDING} ({self.last_seen()})"

    def last_seen(self) -> str:
        """``last seen <ISO time>, <age> ago``, or that no heartbeat was ever recorded."""
        if self.last_seen_ms is None:
            return "no heartbeat recorded: not started, or a release without heartbeats"
        at = datetime.fromtimestamp(self.last_seen_ms / 1000, UTC)
        stamp = at.isoformat(timespec="seconds").replace("+00:00", "Z")
        return f"last seen {stamp}, {duration(self.age_ms or 0)} ago"


def duration(ms: int) -> str:
    """``ms`` as a person reads it: 45s, 5m12s, 2h03m, 3d04h."""
    s = max(0, ms) // 1000
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def liveness(
    status: CoordinatorStatus,
    now: int | None = None,
    stale_after_ms: int = STALE_AFTER_MS,
) -> Liveness:
    """The row ``status`` judged at ``now`` (epoch ms, default this machine's clock): STOPPED
    stays; LOADING, STARTING or ACTIVE with a heartbeat older than ``stale_after_ms`` (or none)
    is :data:`NOT_RESPONDING`."""
    now = now_ms() if now is None else now
    seen = status.heartbeat_at_ms
    # A heartbeat "from the future" (the sink's clock ahead of ours) counts as just now.
    age = None if seen is None else max(0, now - seen)
    stored = status.status
    if stored == "STOPPED":
        return Liveness("STOPPED", stored, seen, age)
    fresh = age is not None and age <= stale_after_ms
    return Liveness(stored if fresh else NOT_RESPONDING, stored, seen, age)
