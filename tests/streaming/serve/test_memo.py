"""The cache of what every group's pages read (``streaming.serve.memo``): a value is made once
per interval however many read it, made again when its key changes, served stale only while
the next is made and never past ``max_age_s + stale_s``; and over a real sink, a commit shows in
``/metrics`` within that bound (two log-end intervals) and in every scrape after it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from connectors.sinks import BatchProgress, open_sink
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from streaming.serve.memo import Memo
from tests.connectors.sinks.record_frames import commit, frame


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_made_once_per_interval_and_again_when_the_key_changes() -> None:
    clock, key, made = Clock(), [0], []
    memo = Memo(lambda: made.append(clock.now) or len(made), 10.0, key=lambda: key[0], clock=clock)
    assert [memo.get(), memo.get()] == [1, 1]
    clock.now += 9.9
    assert memo.get() == 1
    clock.now += 0.1  # 10 s old: made again
    assert memo.get() == 2
    key[0] += 1  # a log-end refresh
    assert memo.get() == 3
    assert made == [100.0, 110.0, 110.0]


def test_served_stale_only_while_the_next_is_made_and_never_past_the_bound() -> None:
    clock, release, calls = Clock(), threading.Event(), []

    def make() -> int:
        calls.append(clock.now)
        if len(calls) > 1:
            release.wait(10)
        return len(calls)

    memo = Memo(make, 10.0, stale_s=10.0, clock=clock)
    assert memo.get() == 1
    clock.now += 15  # stale: the old value at once, the next one made by a thread
    assert memo.get() == 1
    assert memo.get() == 1  # one remake at a time
    release.set()
    memo.join()
    assert memo.get() == 2 and len(calls) == 2
    clock.now += 25  # past max_age + stale: the reader waits for a new value
    assert memo.get() == 3


def test_a_failed_remake_is_retried_and_past_the_bound_raised() -> None:
    clock, fail = Clock(), [False]

    def make() -> float:
        if fail[0]:
            raise RuntimeError("sink down")
        return clock.now

    memo = Memo(make, 10.0, stale_s=10.0, clock=clock)
    assert memo.get() == 100.0
    fail[0] = True
    clock.now += 12
    assert memo.get() == 100.0  # stale, within the bound; the thread's remake fails
    memo.join()
    clock.now += 9  # 21 s old: past the bound, made by the reader, who sees the error
    try:
        memo.get()
        raise AssertionError("a value past the bound was served")
    except RuntimeError:
        pass
    fail[0] = False
    assert memo.get() == 121.0


def _lag(text: str, group: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if (
                s.name == "kafka_consumergroup_current_offset"
                and s.labels["consumergroup"] == group
            ):
                return s.value
    return None


def test_a_commit_shows_in_metrics_within_two_log_end_intervals(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    interval = 1.0
    with open_sink(url) as sink:
        sink.reset("ACTIVE", "test")
        sink.write_batch(0, frame(commit("g", "t", 0, 5)), BatchProgress(batch_id=0))
        app = create_app(ServeSettings(sink_url=url, log_end_interval_s=interval))
        with TestClient(app) as client:
            assert _lag(client.get("/metrics").text, "g") == 5
            sink.write_batch(1, frame(commit("g", "t", 0, 6)), BatchProgress(batch_id=1))
            committed = time.monotonic()
            seen = None
            while time.monotonic() - committed < 4 * interval:
                started = time.monotonic()
                value = _lag(client.get("/metrics").text, "g")
                if value == 6 and seen is None:
                    seen = started - committed
                # Never the old value in a scrape that starts past the bound.
                assert value == 6 or started - committed < 2 * interval
                time.sleep(0.05)
            assert seen is not None and seen < 2 * interval


def test_the_text_is_kept_made_between_scrapes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    with open_sink(url) as sink:
        sink.reset("ACTIVE", "test")
        sink.write_batch(0, frame(commit("g", "t", 0, 5)), BatchProgress(batch_id=0))
        app = create_app(ServeSettings(sink_url=url, log_end_interval_s=0.5))
        with TestClient(app) as client:
            client.get("/metrics")
            made = app.state.lag._made.made
            sink.write_batch(1, frame(commit("g", "t", 0, 6)), BatchProgress(batch_id=1))
            time.sleep(2.5)  # five intervals without a scrape: the thread made it again
            assert app.state.lag._made.made > made
            assert _lag(client.get("/metrics").text, "g") == 6
