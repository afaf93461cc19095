"""Faults on a schedule, and the time each took to recover from.

Kinds (``--faults``):

- ``driver``: the job's driver process group SIGKILLed (driver, JVM and Python workers at
  once, as a crashed machine) and started again from its checkpoint at once. Recovery: kill →
  the first answer the new driver produces (the answer's CreateTime; a dead driver stamps none).
- ``broker``: the broker leading ingest partition 0 of the 3-node cluster SIGKILLed, started
  again after ``broker_outage_s``. Recovery: kill → the next answer (two in-sync replicas
  remain, so acks should go on), and restart → the next answer.
- ``postgres``: PostgreSQL stopped (``pg_ctl stop -m fast``) for ``postgres_outage_s`` and
  started again (only with ``--sink postgres``). Shorter than the job's ``sink_write_timeout_s``,
  so the job waits and carries on. Recovery: start → the next answer.
- ``mirror``: the mirror's process group SIGKILLed and restarted. Recovery: kill → its next
  micro-batch in the sink.
- ``kafka``: every broker of the cluster stopped at once (SIGTERM, a clean stop) for
  ``kafka_outage_s`` and started again, while the load goes on sending: what cannot reach a
  broker waits in the producers' queues (or is answered REQUEST_TIMED_OUT once it arrives past
  the job's deadline). Recovery: restart → the next answer.

The schedule spreads ``rounds`` rounds of the kinds evenly between 10% and 90% of the run,
round-robin, so each kind happens ``rounds`` times; the gaps between faults are equal once the
outages' own lengths are taken out, so a long outage never runs into the next fault.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.reliability.support import leaders
from tests.soak.load import LoadHandle
from tests.soak.services import Services

KINDS = ("driver", "broker", "postgres", "mirror", "kafka")
#: Tries to start the stopped cluster again (its ports may linger a moment after the stop).
_KAFKA_START_TRIES = 10


@dataclass(frozen=True)
class PlannedFault:
    at_s: float
    kind: str
    number: int


def plan(
    duration_s: float,
    kinds: list[str],
    rounds: int,
    lengths: dict[str, float] | None = None,
) -> list[PlannedFault]:
    """``rounds`` x ``kinds`` over the middle 80% of the run, with equal gaps between one
    fault's end and the next one's start (``lengths``: a kind's outage in seconds, 0 if
    absent). Raises ValueError when the outages alone do not fit."""
    count = rounds * len(kinds)
    if count == 0:
        return []
    lengths = lengths or {}
    start, end = 0.1 * duration_s, 0.9 * duration_s
    order = [kinds[i % len(kinds)] for i in range(count)]
    busy = sum(lengths.get(kind, 0.0) for kind in order)
    if busy >= end - start:
        raise ValueError(
            f"the faults' outages ({busy:.0f} s) do not fit in the middle 80% of the run "
            f"({end - start:.0f} s): a longer run or shorter outages"
        )
    gap = (end - start - busy) / count
    planned = []
    at = start + gap / 2
    for i, kind in enumerate(order):
        planned.append(PlannedFault(at, kind, i // len(kinds) + 1))
        at += lengths.get(kind, 0.0) + gap
    return planned


@dataclass
class FaultRecord:
    """What was done, when (seconds since the start), and how long recovery took."""

    kind: str
    number: int
    at_s: float
    target: str = ""
    outage_s: float | None = None
    #: Mark name in the load → what it measures (resolved from the load's marks at the end).
    marks: dict[str, str] = field(default_factory=dict)
    recovery_s: dict[str, float | None] = field(default_factory=dict)
    error: str | None = None


class FaultRunner(threading.Thread):
    """Runs the planned faults at their times; ``lock`` is held while a fault acts, so the
    supervisor does not restart what a fault took down on purpose."""

    def __init__(
        self,
        services: Services,
        load: LoadHandle,
        planned: list[PlannedFault],
        started_wall: float,
        lock: threading.Lock,
        broker_outage_s: float,
        postgres_outage_s: float,
        kafka_outage_s: float = 600.0,
        echo: Callable[[str], None] = print,
    ) -> None:
        super().__init__(daemon=True, name="faults")
        self.services = services
        self.load = load
        self.planned = planned
        self.started_wall = started_wall
        self.lock = lock
        self.broker_outage_s = broker_outage_s
        self.postgres_outage_s = postgres_outage_s
        self.kafka_outage_s = kafka_outage_s
        self.echo = echo
        self.records: list[FaultRecord] = []
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=600)

    def run(self) -> None:
        for fault in self.planned:
            delay = self.started_wall + fault.at_s - time.time()
            if self._halt.wait(max(0.0, delay)):
                return
            record = FaultRecord(fault.kind, fault.number, time.time() - self.started_wall)
            self.records.append(record)
            try:
                with self.lock:
                    getattr(self, f"_{fault.kind}")(record)
            except Exception as error:  # recorded and reported; the soak goes on
                record.error = f"{type(error).__name__}: {error}"[:500]
            self.echo(
                f"fault {fault.kind} #{fault.number} at {record.at_s / 60:.1f} min: "
                f"{record.target}, outage {record.outage_s or 0:.1f} s"
                + (f", {record.recovery_s}" if record.recovery_s else "")
                + (f", error {record.error.splitlines()[0]}" if record.error else "")
            )

    def _mark(self, record: FaultRecord, what: str, at_wall: float) -> None:
        name = f"{record.kind}{record.number}-{what}"
        record.marks[name] = what
        self.load.mark(name, at_wall)

    def _driver(self, record: FaultRecord) -> None:
        record.target = "driver process group"
        if self.services.standby is not None:
            record.target = "active driver process group (a warm standby takes over)"
        killed = time.time()
        self.services.job.kill()
        self._mark(record, "kill → next ack", killed)
        if self.services.standby is not None:
            self.services.take_over()
        else:
            self.services.job.start()

    def _broker(self, record: FaultRecord) -> None:
        victim = leaders(self.services.bootstrap, self.services.config.ingest_topic)[0]
        record.target = f"broker {victim} (leader of ingest partition 0)"
        killed = time.time()
        if not self.services.cluster.stop_node(victim, kill=True):
            raise RuntimeError(f"broker {victim} was not running")
        self._mark(record, "kill → next ack", killed)
        self._halt.wait(self.broker_outage_s)
        self.services.cluster.start_node(victim, timeout=600)
        restarted = time.time()
        record.outage_s = restarted - killed
        self._mark(record, "restart → next ack", restarted)

    def _postgres(self, record: FaultRecord) -> None:
        server = self.services.postgres
        if server is None:
            raise RuntimeError("no PostgreSQL of the soak's own (--sink sqlite)")
        record.target = "PostgreSQL (job and mirror sink)"
        stopped = time.time()
        server.stop()
        self._halt.wait(self.postgres_outage_s)
        server.start()
        started = time.time()
        record.outage_s = started - stopped
        self._mark(record, "start → next ack", started)

    def _kafka(self, record: FaultRecord) -> None:
        cluster = self.services.cluster
        config = cluster.config()
        if config is None:
            raise RuntimeError("the soak's cluster has no configuration")
        record.target = f"every broker ({config.nodes}), stopped cleanly"
        stopped = time.time()
        if len(cluster.stop()) != config.nodes:
            raise RuntimeError("not every broker was running")
        self.echo(f"fault kafka #{record.number}: cluster stopped in {time.time() - stopped:.1f} s")
        self._halt.wait(self.kafka_outage_s)
        # The same ports and data: a start of the configured cluster, never a new one. Retried,
        # so that a port still held a moment after the stop cannot leave Kafka down for good.
        for attempt in range(1, _KAFKA_START_TRIES + 1):
            try:
                cluster.start(
                    nodes=config.nodes,
                    port=config.port,
                    heap=config.heap,
                    timeout=600,
                    echo=self.echo,
                )
                break
            except Exception as error:
                if attempt == _KAFKA_START_TRIES:
                    raise
                self.echo(f"fault kafka #{record.number}: start {attempt} failed: {error!s:.300}")
                time.sleep(10)
        restarted = time.time()
        record.outage_s = restarted - stopped
        self._mark(record, "restart → next ack", restarted)

    def _mirror(self, record: FaultRecord) -> None:
        record.target = "mirror process group"
        before = self.services.mirror_status()
        batch = before.last_batch_id if before is not None else -1
        killed = time.time()
        self.services.mirror.kill()
        self.services.mirror.start()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            status = self.services.mirror_status()
            if (
                status is not None
                and status.last_batch_id > batch
                and status.updated_at_ms > killed * 1000
            ):
                record.recovery_s["kill → next mirror batch"] = time.time() - killed
                return
            time.sleep(0.5)
        record.recovery_s["kill → next mirror batch"] = None

    def resolve(self, marks: dict[str, float]) -> None:
        """Fill each record's recovery times from the load's resolved marks."""
        for record in self.records:
            for name, what in record.marks.items():
                record.recovery_s[what] = marks.get(name)


def record_dict(record: FaultRecord) -> dict[str, Any]:
    return {
        "kind": record.kind,
        "number": record.number,
        "at_s": record.at_s,
        "target": record.target,
        "outage_s": record.outage_s,
        "recovery_s": record.recovery_s,
        "error": record.error,
    }
