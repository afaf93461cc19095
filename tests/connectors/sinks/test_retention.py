"""History retention on every backend: rows past the limit go, the newest stay, in chunks, and
Burrow's evaluation of what is left is the same as before."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from connectors.sinks import Sink, SinkError, open_sink
from connectors.sinks.retention import (
    KEEP_FOREVER,
    HistoryRetention,
    check_history_retention,
    purge_expired_history,
)
from streaming.serve.evaluation import ConsumerOffset, Status, partition_status
from tests.connectors.sinks.record_frames import commit, frame, progress

SECOND = 1000
#: Commits of each partition: one per second for 40 seconds, from T0.
T0 = 1_800_000_000_000
LOG_END = 10_000


def _fill(sink: Sink, patterns: dict[int, Callable[[int], int]], seconds: int = 40) -> None:
    """One batch per second; partition p commits ``patterns[p](second)``."""
    for second in range(seconds):
        records = [
            commit("g", "t", p, offset(second), commit_timestamp_ms=T0 + second * SECOND)
            for p, offset in patterns.items()
        ]
        assert sink.write_batch(second, frame(*records), progress(second))


def _statuses(sink: Sink, now: int) -> dict[int, tuple[Status, list[int]]]:
    windows = sink.recent_history("g", 10)
    found = {}
    for tp, entries in windows.items():
        window = [
            ConsumerOffset(
                h.offset, h.commit_timestamp_ms, h.commit_timestamp_ms, LOG_END - h.offset
            )
            for h in reversed(entries)
        ]
        status = partition_status(
            tp.topic, tp.partition, window, LOG_END - window[-1].offset, [LOG_END] * 10, now
        )
        found[tp.partition] = (status.status, [c.offset for c in window])
    return found


PATTERNS: dict[int, Callable[[int], int]] = {
    0: lambda s: 100 * s,  # progressing
    1: lambda s: 500,  # no progress under lag: STALL
    2: lambda s: 100 * s if s < 35 else 10,  # went back: REWIND
    3: lambda s: 50 * s,  # lag never falls: WARN
}


def test_rows_past_the_limit_go_and_the_newest_stay(make_sink: Callable[..., Sink]) -> None:
    sink = make_sink(keep_history=True)
    _fill(sink, PATTERNS)
    now = T0 + 40 * SECOND
    before = _statuses(sink, now)
    assert {p: s for p, (s, _) in before.items()}[1] != Status.OK  # the cases are not all OK

    # Keep 15 s of history: commits of seconds 25..39 stay (15 per partition, Burrow needs 10).
    result = purge_expired_history(sink, 15 * SECOND, now, chunk_rows=7, pause_s=0)
    assert result.complete
    assert result.deleted == 25 * len(PATTERNS)
    for partition in PATTERNS:
        kept = sink.history("g", "t", partition, limit=1000)
        assert [h.commit_timestamp_ms for h in kept] == [T0 + s * SECOND for s in range(39, 24, -1)]
    assert _statuses(sink, now) == before
    # The offsets themselves are not history: untouched.
    assert {o.partition: o.offset for o in sink.fetch_offsets("g")} == {
        p: offset(39) for p, offset in PATTERNS.items()
    }
    # Nothing more to delete: a second run deletes nothing.
    assert purge_expired_history(sink, 15 * SECOND, now).deleted == 0


def test_a_run_stops_at_its_budget_and_the_next_goes_on(make_sink: Callable[..., Sink]) -> None:
    sink = make_sink(keep_history=True)
    _fill(sink, {0: lambda s: s}, seconds=30)
    now = T0 + 30 * SECOND
    first = purge_expired_history(sink, 5 * SECOND, now, chunk_rows=2, pause_s=0, budget_s=0)
    assert (first.deleted, first.complete) == (2, False)
    rest = purge_expired_history(sink, 5 * SECOND, now, chunk_rows=2, pause_s=0)
    assert (first.deleted + rest.deleted, rest.complete) == (25, True)
    assert len(sink.history("g", limit=1000)) == 5


def test_keep_forever_deletes_nothing(make_sink: Callable[..., Sink]) -> None:
    sink = make_sink(keep_history=True)
    _fill(sink, {0: lambda s: s}, seconds=5)
    assert purge_expired_history(sink, KEEP_FOREVER, T0 * 10).deleted == 0
    assert len(sink.history("g", limit=1000)) == 5


def test_the_thread_purges_on_its_interval_with_its_own_connection(
    make_sink: Callable[..., Sink],
) -> None:
    sink = make_sink(keep_history=True)
    clock = [T0 + 40 * SECOND]
    retention = HistoryRetention(
        lambda: make_sink(keep_history=True), 20 * SECOND, 50, clock=lambda: clock[0]
    )
    retention.start()
    try:
        _fill(sink, {0: lambda s: s}, seconds=40)  # batches go on while it purges
        deadline = time.monotonic() + 20
        while len(sink.history("g", limit=1000)) != 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [h.offset for h in sink.history("g", limit=1000)] == list(range(39, 19, -1))
        clock[0] += 10 * SECOND  # time passes: ten more seconds expire
        deadline = time.monotonic() + 20
        while len(sink.history("g", limit=1000)) != 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [h.offset for h in sink.history("g", limit=1000)] == list(range(39, 29, -1))
    finally:
        retention.stop()
    assert not retention.is_alive()


def test_an_unreachable_sink_is_retried_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    attempts = threading.Semaphore(0)

    def unreachable() -> Sink:
        attempts.release()
        raise SinkError("cannot connect to sink postgresql://db/x: connection refused")

    retention = HistoryRetention(unreachable, 1000, 20)
    retention.start()
    try:
        for _ in range(3):
            assert attempts.acquire(timeout=10)
    finally:
        retention.stop()
    warnings = [r for r in caplog.records if "history retention" in r.getMessage()]
    assert len(warnings) == 1  # one line per outage, not one per attempt


@pytest.mark.parametrize(
    ("retention_ms", "interval_ms", "message"),
    [
        (0, 1000, "history_retention_ms must be > 0 or -1"),
        (-2, 1000, "history_retention_ms must be > 0 or -1"),
        (1000, 0, "history_retention_check_interval_ms must be > 0"),
    ],
)
def test_bad_settings_name_the_field(retention_ms: int, interval_ms: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_history_retention(retention_ms, interval_ms)


def test_history_survives_new_checkpoints_and_stays_in_order(
    make_sink: Callable[..., Sink],
) -> None:
    """A new checkpoint restarts batch ids at 0 (``Sink.reset``): old history keeps its order
    below the new batches instead of colliding with them."""
    sink = make_sink(keep_history=True)
    offset = 0
    for _ in range(3):  # three checkpoints, two batches each
        for batch_id in range(2):
            offset += 1
            assert sink.write_batch(
                batch_id, frame(commit("g", "t", 0, offset)), progress(batch_id)
            )
        sink.reset("ACTIVE", "new state")
    assert [h.offset for h in sink.history("g", limit=100)] == [6, 5, 4, 3, 2, 1]
    assert [h.offset for h in sink.recent_history("g", 3)[("t", 0)]] == [6, 5, 4]


def test_a_sqlite_file_gives_purged_pages_back(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    sink = open_sink(f"sqlite:///{path}", keep_history=True)
    try:
        rows = [commit("g", "t", p, p, metadata="m" * 200) for p in range(20_000)]
        assert sink.write_batch(0, frame(*rows), progress(0))
        sink.purge_history(T0, 100)  # a checkpoint of the WAL into the file happens meanwhile
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        full = path.stat().st_size
        assert purge_expired_history(sink, SECOND, T0, chunk_rows=5_000, pause_s=0).deleted
        for _ in range(5):
            sink.reclaim_space()
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert path.stat().st_size < full / 2
    finally:
        sink.close()
