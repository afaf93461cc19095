"""A streaming query's life, the job's and the mirror's: started with its settings, stopped
with the threads that run beside it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from connectors.sinks import Sink, open_sink
from connectors.sinks.retention import HistoryRetention
from streaming.spark.checkpoint_files import checkpoint_file_settings, hadoop_path
from streaming.spark.heartbeat import Heartbeat, jvm_log_quieter

log = logging.getLogger(__name__)

#: A query failure Spark's own start-up causes on a loaded machine, not the job's: the first
#: batch's planning starts a Python worker on the driver (transformWithState's schema check)
#: that must connect back within a hard-coded 10 s. The query is started again from its
#: checkpoint (nothing of that batch was written), up to ``MAX_QUERY_RESTARTS`` times in a row:
#: a query that completed a batch before it failed starts the count again.
RESTARTABLE_FAILURES = ("Python worker failed to connect back",)
MAX_QUERY_RESTARTS = 5
#: The pause before the n-th restart: n times this.
RESTART_PAUSE_S = 2.0

#: Options of a Kafka source that waits a Kafka outage out. Planning a batch asks Kafka for the
#: end offsets: Spark tries 3 times, then fails the query; these try on (each try takes up to
#: the admin client's ``default.api.timeout.ms``, 60 s), so an outage between batches costs no
#: restart, as one inside a batch does not (``streaming.spark.writer``).
SOURCE_WAITS_FOR_KAFKA = {
    "fetchOffset.numRetries": str(2**31 - 1),
    "fetchOffset.retryIntervalMs": "1000",
}


class Companion(Protocol):
    """A thread that runs beside the query and stops with it."""

    def stop(self) -> None: ...


C = TypeVar("C", bound=Companion)


def start_with_settings(
    spark: SparkSession, writer: DataStreamWriter, settings: Mapping[str, str]
) -> StreamingQuery:
    """Start ``writer``'s query with ``settings`` (Spark reads them at start); the session's
    own values are restored after."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        return writer.start()
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@dataclass
class QueryLifecycle:
    """One query at ``checkpoint_location`` and the companions that stop with it."""

    spark: SparkSession
    checkpoint_location: str
    query: StreamingQuery | None = None
    #: Set by :meth:`stop`; the companions' loops end on it.
    stopping: threading.Event = field(default_factory=threading.Event)
    #: Restarts after a :data:`RESTARTABLE_FAILURES` failure so far.
    restarts: int = 0
    _companions: list[Companion] = field(default_factory=list)
    _started_with: tuple[DataStreamWriter, Mapping[str, str]] | None = None

    def checkpoint_exists(self) -> bool:
        """Whether the location holds a query checkpoint."""
        path, fs = hadoop_path(self.spark, self.checkpoint_location.rstrip("/") + "/offsets")
        return bool(fs.exists(path)) and len(fs.listStatus(path)) > 0

    def start(self, writer: DataStreamWriter, settings: Mapping[str, str]) -> StreamingQuery:
        """Start ``writer``'s query with ``settings`` (and the checkpoint's file manager)."""
        settings = {
            **settings,
            **checkpoint_file_settings(self.spark, self.checkpoint_location),
        }
        self._started_with = (writer, settings)
        self.query = start_with_settings(self.spark, writer, settings)
        return self.query

    def beside(self, companion: C) -> C:
        """``companion``, stopped by :meth:`stop` after the query, in the order given."""
        self._companions.append(companion)
        return companion

    def keep_alive(self, sink: Sink, bootstrap_servers: str, who: str) -> Heartbeat:
        """Start the sink's heartbeat (``connectors.client.liveness``)."""
        heartbeat = Heartbeat(sink, bootstrap_servers, who, quiet_jvm=jvm_log_quieter(self.spark))
        heartbeat.start()
        return self.beside(heartbeat)

    def keep_history_for(
        self, sink: Sink, sink_url: str, retention_ms: int, interval_ms: int
    ) -> None:
        """Delete history older than ``retention_ms`` every ``interval_ms``, on a sink of its
        own fenced as ``sink`` (the query's) is."""

        def open_writer() -> Sink:
            writer = open_sink(sink_url, keep_history=True)
            if sink.fence is not None:
                writer.fence_writes(*sink.fence)
            return writer

        retention = HistoryRetention(open_writer, retention_ms, interval_ms)
        retention.start()
        self.beside(retention)

    @property
    def retention(self) -> HistoryRetention | None:
        return next((c for c in self._companions if isinstance(c, HistoryRetention)), None)

    def stop(self) -> bool:
        """Stop the query, then its companions; whether a query was started. A query that
        cannot be stopped because Spark's JVM ended (or is ending) first, as when a stop signal
        reached every process, is over already: said at debug, the companions stopped all the
        same. Spark's warnings and errors of the stop itself (the batch's tasks killed, its
        shuffle files, a broadcast or a checkpoint file's write interrupted: the next start
        runs that batch again) are not logged: the stop asked for is one line of the job's
        own. Nor are the stack traces the JVM prints to its standard error for a thread that
        the stop interrupted (transformWithState's state server, waiting in ``accept``): Spark's
        own log keeps the stream it opened with."""
        self.stopping.set()
        try:
            if self.query is not None and self.query.isActive:
                self.spark.sparkContext.setLogLevel("FATAL")
                jvm = self.spark._jvm  # type: ignore[attr-defined]
                jvm.java.lang.System.setErr(
                    jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream())
                )
                self.query.stop()
        except Exception as exc:  # py4j: the JVM's end, as a Java error or a lost connection
            log.debug("the query ended with Spark's JVM: %s", exc)
        for companion in self._companions:
            companion.stop()
        return self.query is not None

    def run_until(self, stop: threading.Event, duration_s: float | None = None) -> object:
        """Wait until ``stop`` is set, ``duration_s`` passed or the query ended; the query's
        error, or None. A query that failed as :data:`RESTARTABLE_FAILURES` says is started
        again meanwhile (:meth:`restarted_after`)."""
        assert self.query is not None, "start runs first"
        deadline = None if duration_s is None else time.monotonic() + duration_s
        while not stop.is_set():
            if not self.query.isActive and not self.restarted_after(self.query.exception(), stop):
                break
            stop.wait(0.5)
            if deadline is not None and time.monotonic() >= deadline:
                break
        return self.query.exception()

    def restarted_after(self, error: object, stop: threading.Event | None = None) -> bool:
        """Start the query again from its checkpoint when ``error`` is one of
        :data:`RESTARTABLE_FAILURES` and fewer than :data:`MAX_QUERY_RESTARTS` were made in a
        row; whether it was (not when ``stop`` or :attr:`stopping` is set during the pause)."""
        text = str(error or "")
        cause = next((f for f in RESTARTABLE_FAILURES if f in text), None)
        if self._started_with is None or self.stopping.is_set() or cause is None:
            return False
        if self.query is not None and self.query.lastProgress is not None:
            self.restarts = 0  # it completed a batch: a loaded moment, not a start that fails
        if self.restarts >= MAX_QUERY_RESTARTS:
            return False
        self.restarts += 1
        log.warning(
            "the query failed as Spark does on a loaded machine (%s): starting it again from "
            "its checkpoint in %.0f s (restart %d of %d)",
            cause,
            RESTART_PAUSE_S * self.restarts,
            self.restarts,
            MAX_QUERY_RESTARTS,
        )
        if (stop or self.stopping).wait(RESTART_PAUSE_S * self.restarts) or self.stopping.is_set():
            return False
        self.query = start_with_settings(self.spark, *self._started_with)
        return True

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float = 120.0) -> None:
        """Block until ``predicate()`` holds, failing fast if the query died."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            error = None if self.query is None else self.query.exception()
            if error is not None and not self.restarted_after(error):
                raise RuntimeError(f"query failed: {error}")
            if predicate():
                return
            time.sleep(0.2)
        raise TimeoutError(f"condition not met within {timeout_s:.0f}s")
