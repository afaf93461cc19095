"""The soak's memory measure: a page processes share counts once in their sum, and shared
memory (PostgreSQL's buffers) apart from the rest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.bench.memory import pss_kb, status_kb
from tests.soak.sampling import pss_mb

MB = 64
#: A process that fills a shared mapping (shared memory, as PostgreSQL's buffers) and a private
#: one, forks a child that reads both, prints the child's pid and waits: the private pages are
#: shared copy-on-write after the fork, as a forked Python worker's are.
_SHARERS = f"""
import mmap, os, time
size = {MB} << 20
shared = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
private = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
shared.write(b"x" * size)
private.write(b"y" * size)
child = os.fork()
if child == 0:
    sum(shared[i] + private[i] for i in range(0, size, 4096))
    print(os.getpid(), flush=True)
    time.sleep(600)
    os._exit(0)
time.sleep(600)
"""


def test_pages_two_processes_share_count_once_shared_memory_apart() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _SHARERS], stdout=subprocess.PIPE, text=True)
    pids = [parent.pid]
    try:
        assert parent.stdout is not None
        pids.append(int(parent.stdout.readline()))
        rss_mb = sum(status_kb(pid)[1] for pid in pids) / 1024
        measured = pss_mb(pids)
        assert measured is not None
        outside, shared = measured
        # RSS counts both mappings in both processes: 4 x 64 MB.
        assert rss_mb >= 4 * MB, rss_mb
        # PSS counts each page once: the shared memory 64 MB, the copy-on-write pages 64 MB
        # (and the interpreters' own few).
        assert 0.95 * MB <= shared <= 1.05 * MB, measured
        assert 0.95 * MB <= outside <= 1.5 * MB, measured
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        parent.wait(timeout=30)


def test_no_process_has_no_pss() -> None:
    assert pss_kb(2**22 + 1) == (0, 0)  # above any pid_max
    assert pss_mb([]) is None
