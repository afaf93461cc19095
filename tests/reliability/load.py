"""Sustained commit load for the fault tests, and the job run as a separate driver process.

:class:`CommitLoad` produces OffsetCommit requests from a background thread — increasing offsets
with occasional rewinds, over a few groups and partitions — and records each one's position in
the ingest log, so the reference model can be replayed in log order. :class:`DriverProcess`
runs ``python -m streaming`` in its own session (process group), so SIGKILL of the group takes
the driver's JVM and Python workers down with it, as a crashed machine would.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kafka.errors import KafkaError

from state.coordinator.partitioner import partition_for
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.formats.request_codec import encode_request
from streaming.config import JobConfig
from tests.bench.memory import descendants
from tests.reliability.support import (
    CommitModel,
    OffsetState,
    producer,
    responses_by_id,
)


@dataclass(frozen=True)
class SentCommit:
    request_id: str
    #: (ingest partition, ingest offset): the request's place in the log.
    position: tuple[int, int]
    commits: tuple[tuple[str, str, int, int], ...]
    #: The request's CreateTime (epoch ms): when the client sent it.
    sent_ms: int = 0


@dataclass
class CommitLoad:
    """Commits produced at a steady rate from a background thread until :meth:`stop`."""

    config: JobConfig
    groups: int = 8
    rate_per_s: float = 40.0
    seed: int = 7
    #: Partitions of the committed topic, and how many (least, most) one request commits.
    topic_partitions: int = 4
    partitions_per_request: tuple[int, int] = (1, 2)
    #: Producer options (e.g. more retries for broker failover).
    producer_options: dict[str, Any] = field(default_factory=dict)
    sent: list[SentCommit] = field(default_factory=list)
    #: Partition commits below the previous commit of their key (rewinds Kafka must honour).
    rewinds: int = 0
    #: Requests whose send failed for good (the producer gave up): never acknowledged.
    failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> CommitLoad:
        self._thread = threading.Thread(target=self._run, name="commit-load", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 120.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise AssertionError("the commit load did not stop")

    def _run(self) -> None:
        rng = random.Random(self.seed)
        offsets: dict[tuple[str, str, int], int] = {}
        kafka = producer(self.config.bootstrap_servers, **self.producer_options)
        n = 0
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                n += 1
                group = f"load-g{rng.randrange(self.groups)}"
                commits = []
                count = rng.randint(*self.partitions_per_request)
                for p in sorted(rng.sample(range(self.topic_partitions), count)):
                    key = (group, "orders", p)
                    current = offsets.get(key, 0)
                    # One in eight a rewind: Kafka keeps the later, lower offset.
                    step = -rng.randrange(1, 20) if rng.random() < 0.125 else rng.randrange(1, 100)
                    offsets[key] = max(0, current + step)
                    self.rewinds += offsets[key] < current
                    commits.append((group, "orders", p, offsets[key]))
                request = OffsetCommitRequest(
                    request_id=f"load-{self.seed}-{n}",
                    group_id=group,
                    partitions=tuple(PartitionCommit(t, p, o) for _, t, p, o in commits),
                )
                future = kafka.send(
                    self.config.ingest_topic,
                    key=group.encode(),
                    value=encode_request(request),
                    partition=partition_for(group, self.config.ingest_topic_partitions),
                )
                future.add_callback(self._on_sent, request.request_id, tuple(commits))
                future.add_errback(self._on_failed, request.request_id)
                # Paced by a schedule, not a fixed sleep: the rate holds however long sends take.
                next_at += 1.0 / self.rate_per_s
                time.sleep(max(0.0, next_at - time.monotonic()))
            kafka.flush(timeout=120)
        finally:
            kafka.close(timeout=30)

    def _on_sent(self, request_id: str, commits: tuple[Any, ...], metadata: Any) -> None:
        with self._lock:
            position = (metadata.partition, metadata.offset)
            self.sent.append(SentCommit(request_id, position, commits, metadata.timestamp))

    def _on_failed(self, request_id: str, error: KafkaError) -> None:
        with self._lock:
            self.failed.append(f"{request_id}: {error!r}")

    def model(self) -> OffsetState:
        with self._lock:
            return CommitModel.from_log((s.position, s.commits) for s in self.sent).offsets

    def request_ids(self) -> set[str]:
        with self._lock:
            return {s.request_id for s in self.sent}


def acknowledged(config: JobConfig) -> dict[str, dict[str, Any]]:
    """Successful answers on the responses topic (every partition error code 0)."""
    return {
        rid: r
        for rid, r in responses_by_id(config.bootstrap_servers, config.responses_topic).items()
        if r["errorCode"] == 0 and all(p["errorCode"] == 0 for p in r["partitions"])
    }


def job_command(config: JobConfig) -> list[str]:
    """``python -m streaming`` with the configuration as flags (see ``streaming/__main__.py``)."""
    return [
        sys.executable,
        "-m",
        "streaming",
        "--embedded" if config.replication_factor == 1 else "--replication-factor=3",
        f"--min-insync-replicas={config.min_insync_replicas}",
        f"--bootstrap-servers={config.bootstrap_servers}",
        f"--partitions={config.partitions}",
        f"--ingest-partitions={config.ingest_topic_partitions}",
        f"--ingest-topic={config.ingest_topic}",
        f"--offsets-topic={config.offsets_topic}",
        f"--responses-topic={config.responses_topic}",
        f"--dead-letter-topic={config.dead_letter_topic}",
        f"--checkpoint-location={config.checkpoint_location}",
        f"--sink-url={config.sink_url}",
        f"--trigger-interval={config.trigger_interval}",
        f"--request-timeout-ms={config.request_timeout_ms}",
        "--spark-master=local[2]",
    ]


class DriverProcess:
    """The job as its own driver process (and process group), logging to ``log_path``;
    ``args`` are more flags of ``python -m streaming`` (e.g. ``--standby``)."""

    def __init__(self, config: JobConfig, log_path: Path, args: Sequence[str] = ()) -> None:
        self.config = config
        self.log_path = log_path
        self.args = tuple(args)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.starts = 0
        self._paused: set[int] = set()

    def start(self, args: Sequence[str] | None = None) -> None:
        """Start the driver, with ``args`` instead of the constructor's when given."""
        if self.running:
            raise RuntimeError("the driver already runs")
        self._log = self.log_path.open("ab")
        self._log.write(f"\n=== start {self.starts + 1} ===\n".encode())
        self._log.flush()
        env = dict(os.environ, SPARK_DRIVER_MEMORY="1g", PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [*job_command(self.config), *(self.args if args is None else args)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        self.starts += 1

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check_alive(self) -> None:
        if not self.running:
            raise AssertionError(f"the driver exited; log tail:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the driver's whole process tree: driver, JVM and Python workers at once, as
        a crashed machine (the JVM runs in a process group of its own)."""
        self._signal_group(signal.SIGKILL, timeout_s=30)

    def pause(self) -> None:
        """SIGSTOP the driver's whole process tree: a long GC pause or a frozen machine."""
        if self.process is not None:
            for group in self._groups():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGSTOP)
            self._paused = self._groups()

    def resume(self) -> None:
        """SIGCONT the process tree after :meth:`pause`."""
        for group in self._paused | self._groups():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGCONT)
        self._paused = set()

    def _groups(self) -> set[int]:
        """The process groups of the driver and of its descendants (its JVM's own, with the
        Python workers)."""
        if self.process is None:
            return set()
        groups = set()
        for pid in (self.process.pid, *descendants(self.process.pid)):
            with contextlib.suppress(ProcessLookupError):
                groups.add(os.getpgid(pid))
        return groups

    def current_log(self) -> str:
        """The log of the current (last) start only."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return text.split(f"=== start {self.starts} ===", 1)[-1]

    def wait_for_log(self, text: str, timeout_s: float) -> str:
        """Wait until the current start's log has a line containing ``text``; return it. Fails
        at once if the driver exits first."""
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self.current_log().splitlines():
                if text in line:
                    return line
            self.check_alive()
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"no {text!r} in the driver's log within {timeout_s:.0f} s; log tail:\n"
                    + self.log_tail()
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop cleanly (SIGTERM, the job stops its query), SIGKILL after a grace period."""
        process = self.process
        if process is None:
            return
        try:
            self.resume()  # a paused driver would not act on SIGTERM
            # The driver alone: it stops its query and then its JVM (a group-wide SIGTERM would
            # take the JVM down under the still-running query).
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(60)
        finally:
            self._signal_group(signal.SIGKILL, timeout_s=30)

    def _signal_group(self, sig: int, timeout_s: float) -> None:
        process = self.process
        if process is None:
            return
        groups = self._groups() | {process.pid}  # found before the leader dies
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout_s)
        # Children (the JVM, Python workers) may outlive the leader for a moment.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
            time.sleep(0.1)
        if self._log is not None and process.poll() is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def driver(config: JobConfig, log_path: Path, args: Sequence[str] = ()) -> Iterator[DriverProcess]:
    """A :class:`DriverProcess`, always killed (whole group) on the way out."""
    process = DriverProcess(config, log_path, args)
    try:
        yield process
    finally:
        process.stop()
