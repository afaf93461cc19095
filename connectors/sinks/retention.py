"""History retention: commits older than ``history_retention_ms`` (-1: never, as Kafka's
``retention.ms``) leave the history table, and younger ones are thinned as they age
(``state.commit_history``), a chunk per short transaction, so a micro-batch never waits behind
more than one chunk, and a pause after each as long as it took."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from connectors.sinks.values import SinkError, now_ms
from state.commit_history import DEFAULT_HISTORY_RETENTION_MS as SEVEN_DAYS
from state.commit_history import TIERS, Tier, check_tiers, thinned_before

if TYPE_CHECKING:
    from connectors.sinks.base import Sink  # a sink's modules load SQLAlchemy: typing only

log = logging.getLogger(__name__)

#: Keep history forever.
KEEP_FOREVER: Final = -1
#: Seven days: the thinned history's last tier (one commit an hour), enough to put a group back
#: where it was at any time of the last week.
DEFAULT_HISTORY_RETENTION_MS: Final = SEVEN_DAYS
DEFAULT_CHECK_INTERVAL_MS: Final = 60_000
#: Rows per delete transaction: a micro-batch waits behind one at most (tens of ms of SQLite's
#: write lock on 2 cores, loaded).
DEFAULT_CHUNK_ROWS: Final = 500
#: The least pause between chunks; each pause is also at least as long as its chunk took, so
#: retention holds the sink at most half the time while it has work.
DEFAULT_PAUSE_S: Final = 0.02
#: The commit times one thinning read covers (whole buckets; at least one).
_WINDOW_MS: Final = 15 * 60 * 1000


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


def _pause_after(chunk_started: float, pause_s: float) -> None:
    """Let the micro-batches have the sink: at least ``pause_s``, and at least as long as the
    chunk started at ``chunk_started`` took."""
    time.sleep(max(pause_s, time.monotonic() - chunk_started))


def purge_expired_history(
    sink: Sink,
    retention_ms: int,
    now: int,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    pause_s: float = DEFAULT_PAUSE_S,
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
            chunk_started = time.monotonic()
            count = sink.purge_history(cutoff, chunk_rows)
            deleted += count
            if count < chunk_rows:
                complete = True
                break
            if time.monotonic() - started >= budget_s or (stop is not None and stop.is_set()):
                break
            _pause_after(chunk_started, pause_s)
    if deleted:
        sink.reclaim_space()
    return PurgeResult(deleted, time.monotonic() - started, complete)


@dataclass
class ThinningMarks:
    """How far each tier has been thinned, kept between passes by the thread that runs them:
    a pass looks only at commits timed after its tier's mark, or applied after ``batch_id``
    (a catch-up's commits, timed in ranges thinned already). New marks: a first pass looks at
    the whole history."""

    thinned_to: dict[int, int] = field(default_factory=dict)
    batch_id: int = -1


@dataclass(frozen=True, slots=True)
class ThinResult:
    """What one thinning pass did."""

    deleted: int
    seconds: float
    #: False when the pass stopped at its time budget (the next pass goes on from its marks).
    complete: bool


def thin_history(
    sink: Sink,
    now: int,
    marks: ThinningMarks,
    *,
    tiers: Sequence[Tier] = TIERS,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    pause_s: float = DEFAULT_PAUSE_S,
    budget_s: float = 30.0,
    stop: threading.Event | None = None,
) -> ThinResult:
    """Thin the history as of ``now`` (``state.commit_history``): per tier, coarsest first,
    the commits in its range that a later one of their bucket supersedes are deleted,
    ``chunk_rows`` per fenced transaction, until none is left, ``budget_s`` has passed or
    ``stop`` is set. ``marks`` advance as ranges are done."""
    check_tiers(tiers)
    started = time.monotonic()
    deleted = 0
    # Commits applied since the last pass and timed before a tier's mark (a catch-up's; on a
    # first pass every commit) take the mark back to them.
    oldest, newest_batch = sink.history_since_batch(marks.batch_id)
    if newest_batch is not None:
        marks.batch_id = newest_batch
    if oldest is not None:
        for i, tier in enumerate(tiers):
            back = oldest - oldest % tier.spacing_ms
            marks.thinned_to[i] = min(marks.thinned_to.get(i, back), back)
    ends = [thinned_before(tier, now) for tier in tiers]

    def out_of_time() -> bool:
        return time.monotonic() - started >= budget_s or (stop is not None and stop.is_set())

    for i in reversed(range(len(tiers))):
        tier, before = tiers[i], ends[i]
        # The coarser tier takes what is older than its end; buckets nest, so its kept
        # commits are the last of their finer buckets too.
        floor = ends[i + 1] if i + 1 < len(tiers) else 0
        since = max(floor, marks.thinned_to.get(i, before))
        # Whole buckets at a time, a window per read, so a long range (a first pass) moves
        # its mark on as it goes and a pass cut short by its budget is not started over.
        step = tier.spacing_ms * max(1, _WINDOW_MS // tier.spacing_ms)
        while since < before:
            end = min(before, since - since % tier.spacing_ms + step)
            # Each read goes on from the last row deleted (rows are read in commit time), not
            # from the window's start again past the rows kept.
            read_from = since
            while True:
                chunk_started = time.monotonic()
                rows = sink.thinnable_history(tier.spacing_ms, read_from, end, chunk_rows)
                deleted += sink.delete_history([(batch_id, seq) for batch_id, seq, _ in rows])
                if len(rows) < chunk_rows:
                    break
                if out_of_time():
                    return ThinResult(deleted, time.monotonic() - started, False)
                read_from = rows[-1][2]
                _pause_after(chunk_started, pause_s)
            marks.thinned_to[i] = since = end
            if since < before and out_of_time():
                return ThinResult(deleted, time.monotonic() - started, False)
        marks.thinned_to[i] = max(since, before)
    return ThinResult(deleted, time.monotonic() - started, True)


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
        self._marks = ThinningMarks()

    def run(self) -> None:
        # Keeping history forever still thins it: one commit an hour past the last tier.
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
            now = self._clock()
            result = purge_expired_history(
                self._sink, self.retention_ms, now, stop=self._stop_event
            )
            thinned = thin_history(self._sink, now, self._marks, stop=self._stop_event)
        except SinkError as exc:
            if not self._failing:
                log.warning("history retention: %s (retrying every interval)", exc)
            self._failing = True
            return
        if self._failing:
            log.info("history retention: the sink is reachable again")
            self._failing = False
        if thinned.deleted:
            log.info(
                "history thinning: deleted %d commits superseded in their bucket in %.2f s%s",
                thinned.deleted,
                thinned.seconds,
                "" if thinned.complete else " (more left for the next run)",
            )
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
