"""A holder's writes and its lease: a batch write that keeps the sink busy for three TTLs ends
with the lease still the holder's, a standby polling all along refused, and the batch
committed, on SQLite (one writer at a time: the write renews as it commits) and on PostgreSQL
(the write's fencing check does not hold the renewal off, and a busy server is no quiet
client); and the history retention beside the query writes fenced by the query's lease. The
standby runs in a process of its own (epoch locks are per process); no Spark."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.sinks import LeaseLost, Sink, open_sink
from streaming.spark.lease_keeper import JOB_LEASE, LeaseKeeper
from streaming.spark.lifecycle import QueryLifecycle
from tests.connectors.sinks.record_frames import commit, frame, offsets_of, progress
from tests.connectors.sinks.test_lease import Holder

#: A renewal every 400 ms; the watchdog gives up after 1 s without one ending.
TTL_MS = 2_000
BUSY_S = 3 * TTL_MS / 1000


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'offsets.db'}"
    return str(request.getfixturevalue("postgres_sink_url"))


@pytest.fixture
def sinks() -> Iterator[list[Sink]]:
    opened: list[Sink] = []
    yield opened
    for sink in opened:
        sink.close()


def test_a_batch_write_three_ttls_long_keeps_the_holders_lease(
    url: str, sinks: list[Sink], monkeypatch: pytest.MonkeyPatch
) -> None:
    lost: list[LeaseLost] = []
    active = LeaseKeeper(open_sink(url), JOB_LEASE, TTL_MS, holder="active", on_lost=lost.append)
    taken = active.take()
    active.announce_start()  # as run does: STARTING, beaten until the job's heartbeat runs
    writer = open_sink(url)
    sinks.append(writer)
    active.fence(writer)
    active.started()
    write_state = writer._write_state

    def write_state_slowly(tx: Any, *args: Any) -> None:
        # Inside the batch's transaction, past its fencing check. A long write keeps the
        # server busy; on PostgreSQL a client quiet for a TTL there is ended (a frozen holder).
        if url.startswith("sqlite"):
            time.sleep(BUSY_S)
        else:
            tx.execute("SELECT pg_sleep(%s)", (BUSY_S,))
        write_state(tx, *args)

    monkeypatch.setattr(writer, "_write_state", write_state_slowly)
    standby = Holder(url)
    written: list[bool] = []
    try:
        batch = threading.Thread(
            target=lambda: written.append(
                writer.write_batch(0, frame(commit("g", "t", 0, 42)), progress(0))
            )
        )
        batch.start()
        # The standby polls through the write and 2 s past it.
        answer = standby.ask(f"contend {JOB_LEASE} {TTL_MS} {BUSY_S + 2}", timeout_s=60)
        batch.join(30)
        assert answer.startswith("busy "), answer
        assert written == [True]
        assert not lost, lost
        reader = open_sink(url)
        sinks.append(reader)
        now = reader.lease(JOB_LEASE)
        assert now is not None and (now.holder, now.epoch) == ("active", taken.epoch)
        assert now.expires_in_ms > 0
        assert offsets_of(reader, "g") == {("t", 0): 42}
    finally:
        standby.stop()
        active.release()
    assert not lost, lost


def test_history_retention_writes_only_while_the_querys_lease_holds(
    url: str, sinks: list[Sink], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="connectors.sinks.retention")
    query_sink = open_sink(url, keep_history=True)
    sinks.append(query_sink)
    taken = query_sink.acquire_lease(JOB_LEASE, "active", 60_000)
    assert taken is not None
    old = commit("g", "t", 0, 1, commit_timestamp_ms=1_000)  # long expired
    assert query_sink.write_batch(0, frame(old), progress(0))
    query_sink.release_lease()  # as a takeover would, the lease moves on to epoch 2
    query_sink.fence_writes(JOB_LEASE, taken.epoch, "active")
    other = open_sink(url)
    sinks.append(other)
    assert other.acquire_lease(JOB_LEASE, "standby", 60_000) is not None
    lifecycle = QueryLifecycle(spark=None, checkpoint_location="")  # type: ignore[arg-type]
    lifecycle.keep_history_for(query_sink, url, retention_ms=1, interval_ms=60_000)
    try:
        deadline = time.monotonic() + 10  # its first run, at once
        while "history retention:" not in caplog.text:
            assert time.monotonic() < deadline, "the retention never ran"
            time.sleep(0.05)
    finally:
        lifecycle.stop()
    assert f"lease {JOB_LEASE} epoch {taken.epoch} lost" in caplog.text
    assert len(other.history("g")) == 1
