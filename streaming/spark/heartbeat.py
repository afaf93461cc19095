"""The job's and the mirror's heartbeat, and their own log line when Kafka or the sink goes away.

:class:`Heartbeat` is a daemon thread that, every :data:`HEARTBEAT_INTERVAL_S` seconds and also
when the query is idle, records a heartbeat in the sink (``Sink.heartbeat``) and checks that a
Kafka broker accepts a connection. Readers judge the heartbeat's age
(``connectors.client.liveness``): a process that was SIGKILLed, or cut off from its sink, shows
as NOT RESPONDING within seconds instead of ACTIVE forever.

The same probes give the process its own account of an outage (:class:`OutageLog`): one WARNING
line when Kafka or the sink becomes unreachable, a reminder every :data:`REMINDER_S` seconds
while it lasts, and one line when it is back, saying for how long. Meanwhile the libraries'
own chatter about it (kafka-python and librdkafka warnings and errors in Python logging; the
JVM's Kafka clients and Spark's lost tasks, quieted to ERROR) is not printed line by line but
counted in the job's next line ("N library messages folded"). Outside an outage a library
line that repeats (librdkafka hands over what it queued during an outage at the producer's
next poll, after the outage) is printed once per :data:`REMINDER_S`, the next one saying how
many like it were folded.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from connectors.client.liveness import HEARTBEAT_INTERVAL_S
from connectors.sinks import Sink, SinkError, redact_url

log = logging.getLogger("consumer_offsets.health")

__all__ = [
    "HEARTBEAT_INTERVAL_S",
    "REMINDER_S",
    "Heartbeat",
    "OutageLog",
    "jvm_log_quieter",
    "kafka_reachable",
]

#: While something stays unreachable, a reminder line this often (the rate limit).
REMINDER_S: Final = 60.0
#: How long a broker gets to accept a connection in one probe.
_CONNECT_TIMEOUT_S: Final = 2.0
#: Loggers of this project: never folded.
_OWN_LOGGERS: Final = ("consumer_offsets", "streaming", "connectors", "state", "__main__")
#: JVM loggers that repeat an outage line by line: Kafka's clients (NetworkClient's "Connection
#: to node -1 could not be established"), Spark's Kafka source and its retried tasks.
JVM_OUTAGE_LOGGERS: Final = (
    "org.apache.kafka",
    "org.apache.spark.sql.kafka010",
    "org.apache.spark.scheduler.TaskSetManager",
)


def kafka_reachable(bootstrap_servers: str, timeout_s: float = _CONNECT_TIMEOUT_S) -> str | None:
    """None when one of the bootstrap servers accepts a TCP connection, else why none did.
    Only reachability: a broker that refuses this client's login is reported by the client."""
    reasons = []
    for server in (s.strip() for s in bootstrap_servers.split(",")):
        if not server:
            continue
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return None
        except (OSError, ValueError) as exc:
            reasons.append(getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
    return reasons[0] if reasons else "no bootstrap servers"


@dataclass
class _Outage:
    since: float
    reason: str
    reminded: float
    folded_at_start: int


class OutageLog(logging.Filter):
    """One line per change of what is reachable, rate-limited, with library chatter folded in.

    As a :class:`logging.Filter` on the root logger's handlers it drops (and counts) records of
    libraries below CRITICAL while an outage is on; the project's own records always pass.
    ``quiet_jvm(True)`` is called when the first outage starts and ``quiet_jvm(False)`` when
    the last one ends.
    """

    def __init__(
        self,
        who: str,
        quiet_jvm: Callable[[bool], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.who = who
        self.quiet_jvm = quiet_jvm
        self.clock = clock
        self.outages: dict[str, _Outage] = {}
        self.folded = 0
        self._repeats: dict[tuple[str, int, str], list[Any]] = {}
        self._last_record: logging.LogRecord | None = None
        self._last_verdict = True
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.CRITICAL or record.name.startswith(_OWN_LOGGERS):
            return True
        with self._lock:
            # Installed on every root handler: decide (and count) each record once.
            if record is not self._last_record:
                self._last_record = record
                self._last_verdict = self._decide(record)
            return self._last_verdict

    def _decide(self, record: logging.LogRecord) -> bool:
        """Whether a library's record is printed: never during an outage (it is counted into
        the outage's lines), else once per REMINDER_S for records of one kind."""
        if self.outages:
            self.folded += 1
            return False
        now = self.clock()
        kind = _kind(record)
        last = self._repeats.get(kind)
        if last is not None and now - last[0] < REMINDER_S:
            last[1] += 1
            return False
        self._repeats[kind] = [now, 0]
        if last is not None and last[1]:
            record.msg = f"{record.getMessage()} ({last[1]} more like it folded)"
            record.args = None
        return True

    def observe(self, what: str, failure: str | None) -> None:
        """Record one probe of ``what`` (e.g. ``Kafka at host:9092``): ``failure`` None when it
        answered, else why not. Logs on a change, and a reminder at most every REMINDER_S."""
        now = self.clock()
        outage = self.outages.get(what)
        if failure is None:
            if outage is None:
                return
            del self.outages[what]
            log.warning(
                "%s: %s reachable again after %s%s",
                self.who,
                what,
                _duration(now - outage.since),
                self._folded_since(outage),
            )
            if not self.outages and self.quiet_jvm is not None:
                self.quiet_jvm(False)
            return
        if outage is None:
            if not self.outages and self.quiet_jvm is not None:
                self.quiet_jvm(True)
            self.outages[what] = _Outage(now, failure, now, self.folded)
            log.warning(
                "%s: %s unreachable (%s); waiting for it, nothing acknowledged is lost",
                self.who,
                what,
                failure,
            )
        elif now - outage.reminded >= REMINDER_S:
            outage.reminded = now
            log.warning(
                "%s: %s still unreachable after %s (%s)%s",
                self.who,
                what,
                _duration(now - outage.since),
                failure,
                self._folded_since(outage),
            )

    def _folded_since(self, outage: _Outage) -> str:
        count = self.folded - outage.folded_at_start
        return f"; {count} library message(s) about it folded into this line" if count else ""

    def install(self) -> None:
        """Filter every handler of the root logger (where the process's lines are printed)."""
        for handler in logging.getLogger().handlers:
            handler.addFilter(self)

    def uninstall(self) -> None:
        for handler in logging.getLogger().handlers:
            handler.removeFilter(self)
        if self.outages and self.quiet_jvm is not None:
            self.quiet_jvm(False)


def _kind(record: logging.LogRecord) -> tuple[str, int, str]:
    """Records of one kind: one logger, level and message template (librdkafka logs every line
    through ``"%s [%s] %s"``: its facility, e.g. FAIL, tells them apart)."""
    template = str(record.msg)[:80]
    if template.startswith("%s") and isinstance(record.args, tuple) and record.args:
        template += f"|{str(record.args[0])[:40]}"
    return record.name, record.levelno, template


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def jvm_log_quieter(
    spark: Any, names: Iterable[str] = JVM_OUTAGE_LOGGERS
) -> Callable[[bool], None]:
    """``quiet(True)`` sets the JVM loggers ``names`` to ERROR, ``quiet(False)`` puts back the
    levels they had (Spark's session JVM, log4j2)."""
    names = tuple(names)
    previous: dict[str, Any] = {}

    def quiet(on: bool) -> None:
        try:
            jvm = spark.sparkContext._jvm
            log4j = jvm.org.apache.logging.log4j
            configurator = log4j.core.config.Configurator
            for name in names:
                if on:
                    previous[name] = log4j.LogManager.getLogger(name).getLevel()
                    configurator.setLevel(name, log4j.Level.ERROR)
                elif name in previous:
                    configurator.setLevel(name, previous.pop(name))
        except Exception as exc:  # a stopped JVM: nothing left to quiet
            log.debug("cannot change the JVM's log levels: %s", exc)

    return quiet


class Heartbeat:
    """The heartbeat thread of one job or mirror (see the module docstring)."""

    def __init__(
        self,
        sink: Sink,
        bootstrap_servers: str,
        who: str,
        *,
        interval_s: float = HEARTBEAT_INTERVAL_S,
        quiet_jvm: Callable[[bool], None] | None = None,
    ) -> None:
        self.sink = sink
        self.bootstrap_servers = bootstrap_servers
        self.interval_s = interval_s
        self.outages = OutageLog(who, quiet_jvm)
        self._kafka = f"Kafka at {bootstrap_servers}"
        self._sink_name = f"the sink {redact_url(sink.url)}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        """One heartbeat and one Kafka probe, each outcome reported to the outage log."""
        try:
            self.sink.heartbeat()
            self.outages.observe(self._sink_name, None)
        except SinkError as exc:
            # The driver's message; the SinkError's own prefix names the sink again.
            reason = str(exc.__cause__ or exc).strip() or type(exc).__name__
            self.outages.observe(self._sink_name, reason.splitlines()[0])
        self.outages.observe(self._kafka, kafka_reachable(self.bootstrap_servers))

    def start(self) -> None:
        """Beat at once, then every ``interval_s`` until :meth:`stop`."""
        if self._thread is not None:
            return
        self.outages.install()

        def run() -> None:
            while True:
                try:
                    self.beat()
                except Exception:  # never let the heartbeat die silently
                    log.exception("heartbeat failed")
                if self._stop.wait(self.interval_s):
                    return

        self._thread = threading.Thread(target=run, name="heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating (before the process marks its sink STOPPED)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 10)
            self._thread = None
        self.outages.uninstall()
