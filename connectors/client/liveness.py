"""Whether the job (or the mirror) behind a sink is alive: its heartbeat, read against a clock.

The job and the mirror record a heartbeat in the sink's status row every
:data:`HEARTBEAT_INTERVAL_S` seconds, also when idle. A stored LOADING, STARTING or ACTIVE
counts only while the heartbeat is at most :data:`STALE_AFTER_MS` old (three missed); otherwise
the process is :data:`NOT_RESPONDING`, last seen then. STOPPED stays STOPPED; STARTING is
responding (a request sent now is answered by the first batch). The CLI and ``serve`` decide it
here alone. The heartbeat is the sink's clock, judged with the reader's: clocks that differ
move the threshold by as much.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from connectors.sinks import CoordinatorStatus
from connectors.sinks.values import now_ms

__all__ = [
    "HEARTBEAT_INTERVAL_S",
    "NOT_RESPONDING",
    "RESPONDING",
    "STALE_AFTER_MS",
    "Liveness",
    "duration",
    "liveness",
]

#: How often the job and the mirror record their heartbeat.
HEARTBEAT_INTERVAL_S: Final = 5.0
#: A heartbeat older than this (three intervals) means the process is not responding.
STALE_AFTER_MS: Final = 15_000
#: The stored statuses of a live process: a request sent now is answered (LOADING: reads wait).
RESPONDING: Final = frozenset({"LOADING", "STARTING", "ACTIVE"})
#: The status shown for a LOADING, STARTING or ACTIVE row whose heartbeat is stale or missing.
NOT_RESPONDING: Final = "NOT RESPONDING"


@dataclass(frozen=True, slots=True)
class Liveness:
    """What a status row means now.

    ``status`` is the stored LOADING/STARTING/ACTIVE/STOPPED, or :data:`NOT_RESPONDING`;
    ``stored`` the row's own; ``last_seen_ms`` the last heartbeat (None when none was ever
    recorded) and ``age_ms`` how old it is.
    """

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
    """The row ``status`` judged at ``now`` (epoch ms, default this machine's clock)."""
    now = now_ms() if now is None else now
    seen = status.heartbeat_at_ms
    # A heartbeat "from the future" (the sink's clock ahead of ours) counts as just now.
    age = None if seen is None else max(0, now - seen)
    stored = status.status
    if stored == "STOPPED":
        return Liveness("STOPPED", stored, seen, age)
    fresh = age is not None and age <= stale_after_ms
    return Liveness(stored if fresh else NOT_RESPONDING, stored, seen, age)
