"""A streaming query's life, the job's and the mirror's: started with its settings, restarted
after Spark's replayed-batch bug, stopped with the threads that run beside it."""

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

#: Restarts after Spark's replayed-batch bug at most, per start.
REPLAYED_BATCH_RESTARTS = 3
#: How long a query that ended may take to be replaced by that restart.
RESTART_GRACE_S = 60.0


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


def is_replayed_batch_bug(error: object) -> bool:
    """Whether a query's error is SPARK-55271's: a resumed query re-runs and commits its last
    uncommitted batch, then fails reporting its metrics; starting it again resumes cleanly."""
    text = "" if error is None else f"{error} {getattr(error, '_stackTrace', '')}"
    return "KafkaMicroBatchStream" in text or "Option.get()" in text


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

    def start(
        self, writer: DataStreamWriter, settings: Mapping[str, str], resumed: bool
    ) -> StreamingQuery:
        """Start ``writer``'s query with ``settings`` (and the checkpoint's file manager); a
        ``resumed`` one is started again after SPARK-55271."""
        settings = {
            **settings,
            **checkpoint_file_settings(self.spark, self.checkpoint_location),
        }
        self.query = start_with_settings(self.spark, writer, settings)
        if resumed:
            threading.Thread(
                target=self._watch, args=(writer, settings), name="query-watchdog", daemon=True
            ).start()
        return self.query

    def _watch(self, writer: DataStreamWriter, settings: Mapping[str, str]) -> None:
        left = REPLAYED_BATCH_RESTARTS
        while left and not self.stopping.is_set():
            query = self.query
            if query is None or query.isActive:
                self.stopping.wait(0.2)
                continue
            error = query.exception()
            if not is_replayed_batch_bug(error):
                ended = str(error)[:300] if error is not None else "stopped"
                log.info("query watchdog: query ended (%s)", ended)
                return
            log.warning(
                "restarting the query after Spark's replayed-batch metrics bug "
                "(SPARK-55271); the replayed batch was committed"
            )
            self.query = start_with_settings(self.spark, writer, settings)
            left -= 1

    def beside(self, companion: C) -> C:
        """``companion``, stopped by :meth:`stop` after the query, in the order given."""
        self._companions.append(companion)
        return companion

    def keep_alive(self, sink: Sink, bootstrap_servers: str, who: str) -> Heartbeat:
        """Start the sink's heartbeat (``connectors.client.liveness``)."""
        heartbeat = Heartbeat(sink, bootstrap_servers, who, quiet_jvm=jvm_log_quieter(self.spark))
        heartbeat.start()
        return self.beside(heartbeat)

    def keep_history_for(self, sink_url: str, retention_ms: int, interval_ms: int) -> None:
        """Delete history older than ``retention_ms`` every ``interval_ms``."""
        retention = HistoryRetention(
            lambda: open_sink(sink_url, keep_history=True), retention_ms, interval_ms
        )
        retention.start()
        self.beside(retention)

    @property
    def retention(self) -> HistoryRetention | None:
        return next((c for c in self._companions if isinstance(c, HistoryRetention)), None)

    def stop(self) -> bool:
        """Stop the query, then its companions; whether a query was started."""
        self.stopping.set()
        if self.query is not None and self.query.isActive:
            self.query.stop()
        for companion in self._companions:
            companion.stop()
        return self.query is not None

    def run_until(self, stop: threading.Event, duration_s: float | None = None) -> object:
        """Wait until ``stop`` is set, ``duration_s`` passed or the query ended for good (not
        replaced after SPARK-55271); the last query's error, or None."""
        assert self.query is not None, "start runs first"
        deadline = None if duration_s is None else time.monotonic() + duration_s
        while not stop.is_set():
            query = self.query
            if not query.isActive and not self._replaced(query, stop):
                break
            stop.wait(0.5)
            if deadline is not None and time.monotonic() >= deadline:
                break
        return self.query.exception()

    def _replaced(self, ended: StreamingQuery, stop: threading.Event) -> bool:
        """Whether the ended query is replaced by an active one within :data:`RESTART_GRACE_S`."""
        deadline = time.monotonic() + RESTART_GRACE_S
        while not stop.is_set() and time.monotonic() < deadline:
            current = self.query
            if current is not None and current is not ended and current.isActive:
                return True
            if not is_replayed_batch_bug(ended.exception()):
                return False  # stopped, or a failure that is not restarted
            stop.wait(0.2)
        return False

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
