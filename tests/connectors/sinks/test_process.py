"""A sink's batch writes in a child process (``connectors.sinks.process``), on a real SQLite file
(and PostgreSQL): the batch is the sink's, fenced by the lease the parent's sink holds at each
write, its renewals counted where the parent's lease keeper looks, and the child ends with its
parent; a child that died fails that write and the next starts a new one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.sinks import LeaseLost, Sink, SinkWriteError, open_sink
from connectors.sinks.process import SinkProcess
from tests.connectors.sinks.record_frames import commit, frame, offsets_of, progress

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'offsets.db'}"
    return str(request.getfixturevalue("postgres_sink_url"))


@pytest.fixture
def sink(url: str) -> Iterator[Sink]:
    with open_sink(url) as opened:
        yield opened


@pytest.fixture
def child(sink: Sink) -> Iterator[SinkProcess]:
    process = SinkProcess(sink)
    yield process
    process.close()


def test_a_batch_written_by_the_child_is_the_sinks_and_a_replay_is_skipped(
    sink: Sink, child: SinkProcess
) -> None:
    batch = frame(commit("g", "orders", 0, 5), commit("g", "orders", 1, 7))
    child.submit(0, batch, progress(0, ingest_offsets={0: 2}), activate=True)
    assert child.result() is True
    assert offsets_of(sink, "g") == {("orders", 0): 5, ("orders", 1): 7}
    assert sink.status().status == "ACTIVE"
    assert sink.status().ingest_offsets == {0: 2}
    child.submit(0, frame(commit("g", "orders", 0, 9)), progress(0), activate=False)
    assert child.result() is False  # batch 0 was written: nothing changes
    assert offsets_of(sink, "g")[("orders", 0)] == 5


def test_bad_records_fail_the_write_here_naming_them(child: SinkProcess, sink: Sink) -> None:
    bad = frame({**commit("g", "orders", 0, 5), "kind": "nonsense"})
    child.submit(0, bad, progress(0), activate=False)
    with pytest.raises(ValueError, match="record 0 of the batch: unknown kind"):
        child.result()
    child.submit(0, frame(commit("g", "orders", 0, 5)), progress(0), activate=False)
    assert child.result() is True  # the same child goes on


def test_the_childs_writes_are_fenced_by_the_parents_lease(url: str, sink: Sink) -> None:
    with open_sink(url) as keeper:
        lease = keeper.acquire_lease("job", "holder-1", 60_000)
        assert lease is not None
        sink.fence_writes("job", lease.epoch, "holder-1")
        child = SinkProcess(sink)
        try:
            child.submit(0, frame(commit("g", "orders", 0, 5)), progress(0), activate=False)
            assert child.result() is True
            keeper.release_lease()
            with open_sink(url) as successor:  # a standby takes over: the epoch moves on
                assert successor.acquire_lease("job", "holder-2", 60_000) is not None
                child.submit(1, frame(commit("g", "orders", 0, 6)), progress(1), activate=False)
                with pytest.raises(LeaseLost, match=r"lease job epoch .* lost"):
                    child.result()
        finally:
            child.close()
    assert offsets_of(sink, "g") == {("orders", 0): 5}


def test_the_childs_renewing_writes_reach_the_parents_signals(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"  # SQLite: a fenced write renews the lease
    with open_sink(url) as keeper, open_sink(url) as sink:
        lease = keeper.acquire_lease("job", "holder-1", 60_000)
        assert lease is not None
        sink.fence_writes("job", lease.epoch, "holder-1", ttl_ms=60_000)
        child = SinkProcess(sink)
        try:
            for batch_id in range(2):
                batch = frame(commit("g", "orders", 0, batch_id))
                child.submit(batch_id, batch, progress(batch_id), activate=False)
                child.result()
        finally:
            child.close()
        assert sink.lease_renewals_by_write == 2
        assert not sink.lease_writing


def test_a_child_that_died_fails_its_write_and_the_next_starts_anew(
    sink: Sink, child: SinkProcess
) -> None:
    child.submit(0, frame(commit("g", "orders", 0, 5)), progress(0), activate=False)
    assert child.result() is True
    os.kill(child.pid, signal.SIGKILL)
    child.submit(1, frame(commit("g", "orders", 0, 6)), progress(1), activate=False)
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)  # a new child, killed before its write
    with pytest.raises(SinkWriteError, match=r"writer process ended .* replaying it is safe"):
        child.result()
    child.submit(1, frame(commit("g", "orders", 0, 6)), progress(1), activate=False)
    assert child.result() is True
    assert offsets_of(sink, "g") == {("orders", 0): 6}


PARENT = """
import sys, time
from connectors.sinks import open_sink
from connectors.sinks.process import SinkProcess
from tests.connectors.sinks.record_frames import commit, frame, progress
child = SinkProcess(open_sink(sys.argv[1]))
child.submit(0, frame(commit("g", "orders", 0, 5)), progress(0), activate=False)
child.result()
print(child.pid, flush=True)
time.sleep(600)
"""


def test_the_child_ends_with_its_parent(url: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, url], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        parent.kill()  # SIGKILL: no clean-up of its own
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(pid):
            assert time.monotonic() < deadline, "the sink's child outlived its parent"
            time.sleep(0.1)
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped by nobody yet, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
