"""History retention: commits older than ``history_retention_ms`` (-1: never, as Kafka's
``retention.ms``) leave the history table, a chunk per short transaction, so a micro-batch never
waits behind more than one chunk."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from connectors.sinks.values import SinkError, now_ms

if TYPE_CHECKING:
    from connectors.sinks.base import Sink  # a sink's modules load SQLAlchemy: typing only

log = logging.getLogger(__name__)

#: Keep history forever.
KEEP_FOREVER: Final = -1
#: One day: Burrow's 10 commits a partition even for consumers that commit every two hours.
DEFAULT_HISTORY_RETENTION_MS: Final = 24 * 60 * 60 * 1000
DEFAULT_CHECK_INTERVAL_MS: Final = 60_000
#: Rows per delete transaction (~10-30 ms of SQLite's write lock on 2 cores).
DEFAULT_CHUNK_ROWS: Final = 5_000


def check_history_retention(retention_ms: int, check_interval_ms: int) -> None:
    """ValueError naming the setting when it is out of range."""
    if retention_ms != KEEP_FOREVER and retention_ms <= 0:
        raise ValueError(
            f"history_retention_ms must be > 0 or -1 (keep forever), got {retention_ms}"
        )
    if check_interval_ms <= 0:
        raise ValueError(
            f"history_retention_check_interval_ms must be > 0, got {check_interval_ms}"
        )


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """What one retention run did."""

    deleted: int
    seconds: float
    #: False when the run stopped at its time budget with expired rows left (the next run goes on).
    complete: bool


def purge_expired_history(
    sink: Sink,
    retention_ms: int,
    now: int,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    pause_s: float = 0.02,
    budget_s: float = 30.0,
    stop: threading.Event | None = None,
) -> PurgeResult:
    """Delete history committed before ``now - retention_ms``, ``chunk_rows`` at a time, until
    none is left, ``budget_s`` has passed or ``stop`` is set; then reclaim space."""
    started = time.monotonic()
    deleted = 0
    complete = retention_ms == KEEP_FOREVER
    if not complete:
        cutoff = now - retention_ms
        while True:
            count = sink.purge_history(cutoff, chunk_rows)
            deleted += count
            if count < chunk_rows:
                complete = True
                break
            if time.monotonic() - started >= budget_s or (stop is not None and stop.is_set()):
                break
            # Lets a waiting micro-batch take the write lock between chunks.
            time.sleep(pause_s)
    if deleted:
        sink.reclaim_space()
    return PurgeResult(deleted, time.monotonic() - started, complete)


class HistoryRetention(threading.Thread):
    """A daemon thread applying the retention every ``check_interval_ms`` on a sink of its own
    (``open_writer``). A failed run is logged once per outage and retried: the retention never
    takes the job down."""

    def __init__(
        self,
        open_writer: Callable[[], Sink],
        retention_ms: int,
        check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS,
        *,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        check_history_retention(retention_ms, check_interval_ms)
        super().__init__(name="history-retention", daemon=True)
        self._open_writer = open_writer
        self.retention_ms = retention_ms
        self.check_interval_ms = check_interval_ms
        self._clock = clock
        self._stop_event = threading.Event()
        self._sink: Sink | None = None
        self._failing = False

    def run(self) -> None:
        if self.retention_ms == KEEP_FOREVER:
            return
        while not self._stop_event.is_set():
            self.run_once()
            self._stop_event.wait(self.check_interval_ms / 1000)
        if self._sink is not None:
            self._sink.close()

    def run_once(self) -> None:
        """One retention run now; a sink that cannot be reached is logged."""
        try:
            if self._sink is None:
                self._sink = self._open_writer()
            result = purge_expired_history(
                self._sink,
                self.retention_ms,
                self._clock(),
                stop=self._stop_event,
            )
        except SinkError as exc:
            if not self._failing:
                log.warning("history retention: %s (retrying every interval)", exc)
            self._failing = True
            return
        if self._failing:
            log.info("history retention: the sink is reachable again")
            self._failing = False
        if result.deleted:
            log.info(
                "history retention: deleted %d commits older than %d ms in %.2f s%s",
                result.deleted,
                self.retention_ms,
                result.seconds,
                "" if result.complete else " (more left for the next run)",
            )

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop after the current chunk and wait for the thread."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout_s)
