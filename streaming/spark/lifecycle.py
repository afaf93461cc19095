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
    _companions: list[Companion] = field(default_factory=list)

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
        same."""
        self.stopping.set()
        try:
            if self.query is not None and self.query.isActive:
                self.query.stop()
        except Exception as exc:  # py4j: the JVM's end, as a Java error or a lost connection
            log.debug("the query ended with Spark's JVM: %s", exc)
        for companion in self._companions:
            companion.stop()
        return self.query is not None

    def run_until(self, stop: threading.Event, duration_s: float | None = None) -> object:
        """Wait until ``stop`` is set, ``duration_s`` passed or the query ended; the query's
        error, or None."""
        assert self.query is not None, "start runs first"
        deadline = None if duration_s is None else time.monotonic() + duration_s
        while not stop.is_set() and self.query.isActive:
            stop.wait(0.5)
            if deadline is not None and time.monotonic() >= deadline:
                break
        return self.query.exception()

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float = 120.0) -> None:
        """Block until ``predicate()`` holds, failing fast if the query died."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.query is not None and self.query.exception() is not None:
                raise RuntimeError(f"query failed: {self.query.exception()}")
            if predicate():
                return
            time.sleep(0.2)
        raise TimeoutError(f"condition not met within {timeout_s:.0f}s")
