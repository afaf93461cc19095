"""A stop as a terminal and a service manager send it: ``consumer-offsets run`` sent SIGTERM or
SIGINT, to the driver alone, to its process group (Ctrl-C in a terminal) or to every process of
the job at once (systemd's default ``KillMode=control-group``: the JVM and the Python workers
too), during start-up, right after the first micro-batch and while running. Every time: exit 0
(130 for SIGINT), one line saying so and no traceback, the lease released, the sink's status
STOPPED (a ``commit`` right after is refused at once instead of waiting its timeout), and no
process of the job left behind.

Spark starts are the cost here: the start-up cases signal while Spark's JVM launches (a few
seconds each); the two running cases start the job once each.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from connectors.sinks import SinkError, open_sink
from streaming.config import JobConfig
from streaming.spark.lease_keeper import JOB_LEASE
from tests.fixtures.job import new_job_config, unique_group, write_config_file
from tests.reliability.load import CommitLoad
from tests.reliability.support import wait_until
from tests.streaming.cli.support import run

# The job runs as its own driver process: Spark starts there, so the markers are explicit.
pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

#: How the signal is sent: to the driver's pid, to its process group (a terminal's Ctrl-C), or
#: to every process of the job (systemd's KillMode=control-group).
DRIVER, GROUP, EVERY_PROCESS = "driver", "group", "every-process"
#: Exit status by signal: a service manager's stop is a clean stop; Ctrl-C is 128 + SIGINT.
EXPECTED_STATUS = {signal.SIGTERM: 0, signal.SIGINT: 130}
#: A commit to a STOPPED job is refused before anything is sent: this is "at once" with the
#: CLI's own start, against the 30 s timeout it waited when the status was left ACTIVE.
REFUSED_WITHIN_S = 5.0


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (Spark's JVM, its Python workers), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class Job:
    """``consumer-offsets run --config config_file`` in a session of its own, logging to
    ``log_path``."""

    process: subprocess.Popen[bytes]
    config: JobConfig
    config_file: Path
    log_path: Path

    @property
    def sink_url(self) -> str:
        return self.config.sink_url

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(f"the job exited ({self.process.returncode}):\n{self.log()}")

    def wait_for_log(self, text: str, timeout_s: float = 120.0) -> None:
        wait_until(lambda: text in self.log(), timeout_s, repr(text), self.check_alive, 0.05)

    def wait_for_status(self, status: str, timeout_s: float = 240.0) -> None:
        def reached() -> bool:
            with contextlib.suppress(SinkError), open_sink(self.sink_url, read_only=True) as sink:
                return bool(sink.status().status == status)
            return False

        wait_until(reached, timeout_s, f"sink status {status}", self.check_alive, 0.05)

    def send(self, sig: signal.Signals, target: str) -> set[int]:
        """Send ``sig`` to ``target``; the job's processes below the driver at that moment."""
        below = descendants(self.process.pid)
        if target == DRIVER:
            self.process.send_signal(sig)
        else:
            os.killpg(self.process.pid, sig)
        if target == EVERY_PROCESS:
            for pid in below:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        return below


@contextlib.contextmanager
def started_job(tmp_path: Path, kafka_bootstrap: str) -> Iterator[Job]:
    config = new_job_config(kafka_bootstrap, tmp_path, spark_master="local[2]")
    config_file = write_config_file(config, tmp_path / "job.toml")
    log_path = tmp_path / "job.log"
    script = Path(sys.executable).with_name("consumer-offsets")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(script), "run", "--config", str(config_file)],
            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
            env=dict(os.environ, SPARK_DRIVER_MEMORY="1g", PYTHONUNBUFFERED="1"),
        )  # fmt: skip
    job = Job(process, config, config_file, log_path)
    try:
        yield job
    finally:
        below = descendants(process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        for pid in below:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait(30)


def commit(job: Job, *extra: str) -> tuple[int, str, float]:
    """``consumer-offsets commit`` of one offset to the job: status, stderr, seconds taken."""
    started = time.monotonic()
    done = run(
        "commit", "--config", str(job.config_file), "--group", unique_group(), "--topic", "t",
        "--partition", "0", "--offset", "1", "--timeout", "30000", *extra,
    )  # fmt: skip
    return done.code, done.err, time.monotonic() - started


def assert_stopped_cleanly(
    job: Job, sig: signal.Signals, below: set[int], line: str, jvm_killed: bool = False
) -> None:
    """The exit status, one line naming the stop (``line``) and nothing alarming (from the
    driver only when the JVM got the signal too), the lease released, STOPPED, a commit refused
    at once and no process of the job left."""
    try:
        status = job.process.wait(120)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the job did not stop within 120 s:\n{job.log()}") from None
    log = job.log()
    assert status == EXPECTED_STATUS[sig], log
    if jvm_killed:
        # Spark's JVM logs how its query ended (its stack traces name py4j's classes); the
        # driver's own output stays quiet.
        python_alarms = re.compile(r"^(Traceback|error:|\d{4}-\d\d-\d\d \S+ ERROR )", re.MULTILINE)
        assert python_alarms.search(log) is None, log
    else:
        for alarming in ("Traceback", "error:", "ERROR", "py4j", "Exception"):
            assert alarming not in log, f"{alarming!r} in the job's output:\n{log}"
    assert len([x for x in log.splitlines() if line in x]) == 1, log
    with open_sink(job.sink_url, read_only=True) as sink:
        assert sink.status().status == "STOPPED", log
        lease = sink.lease(JOB_LEASE)
        assert lease is not None and lease.holder == "" and lease.expires_in_ms <= 0, lease
    code, err, took = commit(job)
    assert code == 1 and "STOPPED" in err and took < REFUSED_WITHIN_S, (code, err, took)
    # Spark's JVM and its Python workers end with the driver, whatever got the signal.
    wait_until(lambda: not any(alive(pid) for pid in below), 30, "the job's processes ended")


@pytest.mark.parametrize(
    ("sig", "target"),
    [
        (signal.SIGTERM, DRIVER),
        (signal.SIGTERM, GROUP),
        (signal.SIGINT, DRIVER),
        (signal.SIGINT, GROUP),
    ],
    ids=["sigterm-driver", "sigterm-group", "sigint-driver", "sigint-group"],
)
def test_a_stop_while_spark_starts_releases_the_lease_and_says_stopped(
    tmp_path: Path, kafka_bootstrap: str, sig: signal.Signals, target: str
) -> None:
    with started_job(tmp_path, kafka_bootstrap) as job:
        # The lease is the job's from here; Spark's JVM is being launched.
        job.wait_for_log(f"lease {JOB_LEASE} acquired")
        time.sleep(1.0)
        below = job.send(sig, target)
        assert_stopped_cleanly(job, sig, below, "interrupted during start-up")


def test_sigterm_to_the_group_right_after_the_first_batch_is_a_clean_stop(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    with started_job(tmp_path, kafka_bootstrap) as job:
        load = CommitLoad(job.config, rate_per_s=50).start()  # batches run when the signal lands
        try:
            job.wait_for_status("ACTIVE")  # the first micro-batch completed
            time.sleep(0.5)
            below = job.send(signal.SIGTERM, GROUP)
            assert below, "Spark's JVM runs below the driver"
            assert_stopped_cleanly(job, signal.SIGTERM, below, "stopping")
        finally:
            load.stop()
        # At the default log level: no line of Spark's Python workers (printed at each query
        # start), no warning of Spark's at a clean stop.
        log = job.log()
        stop = log.index("SIGTERM: stopping")
        assert "Python worker" not in log, log
        assert " WARN " not in log[stop:], log


def test_sigterm_to_every_process_while_running_stops_with_status_and_lease(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """systemd's default KillMode=control-group: the JVM's own log may say how its query
    ended, the driver's output stays one line and its exit, status and lease as for any stop."""
    with started_job(tmp_path, kafka_bootstrap) as job:
        load = CommitLoad(job.config, rate_per_s=50).start()
        try:
            job.wait_for_status("ACTIVE")
            code, err, _ = commit(job)
            assert code == 0, err  # running: a commit is answered
            time.sleep(3.0)
            below = job.send(signal.SIGTERM, EVERY_PROCESS)
            assert_stopped_cleanly(job, signal.SIGTERM, below, "stopping", jvm_killed=True)
        finally:
            load.stop()
