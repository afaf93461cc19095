"""Burrow's status of a group whose commits ``serve`` did not sample: a view made afresh over
the same sink (``serve`` restarted) judges a healthy group as the view that saw it commit."""

from __future__ import annotations

import time
from pathlib import Path

from connectors.sinks import BatchProgress, open_sink
from state.coordinator.model import TopicPartition
from streaming.serve.evaluation import Status
from streaming.serve.lag_view import LagView
from streaming.serve.log_end_cache import LogEndCache
from tests.connectors.sinks.record_frames import commit, frame

TP = TopicPartition("orders", 0)
#: Commits (offset, ms before now) of a group catching up: lag 89, 88, 87, 1, 1 under a log
#: end of 100; the last 10 s ago, well inside the 70 s the window spans (not stopped).
COMMITS = [(11, 80_000), (12, 60_000), (13, 40_000), (99, 20_000), (99, 10_000)]


def test_a_restarted_serve_judges_commits_it_did_not_sample_as_ok(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    sink = open_sink(f"sqlite:///{tmp_path / 'offsets.db'}", keep_history=True)
    try:
        sink.reset("ACTIVE", "test")
        for batch, (offset, ago) in enumerate(COMMITS):
            record = commit(
                "healthy", TP.topic, TP.partition, offset, commit_timestamp_ms=now - ago
            )
            sink.write_batch(batch, frame(record), BatchProgress(batch_id=batch, input_rows=1))

        # The serve that ran while the group committed: it read the log end before each one.
        running = LagView(sink, LogEndCache(sink), "local", intervals=5)
        for ago in (90_000, 70_000, 50_000, 30_000, 15_000, 0):
            running.log_ends.observe({TP: 100}, now - ago)
        assert [o.lag for o in running.partitions("healthy")[0].window] == [89, 88, 87, 1, 1]
        assert running.status_of("healthy", running.partitions("healthy"), now).status == (
            Status.OK
        )

        # Restarted: it has read the log end once, now, after every commit of the window.
        restarted = LagView(sink, LogEndCache(sink), "local", intervals=5)
        restarted.log_ends.observe({TP: 100}, now)
        partitions = restarted.partitions("healthy")
        assert [o.lag for o in partitions[0].window] == [None] * 5
        evaluated = restarted.status_of("healthy", partitions, now)
        assert evaluated.status == Status.OK, evaluated.reason
        assert evaluated.partitions[0].reason == (
            "OK: consuming; lag not sampled at 5 of its last 5 commits"
            " (made before serve read the log end)"
        )
        # The pass over every group (the dashboard's index, /metrics) says the same.
        assert dict(restarted.statuses())["healthy"].status == Status.OK
    finally:
        sink.close()
