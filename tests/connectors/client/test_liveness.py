"""Liveness: a status row judged by its heartbeat's age (pure, no sink)."""

from __future__ import annotations

import pytest

from connectors.client.liveness import NOT_RESPONDING, STALE_AFTER_MS, liveness
from connectors.sinks import CoordinatorStatus

NOW = 1_800_000_000_000


def row(status: str, heartbeat_at_ms: int | None) -> CoordinatorStatus:
    return CoordinatorStatus(
        status=status,  # type: ignore[arg-type]
        detail="",
        last_batch_id=3,
        ingest_offsets={},
        updated_at_ms=NOW - 60_000,
        last_progress=None,
        heartbeat_at_ms=heartbeat_at_ms,
    )


@pytest.mark.parametrize("stored", ["ACTIVE", "STARTING", "LOADING"])
def test_a_fresh_heartbeat_keeps_the_stored_status(stored: str) -> None:
    alive = liveness(row(stored, NOW - STALE_AFTER_MS), now=NOW)
    assert (alive.status, alive.responding, alive.age_ms) == (stored, True, STALE_AFTER_MS)
    assert alive.describe() == stored


@pytest.mark.parametrize("stored", ["ACTIVE", "STARTING", "LOADING"])
def test_a_stale_heartbeat_is_not_responding_with_the_time_last_seen(stored: str) -> None:
    alive = liveness(row(stored, NOW - STALE_AFTER_MS - 1), now=NOW)
    assert (alive.status, alive.stored, alive.responding) == (NOT_RESPONDING, stored, False)
    # 1_800_000_000_000 ms is 2027-01-15T08:00:00Z; 15.001 s earlier, rounded down.
    assert alive.describe() == "NOT RESPONDING (last seen 2027-01-15T07:59:44Z, 15s ago)"


def test_no_heartbeat_ever_is_not_responding() -> None:
    alive = liveness(row("ACTIVE", None), now=NOW)
    assert alive.status == NOT_RESPONDING and alive.last_seen_ms is None
    assert "no heartbeat recorded" in alive.describe()


def test_stopped_stays_stopped_whatever_the_heartbeat() -> None:
    assert liveness(row("STOPPED", NOW), now=NOW).status == "STOPPED"
    assert liveness(row("STOPPED", None), now=NOW).status == "STOPPED"
    assert not liveness(row("STOPPED", NOW), now=NOW).responding


def test_a_heartbeat_ahead_of_this_clock_counts_as_now() -> None:
    alive = liveness(row("ACTIVE", NOW + 5_000), now=NOW)
    assert (alive.status, alive.age_ms) == ("ACTIVE", 0)


def test_long_absences_read_in_minutes_hours_and_days() -> None:
    assert "5m00s ago" in liveness(row("ACTIVE", NOW - 300_000), now=NOW).describe()
    assert "3h00m ago" in liveness(row("ACTIVE", NOW - 3 * 3_600_000), now=NOW).describe()
    assert "2d01h ago" in liveness(row("ACTIVE", NOW - 49 * 3_600_000), now=NOW).describe()
