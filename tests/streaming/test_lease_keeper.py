"""The job's and the mirror's lease keeper against a real SQLite sink (no Spark): renewals keep
the lease, a takeover or a renewal that hangs for TTL - 2 s ends the process (its exit observed
here) while renewals refused at once (the sink down) do not, a release hands over, a standby
waits for the lease in the registry. Where a live holder must be seen as live, it runs in a
process of its own (epoch locks are per process)."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.client.liveness import STALE_AFTER_MS, liveness
from connectors.sinks import LeaseLost, Sink, open_sink
from connectors.sinks import lease as lease_module
from streaming.cli.errors import EXIT_LEASE_LOST
from streaming.spark.lease_keeper import (
    JOB_LEASE,
    LEASE_LOST_STATUS,
    MIRROR_LEASE,
    LeaseHeld,
    LeaseKeeper,
    give_up_after_ms,
)
from streaming.spark.processor import write_loaded
from tests.connectors.sinks.record_frames import commit, frame, offsets_of
from tests.connectors.sinks.test_lease import Holder

TTL_MS = 1_000


class Exits:
    """The keeper's exit, observed instead of ending the test's process."""

    def __init__(self) -> None:
        self.reasons: list[LeaseLost] = []
        self.called = threading.Event()

    def __call__(self, lost: LeaseLost) -> None:
        self.reasons.append(lost)
        self.called.set()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'offsets.db'}"


@pytest.fixture
def sinks(url: str) -> Iterator[list[Sink]]:
    opened: list[Sink] = []
    yield opened
    for sink in opened:
        sink.close()


def keeper(url: str, exits: Exits, holder: str, ttl_ms: int = TTL_MS) -> LeaseKeeper:
    return LeaseKeeper(open_sink(url), JOB_LEASE, ttl_ms, holder=holder, on_lost=exits)


def test_renewals_keep_the_lease_past_its_ttl(url: str, sinks: list[Sink]) -> None:
    exits = Exits()
    active = keeper(url, exits, "active")
    first = active.take()
    try:
        time.sleep(3 * TTL_MS / 1000)
        reader = open_sink(url)
        sinks.append(reader)
        now = reader.lease(JOB_LEASE)
        assert now is not None and (now.holder, now.epoch) == ("active", first.epoch)
        assert now.renewed_at_ms > first.renewed_at_ms + 2 * TTL_MS
        assert now.expires_in_ms > 0
        assert not exits.reasons
    finally:
        active.release()
    assert reader.lease(JOB_LEASE).holder == ""  # type: ignore[union-attr]


@pytest.fixture
def holder(url: str) -> Iterator[Holder]:
    """A live holder of lease "job" for 60 s, in a process of its own."""
    other = Holder(url)
    assert other.ask(f"acquire {JOB_LEASE} 60000") == "held 1"
    yield other
    other.stop()


def test_a_second_active_is_refused_with_what_to_do(url: str, holder: Holder) -> None:
    second = keeper(url, Exits(), "second")
    try:
        with pytest.raises(LeaseHeld) as refused:
            second.take()
    finally:
        second.release()
    assert re.fullmatch(
        r"lease job is held by \S+ \(epoch 1, expires in (59|60)\.\d s\): another job of this "
        r"deployment is active; start this one with --standby to take over when it stops",
        str(refused.value),
    ), refused.value


def test_a_takeover_calls_the_exit_with_lease_lost(url: str, sinks: list[Sink]) -> None:
    exits = Exits()
    # Renewing every 2 s, a 100 ms lease is expired between two renewals.
    active = LeaseKeeper(open_sink(url), JOB_LEASE, 10_000, holder="active", on_lost=exits)
    active.take()
    writer = open_sink(url)
    sinks.append(writer)
    active.fence(writer)
    try:
        active.sink.renew_lease(100)
        time.sleep(0.2)
        other = open_sink(url)
        sinks.append(other)
        taken = other.acquire_lease(JOB_LEASE, "standby", TTL_MS)
        assert taken is not None and taken.epoch == 2
        assert exits.called.wait(5)
        assert isinstance(exits.reasons[0], LeaseLost)
        assert "epoch 2, holder standby" in str(exits.reasons[0])
        with pytest.raises(LeaseLost):
            writer.set_status("ACTIVE")  # the fenced sink of the old holder writes nothing
    finally:
        active.release()
    assert len(exits.reasons) == 1
    assert other.lease(JOB_LEASE).holder == "standby"  # type: ignore[union-attr]


def test_a_renewal_hanging_for_ttl_minus_2s_calls_the_exit(url: str, tmp_path: Path) -> None:
    exits = Exits()
    active = LeaseKeeper(open_sink(url), JOB_LEASE, 4_000, holder="active", on_lost=exits)
    active.take()
    # Another connection keeps the database locked: each renewal waits out SQLite's busy
    # timeout (10 s), as one over a partitioned network hangs, and fails.
    blocker = sqlite3.connect(tmp_path / "offsets.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    started = time.monotonic()
    try:
        assert exits.called.wait(10)
        waited = time.monotonic() - started
        assert give_up_after_ms(4_000) == 2_000
        assert 1.0 <= waited < 3.0, waited  # 2 s after the last renewal, itself 0-0.8 s ago
        assert "not renewed for 2." in str(exits.reasons[0])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        active.release()
    assert len(exits.reasons) == 1


def test_renewals_refused_at_once_keep_the_holder_until_the_sink_is_back(
    url: str, tmp_path: Path
) -> None:
    exits = Exits()
    # A short busy timeout: while the database is locked, each renewal fails at once, as one
    # against a stopped PostgreSQL does.
    sink = open_sink(url, busy_timeout_ms=50)
    active = LeaseKeeper(sink, JOB_LEASE, 2_000, holder="active", on_lost=exits)
    active.take()
    blocker = sqlite3.connect(tmp_path / "offsets.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        # Three times the give-up margin (1 s) without a renewal: the holder runs on.
        assert not exits.called.wait(3.0), exits.reasons
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    before = active.lease
    try:
        deadline = time.monotonic() + 5
        while active.lease is before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert active.lease is not before, "not renewed once the sink was back"
        assert active.lease.epoch == before.epoch  # type: ignore[union-attr]
        assert not exits.reasons
    finally:
        active.release()


def test_the_exit_margin_is_at_least_half_the_ttl() -> None:
    assert give_up_after_ms(10_000) == 8_000
    assert give_up_after_ms(3_000) == 1_500
    assert LEASE_LOST_STATUS == EXIT_LEASE_LOST == 3


def test_a_release_hands_over_to_a_waiting_standby(
    url: str, holder: Holder, sinks: list[Sink]
) -> None:
    exits = Exits()
    standby = keeper(url, exits, "standby")
    standby.register("WARMING")
    got: list[object] = []
    waiting = threading.Thread(target=lambda: got.append(standby.wait(lambda: False)))
    waiting.start()
    try:
        reader = open_sink(url)
        sinks.append(reader)
        deadline = time.monotonic() + 5
        while not [s for s in reader.standbys(JOB_LEASE) if s.state == "READY"]:
            assert time.monotonic() < deadline, "the standby never said READY"
            time.sleep(0.05)
        assert waiting.is_alive()  # a live holder's 60 s lease: the standby waits
        released = time.monotonic()
        assert holder.ask("release") == "released"
        waiting.join(5)
        assert not waiting.is_alive()
        assert time.monotonic() - released < 1.0
        lease = got[0]
        assert lease is not None and (lease.holder, lease.epoch) == ("standby", 2)  # type: ignore[attr-defined]
        assert reader.standbys(JOB_LEASE) == []  # dropped once it holds the lease
    finally:
        standby.release()
    assert not exits.reasons


def test_a_stopped_standby_leaves_the_registry(url: str, holder: Holder, sinks: list[Sink]) -> None:
    standby = keeper(url, Exits(), "standby")
    stop = threading.Event()
    threading.Timer(1.5, stop.set).start()
    try:
        assert standby.wait(stop.is_set) is None
        reader = open_sink(url)
        sinks.append(reader)
        assert reader.standbys(JOB_LEASE) == []
        assert reader.lease(JOB_LEASE).epoch == 1  # type: ignore[union-attr]
    finally:
        standby.release()


@pytest.mark.kafka
@pytest.mark.parametrize("command", ["run", "mirror"])
def test_a_second_active_exits_1_before_creating_anything(
    command: str, url: str, tmp_path: Path, kafka_bootstrap: str
) -> None:
    name = JOB_LEASE if command == "run" else MIRROR_LEASE
    holder = Holder(url)
    try:
        assert holder.ask(f"acquire {name} 60000") == "held 1"
        checkpoint = tmp_path / "checkpoint"
        started = time.monotonic()
        done = subprocess.run(
            [
                *(sys.executable, "-m", "streaming.cli.main", command),
                *("--bootstrap-server", kafka_bootstrap, "--sink-url", url),
                *("--checkpoint-location", str(checkpoint)),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - started
    finally:
        holder.stop()
    assert done.returncode == 1, done.stderr
    other = "job" if command == "run" else "mirror"
    assert f"error: lease {name} is held by " in done.stderr
    assert f"another {other} of this deployment is active; start this one with --standby" in (
        done.stderr
    )
    assert took < 10, took  # no JVM started
    assert not checkpoint.exists()


def test_a_workers_rebuilt_shard_is_fenced_by_the_holders_epoch(
    url: str, sinks: list[Sink]
) -> None:
    exits = Exits()
    active = LeaseKeeper(open_sink(url), JOB_LEASE, 10_000, holder="active", on_lost=exits)
    active.take()
    token = active.fence_token()
    try:
        write_loaded(url, 0, 0, frame(commit("g", "t", 0, 5)), token)  # the holder's: written
        active.sink.renew_lease(100)
        time.sleep(0.2)
        other = open_sink(url)
        sinks.append(other)
        assert other.acquire_lease(JOB_LEASE, "standby", TTL_MS) is not None
        with pytest.raises(LeaseLost):
            write_loaded(url, 0, 0, frame(commit("g", "t", 0, 6)), token)
    finally:
        active.release()
    assert offsets_of(other, "g") == {("t", 0): 5}


def test_a_holder_is_starting_from_its_first_second_and_beats_while_it_starts(
    url: str, sinks: list[Sink]
) -> None:
    reader = open_sink(url)
    sinks.append(reader)
    reader.set_status("STOPPED", "stopped cleanly")  # as the last run left it
    active = keeper(url, Exits(), "active")
    active.take()
    try:
        active.announce_start()
        first = reader.status()
        assert (first.status, first.detail) == ("STARTING", "lease taken: starting Spark")
        assert liveness(first).responding
        # No other heartbeat runs yet (Spark starts): the renewals keep the status alive.
        time.sleep(STALE_AFTER_MS / 1000 / 10)
        later = reader.status()
        assert later.heartbeat_at_ms is not None and first.heartbeat_at_ms is not None
        assert later.heartbeat_at_ms > first.heartbeat_at_ms
        active.started()  # the job's own heartbeat runs: the keeper's beat stops
        stopped = reader.status().heartbeat_at_ms
        time.sleep(3 * TTL_MS / 5000)
        assert reader.status().heartbeat_at_ms == stopped
    finally:
        active.release()


def test_a_rebuild_to_resume_stays_loading_when_its_holder_starts(
    url: str, sinks: list[Sink]
) -> None:
    reader = open_sink(url)
    sinks.append(reader)
    reader.set_status("LOADING", "rebuilding state from the offsets topic")
    active = keeper(url, Exits(), "active")
    active.take()
    try:
        active.announce_start()
        assert reader.status().status == "LOADING"  # the start plan resumes the rebuild by it
    finally:
        active.release()


def test_a_warming_standby_is_listed_all_through_its_warm_up(
    url: str, holder: Holder, sinks: list[Sink], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease_module, "STANDBY_FRESH_MS", 2_500)  # refreshed every second
    reader = open_sink(url)
    sinks.append(reader)
    standby = keeper(url, Exits(), "standby")
    try:
        standby.warm()
        for _ in range(5):  # Spark and its Python workers start meanwhile: tens of seconds
            time.sleep(0.75)
            assert [s.state for s in reader.standbys(JOB_LEASE)] == ["WARMING"]
        stop = threading.Event()
        threading.Timer(1.0, stop.set).start()
        assert standby.wait(stop.is_set) is None  # READY while it waits, WARMING no more
    finally:
        standby.release()
    assert reader.standbys(JOB_LEASE) == []
