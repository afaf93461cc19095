"""The job's and the mirror's heartbeat in the sink (``connectors.client.liveness``), and from
the same probes one log line when Kafka or the sink goes away (:class:`OutageLog`), a reminder
every :data:`REMINDER_S` and one when it is back, the libraries' own lines folded into them.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from connectors.client.liveness import HEARTBEAT_INTERVAL_S
from connectors.sinks import Sink, SinkError

log = logging.getLogger("consumer_offsets.health")

#: While something stays unreachable, a reminder line this often (the rate limit).
REMINDER_S: Final = 60.0
#: How long a broker gets to accept a connection in one probe.
_CONNECT_TIMEOUT_S: Final = 2.0
#: Loggers of this project: never folded.
_OWN_LOGGERS: Final = ("consumer_offsets", "streaming", "connectors", "state", "__main__")
#: JVM loggers that repeat an outage line by line.
_JVM_OUTAGE_LOGGERS: Final = (
    "org.apache.kafka",
    "org.apache.spark.sql.kafka010",
    "org.apache.spark.scheduler.TaskSetManager",
)


def kafka_reachable(bootstrap_servers: str, timeout_s: float = _CONNECT_TIMEOUT_S) -> str | None:
    """None when one of the bootstrap servers accepts a TCP connection, else why none did."""
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
    reminded: float
    folded_at_start: int


class OutageLog(logging.Filter):
    """One line per change of what is reachable, rate-limited. As a filter on the root
    logger's handlers it folds libraries' records below CRITICAL: all of them during an outage
    (``quiet_jvm(True)`` quiets the JVM's meanwhile), else repeats within :data:`REMINDER_S`."""

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
        """Whether a library's record is printed: never during an outage, else once per
        REMINDER_S per kind, saying how many were folded."""
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
        """Record one probe of ``what`` (``failure``: None, or why it did not answer)."""
        now = self.clock()
        outage = self.outages.get(what)
        if outage is None and failure is not None:
            self._switch_jvm_quiet(True)
            self.outages[what] = _Outage(now, now, self.folded)
            self._say(
                "%s unreachable (%s); waiting for it, nothing acknowledged is lost", what, failure
            )
        elif outage is not None and failure is None:
            del self.outages[what]
            lasted = _duration(now - outage.since)
            self._say("%s reachable again after %s%s", what, lasted, self._folded_since(outage))
            self._switch_jvm_quiet(False)
        elif outage is not None and now - outage.reminded >= REMINDER_S:
            outage.reminded = now
            lasted = _duration(now - outage.since)
            folded = self._folded_since(outage)
            self._say("%s still unreachable after %s (%s)%s", what, lasted, failure, folded)

    def _say(self, message: str, *args: object) -> None:
        log.warning("%s: " + message, self.who, *args)

    def _switch_jvm_quiet(self, on: bool) -> None:
        """Quiet the JVM's loggers (or end that) when no other outage is on."""
        if not self.outages and self.quiet_jvm is not None:
            self.quiet_jvm(on)

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
    """A record's kind: logger, level and template (librdkafka's ``"%s…"`` by its facility)."""
    template = str(record.msg)[:80]
    if template.startswith("%s") and isinstance(record.args, tuple) and record.args:
        template += f"|{str(record.args[0])[:40]}"
    return record.name, record.levelno, template


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def jvm_log_quieter(spark: Any) -> Callable[[bool], None]:
    """``quiet(True)`` sets the JVM's outage loggers to ERROR, ``quiet(False)`` undoes it."""
    previous: dict[str, Any] = {}

    def quiet(on: bool) -> None:
        try:
            jvm = spark.sparkContext._jvm
            log4j = jvm.org.apache.logging.log4j
            configurator = log4j.core.config.Configurator
            for name in _JVM_OUTAGE_LOGGERS:
                if on:
                    previous[name] = log4j.LogManager.getLogger(name).getLevel()
                    configurator.setLevel(name, log4j.Level.ERROR)
                elif name in previous:
                    configurator.setLevel(name, previous.pop(name))
        except Exception as exc:  # a stopped JVM: nothing left to quiet
            log.debug("cannot change the JVM's log levels: %s", exc)

    return quiet


class Heartbeat:
    """The heartbeat thread of one job or mirror."""

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
        self._sink_name = f"the sink {sink.url}"  # already redacted
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        """One heartbeat and one Kafka probe, each outcome reported to the outage log."""
        try:
            self.sink.heartbeat()
            self.outages.observe(self._sink_name, None)
        except SinkError as exc:
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
