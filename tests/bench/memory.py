"""Peak resident memory of the benchmark's processes (VmHWM from /proc): Spark's JVM, its
Python workers and the benchmark's own Python process (the driver's Python side)."""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from pathlib import Path


def _proc_kb(path: str, names: tuple[str, ...]) -> dict[str, int]:
    """The kB fields ``names`` of a /proc file of ``name: value kB`` lines; {} when the process
    is gone."""
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    fields = (line.partition(":") for line in text.splitlines())
    return {name: int(rest.split()[0]) for name, _, rest in fields if name in names}


def status_kb(pid: int) -> tuple[int, int]:
    """(VmHWM, VmRSS) in kB of a live process; (0, 0) when it is gone."""
    values = _proc_kb(f"/proc/{pid}/status", ("VmHWM", "VmRSS"))
    return values.get("VmHWM", 0), values.get("VmRSS", 0)


def pss_kb(pid: int) -> tuple[int, int]:
    """(PSS outside shared memory, PSS of shared memory) in kB of a live process; (0, 0) when
    it is gone. PSS counts a page that N processes share as 1/N in each, so a sum over
    processes (PostgreSQL's backends, forked Python workers) counts it once, where a sum of RSS
    counts it in every process that touched it. Shared memory (``Pss_Shmem``: PostgreSQL's
    shared buffers) is apart: it fills up to its configured size as the data it caches grows."""
    values = _proc_kb(f"/proc/{pid}/smaps_rollup", ("Pss", "Pss_Shmem"))
    shmem = values.get("Pss_Shmem", 0)
    return values.get("Pss", 0) - shmem, shmem


def command_line(pid: int) -> bytes:
    """A live process's command line (b"" when it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children[ppid].append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out.append(child)
            todo.append(child)
    return out


def python_workers(jvm_pid: int, jvm_command: bytes) -> list[int]:
    """The JVM's Python workers (its descendants). A child the JVM is spawning (a new worker
    before its exec) still shows the JVM's command line ``jvm_command`` and, sharing its pages,
    the JVM's resident memory and CPU: not a worker yet."""
    return [p for p in descendants(jvm_pid) if command_line(p) != jvm_command]


class MemorySampler(threading.Thread):
    """Peak resident memory (VmHWM, /proc) of the JVM, its Python workers and this process, and
    the largest Python worker's resident memory (VmRSS, sampled) in each ``phase``."""

    def __init__(self, jvm_pid: int, interval_s: float = 0.25) -> None:
        super().__init__(daemon=True, name="memory-sampler")
        self.jvm_pid = jvm_pid
        # A child the JVM is spawning shows this command line until its exec (``sample``).
        self._jvm_command = command_line(jvm_pid)
        self.interval_s = interval_s
        self.peaks: dict[str, int] = {"jvm": 0, "python_worker_max": 0, "bench_python": 0}
        self.workers_rss_sum_peak = 0
        #: What the benchmark is doing; set by it as it goes.
        self.phase = "start"
        self.worker_rss_by_phase: dict[str, int] = {}
        self._stop_event = threading.Event()

    def sample(self) -> None:
        self.peaks["jvm"] = max(self.peaks["jvm"], status_kb(self.jvm_pid)[0])
        self.peaks["bench_python"] = max(self.peaks["bench_python"], status_kb(os.getpid())[0])
        rss_sum = 0
        phase = self.phase
        for pid in python_workers(self.jvm_pid, self._jvm_command):
            hwm, rss = status_kb(pid)
            self.peaks["python_worker_max"] = max(self.peaks["python_worker_max"], hwm)
            self.worker_rss_by_phase[phase] = max(self.worker_rss_by_phase.get(phase, 0), rss)
            rss_sum += rss
        self.workers_rss_sum_peak = max(self.workers_rss_sum_peak, rss_sum)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval_s):
            self.sample()

    def stop(self) -> dict[str, float]:
        self._stop_event.set()
        self.sample()
        result = {f"{k}_peak_mb": v / 1024 for k, v in self.peaks.items()}
        result["python_workers_rss_sum_peak_mb"] = self.workers_rss_sum_peak / 1024
        result["python_worker_rss_mb_by_phase"] = {
            phase: kb / 1024 for phase, kb in self.worker_rss_by_phase.items()
        }
        return result
