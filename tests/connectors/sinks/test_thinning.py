"""History thinning on every backend against its pure model (``state.commit_history``): a
simulated week of random commits on a clock the test moves, thinning passes as it goes (a
catch-up's late commits among them), then for random (group-partition, time) the sink's as-of
answer is the model's, and the rows per group-partition stay under the bound."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from connectors.client.as_of import committed_as_of
from connectors.sinks import Sink
from connectors.sinks.retention import (
    KEEP_FOREVER,
    HistoryRetention,
    ThinningMarks,
    purge_expired_history,
    thin_history,
)
from state.commit_history import (
    DAY,
    DEFAULT_HISTORY_RETENTION_MS,
    HOUR,
    MINUTE,
    SECOND,
    TIERS,
    Commit,
    exact_as_of,
    expected_as_of,
    last_at_or_before,
    rows_bound,
    thin,
    thinned_before,
)
from tests.connectors.sinks.backends import Backend
from tests.connectors.sinks.record_frames import commit, frame, progress

#: A Monday 00:00 UTC, in ms.
T0 = 1_799_712_000_000
KEYS = (("g1", "t", 0), ("g1", "t", 1), ("g2", "u", 0))


def _commit_times(rng: random.Random, start: int, end: int) -> list[int]:
    """One group-partition's commit times: sessions committing every 0.3 s to 20 min, gaps
    between them of up to a day."""
    times: list[int] = []
    at = start + rng.randrange(HOUR)
    while at < end:
        interval = rng.choice((300, 900, 5 * SECOND, 5 * SECOND, MINUTE, 20 * MINUTE))
        for _ in range(rng.randrange(1, 60)):
            at += max(1, int(rng.expovariate(1 / interval)))
            if at >= end:
                break
            times.append(at)
        at += rng.choice((MINUTE, HOUR, 6 * HOUR, DAY))
    return times


def _simulate_week(
    sink: Sink, rng: random.Random
) -> tuple[dict[tuple[str, str, int], list[Commit]], int]:
    """A week of commits written a batch per simulated 10 minutes, a thinning pass every
    simulated 3 hours; two hours of g2's commits on the last day reach the sink 5 hours
    late (a catch-up). Every commit as the model sees it, and the last pass's time."""
    end = T0 + 7 * DAY + HOUR
    # Late into the 10-minute tier, where they still are at the end.
    late = (T0 + 6 * DAY + 6 * HOUR, T0 + 6 * DAY + 8 * HOUR)
    events = sorted((at, key) for key in KEYS for at in _commit_times(rng, T0 - HOUR, end - MINUTE))
    # g2 commits every ~20 s through the late window, whatever its random sessions did.
    events = sorted(
        events + [(late[0] + i * 20 * SECOND + rng.randrange(SECOND), KEYS[2]) for i in range(360)]
    )
    model: dict[tuple[str, str, int], list[Commit]] = {key: [] for key in KEYS}
    marks = ThinningMarks()
    batch, offset, pending = 0, 0, list(events)
    held: list[tuple[int, tuple[str, str, int]]] = []
    clock = T0
    last_pass = clock
    while clock <= end:
        due = [e for e in pending if e[0] < clock]
        pending = pending[len(due) :]
        held += [e for e in due if e[1][0] == "g2" and late[0] <= e[0] < late[1]]
        due = [e for e in due if not (e[1][0] == "g2" and late[0] <= e[0] < late[1])]
        if clock >= late[1] + 5 * HOUR:
            due, held = sorted(due + held), []
        records = []
        for at, key in due:
            offset += 1
            records.append(commit(*key, offset, commit_timestamp_ms=at))
            model[key].append(Commit(at, batch, len(records) - 1, offset))
        if records:
            assert sink.write_batch(batch, frame(*records), progress(batch))
            batch += 1
        if (clock - T0) % (3 * HOUR) == 0 or clock + 10 * MINUTE > end:
            assert thin_history(sink, clock, marks, chunk_rows=50, pause_s=0).complete
            last_pass = clock
        clock += 10 * MINUTE
    assert not held and not pending
    return model, last_pass


def test_as_of_answers_are_the_models_and_rows_stay_bounded(
    make_sink: Callable[..., Sink], backend: Backend
) -> None:
    if backend.options:
        pytest.skip("COPY changes how batches are written, not how history is thinned or read")
    rng = random.Random(58)
    sink = make_sink(keep_history=True)
    model, now = _simulate_week(sink, rng)
    retention_cutoff = now - DEFAULT_HISTORY_RETENTION_MS
    purge_expired_history(sink, DEFAULT_HISTORY_RETENTION_MS, now, pause_s=0)

    kept = {key: sink.history(*key, limit=100_000) for key in KEYS}
    for key, rows in kept.items():
        # Exactly the commits the model keeps, late ones (g2's catch-up) thinned as well.
        model_kept = [
            c.offset for c in thin(model[key], now) if c.commit_timestamp_ms >= retention_cutoff
        ]
        assert sorted(e.offset for e in rows) == model_kept, key
        assert 0 < len(rows) <= rows_bound(), key
        assert len(rows) < len(model[key]) / 3, key  # thinned, not just purged
    fine = thinned_before(TIERS[0], now)
    samples = [rng.randrange(now - 7 * DAY - HOUR, now) for _ in range(300)]
    samples += [rng.randrange(fine - 15 * MINUTE, now) for _ in range(100)]
    samples += [c.commit_timestamp_ms + d for c in model[KEYS[0]][-40:] for d in (-1, 0, 1)]
    inexact = 0
    for at in samples:
        answers = {
            ("g1" if a.topic == "t" else "g2", a.topic, a.partition): a
            for g in ("g1", "g2")
            for a in committed_as_of(sink, g, at, now)
        }
        for key in KEYS:
            expected = expected_as_of(model[key], at, now)
            if expected is not None and expected.commit_timestamp_ms < retention_cutoff:
                expected = None
            found = answers.get(key)
            assert (found and found.offset) == (expected and expected.offset), (key, at)
            if expected is None or found is None:
                continue
            # Never later than the time asked, and exact as far as said: the last commit at
            # or before the time, or before the time it is exact as of.
            assert found.commit_timestamp_ms <= at
            truth = last_at_or_before(model[key], at)
            assert truth is not None
            inexact += found.offset != truth.offset
            if found.exact or exact_as_of(at, now) == at:
                assert found.offset == truth.offset, (key, at)
            else:
                assert found.exact_as_of_ms == exact_as_of(at, now)
                exact_then = last_at_or_before(model[key], found.exact_as_of_ms)
                assert exact_then is not None and found.offset == exact_then.offset
    assert inexact  # the approximation was exercised, not only exact answers


def test_a_pass_repeated_deletes_nothing_more(make_sink: Callable[..., Sink]) -> None:
    sink = make_sink(keep_history=True)
    records = [commit("g", "t", 0, i, commit_timestamp_ms=T0 + i * 200) for i in range(50)]
    assert sink.write_batch(0, frame(*records), progress(0))
    marks = ThinningMarks()
    now = T0 + 20 * SECOND
    first = thin_history(sink, now, marks, chunk_rows=7, pause_s=0)
    # 10 s of commits, 5 a second: the last of each second stays.
    assert first.deleted == 40
    assert [e.offset for e in sink.history("g", limit=100)] == list(range(49, 0, -5))
    assert thin_history(sink, now, marks, pause_s=0).deleted == 0
    assert thin_history(sink, now, ThinningMarks(), pause_s=0).deleted == 0


def test_the_retention_thread_thins_even_when_keeping_history_forever(
    make_sink: Callable[..., Sink],
) -> None:
    sink = make_sink(keep_history=True)
    records = [commit("g", "t", 0, i, commit_timestamp_ms=T0 + i * 250) for i in range(12)]
    assert sink.write_batch(0, frame(*records), progress(0))
    retention = HistoryRetention(
        lambda: make_sink(keep_history=True), KEEP_FOREVER, 50, clock=lambda: T0 + 10 * SECOND
    )
    retention.start()
    try:
        deadline = time.monotonic() + 20
        while len(sink.history("g")) != 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [e.offset for e in sink.history("g")] == [11, 7, 3]
    finally:
        retention.stop()
