"""The deployment lease against real stores: a holder in a process of its own (``lease_holder``)
and this test's process contending; the holder killed, paused, renewing, released. And the
standbys registered beside it, and both read from a read-only sink."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from connectors.sinks import LeaseLost, Sink, SinkError, lease_holder, open_sink
from connectors.sinks.sqlite import SqliteSink
from tests.connectors.sinks.record_frames import commit, frame, offsets_of, progress

_ROOT = Path(__file__).resolve().parents[3]
_NAME = "prod"


class Holder:
    """A ``lease_holder`` process: one command, one answer."""

    def __init__(self, url: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(_ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.connectors.sinks.lease_holder", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=_ROOT,
            env=env,
        )

    def ask(self, command: str, timeout_s: float = 30) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.read(timeout_s, command)

    def read(self, timeout_s: float = 30, command: str = "") -> str:
        """The next line the holder prints."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        assert ready, f"no answer to {command!r} within {timeout_s} s"
        return self.process.stdout.readline().strip()

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        self.process.wait(10)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'offsets.db'}"
    return str(request.getfixturevalue("postgres_sink_url"))


@pytest.fixture
def sink(url: str) -> Iterator[Sink]:
    opened = open_sink(url)
    yield opened
    opened.close()


@pytest.fixture
def holder(url: str, sink: Sink) -> Iterator[Holder]:  # sink first: it creates the tables
    started = Holder(url)
    yield started
    started.stop()


def _acquire_within(sink: Sink, timeout_s: float) -> tuple[int, float]:
    """Try every 20 ms; the epoch taken and the seconds it took."""
    started = time.monotonic()
    me = lease_holder()
    while (elapsed := time.monotonic() - started) < timeout_s:
        if (held := sink.acquire_lease(_NAME, me, 60_000)) is not None:
            return held.epoch, elapsed
        time.sleep(0.02)
    raise AssertionError(f"lease not acquired within {timeout_s} s")


def test_a_killed_holder_is_replaced_at_once(sink: Sink, holder: Holder) -> None:
    assert holder.ask(f"acquire {_NAME} 60000") == "held 1"
    assert sink.acquire_lease(_NAME, lease_holder(), 60_000) is None
    holder.signal(signal.SIGKILL)
    epoch, elapsed_s = _acquire_within(sink, 5)
    # Its lock died with it: no waiting for the 60 s expiry.
    assert (epoch, elapsed_s < 1.5) == (2, True), elapsed_s


def test_a_paused_holder_is_replaced_after_expiry_and_then_fenced(
    sink: Sink, holder: Holder
) -> None:
    # A TTL of 4 s: long enough that a loaded machine still checks "not expired" within it.
    assert holder.ask(f"acquire {_NAME} 4000") == "held 1"
    assert holder.ask("write 0") == "wrote"
    holder.signal(signal.SIGSTOP)
    assert sink.acquire_lease(_NAME, lease_holder(), 60_000) is None  # paused, not expired
    epoch, elapsed_s = _acquire_within(sink, 15)
    assert epoch == 2 and elapsed_s < 6, elapsed_s  # taken once it expired
    sink.write_batch(1, frame(commit("active", "t", 0, 1)), progress(1))
    holder.signal(signal.SIGCONT)
    answer = holder.ask("write 2")
    assert answer.startswith("lost ") and "now epoch 2" in answer, answer
    assert sink.status().last_batch_id == 1
    assert offsets_of(sink, "zombie") == {("t", 0): 0}  # batch 0's, nothing of batch 2


def test_a_holder_frozen_inside_a_write_is_replaced_once_its_store_lets_go(
    url: str, sink: Sink, holder: Holder
) -> None:
    assert holder.ask(f"acquire {_NAME} 2000") == "held 1"
    assert holder.ask("quiet 4") == "inside"  # its write transaction is open
    holder.signal(signal.SIGSTOP)
    if url.startswith("sqlite"):
        # Its write lock is SQLite's only one: no takeover while it lives, expired or not.
        time.sleep(2.5)
        with (
            pytest.raises(SinkError, match="database is locked"),
            SqliteSink(url.removeprefix("sqlite:///"), busy_timeout_ms=500) as opened,
        ):
            opened.acquire_lease(_NAME, lease_holder(), 60_000)
        holder.signal(signal.SIGKILL)  # the kernel drops its locks: replaced at once
        epoch, elapsed_s = _acquire_within(sink, 5)
        assert (epoch, elapsed_s < 1.5) == (2, True), elapsed_s
        return
    # PostgreSQL ends a write whose client was quiet for the lease's TTL, and its session
    # with it (its epoch lock): replaced once the TTL passed.
    epoch, elapsed_s = _acquire_within(sink, 15)
    assert epoch == 2 and 1 < elapsed_s < 8, elapsed_s
    holder.signal(signal.SIGCONT)
    assert holder.read().startswith("failed "), "the frozen write committed"
    answer = holder.ask("write 2")
    assert answer.startswith("lost ") and "now epoch 2" in answer, answer


def test_renewals_keep_the_lease(sink: Sink, holder: Holder) -> None:
    assert holder.ask(f"acquire {_NAME} 600") == "held 1"
    assert holder.ask("keep 600 100") == "keeping"
    deadline = time.monotonic() + 2.5  # four times the TTL
    while time.monotonic() < deadline:
        assert sink.acquire_lease(_NAME, lease_holder(), 60_000) is None
        time.sleep(0.05)
    lease = sink.lease(_NAME)
    assert lease is not None and lease.epoch == 1 and lease.expires_at_ms > lease.renewed_at_ms


def test_a_release_hands_over_at_once(sink: Sink, holder: Holder) -> None:
    assert holder.ask(f"acquire {_NAME} 60000") == "held 1"
    assert holder.ask("release") == "released"
    assert sink.acquire_lease(_NAME, lease_holder(), 60_000) is not None
    lease = sink.lease(_NAME)
    assert lease is not None and lease.epoch == 2


def test_the_holder_keeps_its_epoch_and_a_lost_lease_fences_every_write(
    sink: Sink, holder: Holder
) -> None:
    me = lease_holder()
    first = sink.acquire_lease(_NAME, me, 500)
    again = sink.acquire_lease(_NAME, me, 500)
    assert first is not None and again is not None and (first.epoch, again.epoch) == (1, 1)
    time.sleep(0.6)  # expired: another process takes it
    assert holder.ask(f"acquire {_NAME} 60000") == "held 2"
    with pytest.raises(LeaseLost, match="now epoch 2"):
        sink.renew_lease(500)
    with pytest.raises(LeaseLost):
        sink.heartbeat()
    with pytest.raises(LeaseLost):
        sink.set_status("ACTIVE")
    with pytest.raises(LeaseLost):
        sink.write_batch(0, frame(commit("zombie", "t", 0, 5)), progress(0))
    assert sink.status().status == "STOPPED" and offsets_of(sink, "zombie") == {}


def test_a_sink_fenced_by_another_holders_epoch_writes_until_it_moves_on(
    sink: Sink, holder: Holder, url: str
) -> None:
    assert holder.ask(f"acquire {_NAME} 500") == "held 1"
    worker = open_sink(url)
    worker.fence_writes(_NAME, 1, "the holder")
    assert worker.write_batch(0, frame(commit("g", "t", 0, 5)), progress(0))
    assert holder.ask("release") == "released"
    assert sink.acquire_lease(_NAME, lease_holder(), 60_000) is not None  # epoch 2
    with pytest.raises(LeaseLost, match="now epoch 2"):
        worker.write_batch(1, frame(commit("g", "t", 0, 9)), progress(1))
    assert offsets_of(sink, "g") == {("t", 0): 5}


def _age_standbys(url: str, by_ms: int) -> None:
    """Move every standby heartbeat ``by_ms`` into the past, as if none had beaten since."""
    update = "UPDATE {}deployment_standbys SET heartbeat_at_ms = heartbeat_at_ms - %s"
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn, conn:
            conn.execute(update.format("").replace("%s", "?"), (by_ms,))
        return
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    prefix = query.pop("table_prefix")
    server = urlunsplit(parts._replace(query=urlencode(query)))
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(update.format(prefix), (by_ms,))  # type: ignore[arg-type]


def test_standbys_are_listed_while_they_beat_and_dropped_when_they_go(sink: Sink, url: str) -> None:
    sink.register_standby(_NAME, "b:2/x", "WARMING")
    sink.register_standby(_NAME, "a:1/x", "WARMING")
    sink.register_standby(_NAME, "b:2/x", "READY")  # the same row, refreshed
    sink.register_standby("other", "c:3/x", "READY")
    found = sink.standbys(_NAME)
    assert [(s.name, s.holder, s.state) for s in found] == [
        (_NAME, "a:1/x", "WARMING"),
        (_NAME, "b:2/x", "READY"),
    ]
    assert all(0 <= s.age_ms < 2_000 for s in found), found
    sink.drop_standby(_NAME, "a:1/x")
    assert [s.holder for s in sink.standbys(_NAME)] == ["b:2/x"]
    _age_standbys(url, 6_000)  # missed five heartbeats: not listed, still stored
    assert sink.standbys(_NAME) == [] and sink.standbys("other") == []
    sink.register_standby(_NAME, "d:4/x", "WARMING")
    assert [s.holder for s in sink.standbys(_NAME)] == ["d:4/x"]
    _age_standbys(url, 61_000)  # b is 67 s old, d 61 s: a registration deletes them
    sink.register_standby(_NAME, "e:5/x", "READY")
    sink.register_standby("other", "f:6/x", "READY")
    _age_standbys(url, -67_000)  # back to now: only the rows kept show
    assert [s.holder for s in sink.standbys(_NAME)] == ["e:5/x"]
    assert [s.holder for s in sink.standbys("other")] == ["f:6/x"]
    with pytest.raises(ValueError, match="standby state"):
        sink.register_standby(_NAME, "g:7/x", "ACTIVE")  # type: ignore[arg-type]


def test_a_read_only_sink_reads_the_lease_and_the_standbys(sink: Sink, url: str) -> None:
    reader = open_sink(url, read_only=True)
    try:
        assert reader.lease("job") is None and reader.leases() == []
        me = lease_holder()
        assert sink.acquire_lease("job", me, 10_000) is not None
        sink.register_standby("job", "standby:1/x", "READY")
        lease = reader.lease("job")
        assert lease is not None and (lease.epoch, lease.holder) == (1, me)
        assert 8_000 < lease.expires_in_ms <= 10_000, lease
        assert [(held.name, held.holder) for held in reader.leases()] == [("job", me)]
        assert [s.state for s in reader.standbys("job")] == ["READY"]
        with pytest.raises(SinkError, match="read-only"):
            reader.register_standby("job", "standby:2/x", "WARMING")
        sink.release_lease()
        released = reader.lease("job")
        assert released is not None and released.holder == "" and released.expires_in_ms <= 0
    finally:
        reader.close()


@pytest.mark.postgres
def test_a_renewal_that_cannot_take_its_epoch_lock_again_is_a_lost_lease(
    postgres_sink_url: str, postgres_url: str
) -> None:
    """The holder's session dies (its advisory epoch lock with it) and a contender, finding
    the lock free, holds it while it takes over: the holder's next renewal, on a new session,
    must not carry on as if nothing happened."""
    sink = open_sink(postgres_sink_url)
    admin = psycopg.connect(postgres_url, autocommit=True)
    contender = psycopg.connect(postgres_url, autocommit=True)
    try:
        held = sink.acquire_lease(_NAME, lease_holder(), 60_000)
        assert held is not None
        pid = sink._conn.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        key = sink._epoch_lock_key(_NAME, held.epoch)
        deadline = time.monotonic() + 10  # the backend ends, and its locks go, a moment later
        while contender.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone() != (True,):
            assert time.monotonic() < deadline, "the dead session's epoch lock was never freed"
            time.sleep(0.05)
        with contextlib.suppress(SinkError):
            sink.renew_lease(60_000)  # on the dead session: fails, the next opens a new one
        with pytest.raises(LeaseLost, match="epoch lock is held by another process"):
            sink.renew_lease(60_000)
    finally:
        contender.close()
        admin.close()
        sink.close()
