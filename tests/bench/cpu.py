"""CPU seconds of the benchmark's processes (/proc), to set the job's CPU per offset beside
Kafka's coordinator's: the job's Spark JVM, its Python workers and the driver's Python process,
and the broker, which does part of the job's work (its topics) and all of the coordinator's. The
load generators' processes count on neither side."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench.memory import command_line, python_workers

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process, all its threads (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def broker_pid(marker: bytes = b"kafka-bench") -> int | None:
    """The benchmark's broker: the ``kafka.Kafka`` process whose command line names ``marker``
    (its data folder)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            line = command_line(int(entry.name))
            if b"kafka.Kafka" in line and marker in line:
                return int(entry.name)
    return None


@dataclass
class CpuClock:
    """Reads each process's CPU seconds (:meth:`read`) and what each part used since a reading
    (:meth:`since`). A Python worker that exited in between is not counted."""

    jvm_pid: int
    broker: int | None = field(default_factory=broker_pid)

    def read(self) -> dict[str, dict[int, float]]:
        workers = python_workers(self.jvm_pid, command_line(self.jvm_pid))
        return {
            "jvm": {self.jvm_pid: cpu_s(self.jvm_pid)},
            "python_workers": {p: cpu_s(p) for p in workers},
            "driver_python": {os.getpid(): cpu_s(os.getpid())},
            "broker": {} if self.broker is None else {self.broker: cpu_s(self.broker)},
        }

    def since(self, before: dict[str, dict[int, float]]) -> dict[str, float]:
        now = self.read()
        return {
            part: sum(s - before[part].get(pid, 0.0) for pid, s in pids.items())
            for part, pids in now.items()
        }
