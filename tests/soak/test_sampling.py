"""The soak's memory measure: a page two processes share counts once in their sum."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.bench.memory import pss_kb, status_kb
from tests.soak.sampling import pss_mb

SHARED_MB = 64
#: A process that touches a shared mapping, forks a child that touches it too, prints the
#: child's pid and waits: two processes, one copy of the pages (as PostgreSQL's backends share
#: its buffers).
_SHARERS = f"""
import mmap, os, sys, time
size = {SHARED_MB} << 20
shared = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
shared.write(b"x" * size)
child = os.fork()
if child == 0:
    sum(shared[i] for i in range(0, size, 4096))
    print(os.getpid(), flush=True)
    time.sleep(600)
    os._exit(0)
time.sleep(600)
"""


def test_pages_two_processes_share_count_once_in_their_summed_pss() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _SHARERS], stdout=subprocess.PIPE, text=True)
    pids = [parent.pid]
    try:
        assert parent.stdout is not None
        pids.append(int(parent.stdout.readline()))
        rss_mb = sum(status_kb(pid)[1] for pid in pids) / 1024
        summed = pss_mb(pids)
        assert summed is not None
        # RSS counts the shared pages in both processes; PSS splits them between the two.
        assert rss_mb >= 2 * SHARED_MB
        assert SHARED_MB <= summed <= rss_mb - 0.9 * SHARED_MB, (rss_mb, summed)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        parent.wait(timeout=30)


def test_no_process_has_no_pss() -> None:
    assert pss_kb(2**22 + 1) == 0  # above any pid_max
    assert pss_mb([]) is None
