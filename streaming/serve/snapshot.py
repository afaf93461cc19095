"""Every group's partitions at once, for the pages that show all groups (``/metrics``, the
dashboard's index): one read of every committed offset (``Sink.all_offsets``), the log-end
offsets and sampled tables the server already holds, and each partition's lag in messages and
in seconds. A group's own page and Burrow's routes read one group instead (``lag_view``).

:class:`GroupEvaluator` keeps, in a thread of its own, what is too dear to compute per
request over thousands of groups: each group's Burrow status (its commit history) and the
summary rows of the index (sorted by lag in seconds); requests read its last pass.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Final

from connectors.sinks import SinkError
from connectors.sinks.log_end_samples import LogEndSample, TimeLag, lag_ms
from streaming.serve.lag_view import LagView

log = logging.getLogger(__name__)

#: Seconds between two passes of the evaluator (statuses and the index's rows).
DEFAULT_EVALUATION_INTERVAL_S = 30.0


@dataclass(frozen=True, slots=True)
class PartitionFigures:
    """One committed partition of a group with its lag (None where the log end is unknown)."""

    topic: str
    partition: int
    offset: int
    commit_timestamp_ms: int
    log_end: int | None
    lag: int | None
    time_lag: TimeLag | None


def snapshot(view: LagView, now_ms: int | None = None) -> dict[str, list[PartitionFigures]]:
    """Every group's partitions (by group, sorted by group, topic, partition) with their lag."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    offsets = view.sink.all_offsets()
    ends = view.log_end_map({topic for _, topic, _, _, _ in offsets})
    tables = view.log_ends.tables()
    none: tuple[list[LogEndSample], list[int]] = ([], [])
    groups: dict[str, list[PartitionFigures]] = {}
    current, parts = None, []
    for group, topic, partition, offset, committed_at in offsets:
        if group != current:  # rows come sorted by group
            current, parts = group, groups.setdefault(group, [])
        tp = (topic, partition)  # equal to (and hashed as) TopicPartition(topic, partition)
        end = ends.get(tp)  # type: ignore[call-overload]
        if end is not None and offset >= end:
            parts.append(
                PartitionFigures(topic, partition, offset, committed_at, end, 0, _CAUGHT_UP)
            )
            continue
        points, bisected = tables.get(tp, none)  # type: ignore[call-overload]
        parts.append(
            PartitionFigures(
                topic,
                partition,
                offset,
                committed_at,
                end,
                None if end is None else end - offset,
                lag_ms(points, offset, end, now, bisected),
            )
        )
    return groups


_CAUGHT_UP: Final = TimeLag(0)


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A row of the dashboard's index."""

    group_id: str
    partitions: int
    members: int | None
    total_lag: int
    #: The largest lag in seconds of the group's partitions; None when none is known.
    max_lag_seconds: float | None
    #: Whether that figure is only a lower bound.
    bounded: bool
    #: Burrow's status of the group at the evaluator's last pass ("" before its first).
    status: str


def summarise(
    view: LagView, figures: dict[str, list[PartitionFigures]], statuses: dict[str, str]
) -> list[GroupSummary]:
    """The index's rows, sorted by lag in seconds (largest first, unknown last), then group."""
    rows = []
    for listing in view.groups():
        parts = figures.get(listing.group_id, [])
        known = [p.time_lag for p in parts if p.time_lag is not None]
        worst = max(known, key=lambda t: t.lag_ms, default=None)
        rows.append(
            GroupSummary(
                listing.group_id,
                listing.partitions,
                listing.members,
                sum(p.lag or 0 for p in parts),
                None if worst is None else worst.lag_ms / 1000,
                worst is not None and worst.bounded,
                statuses.get(listing.group_id, ""),
            )
        )
    rows.sort(key=lambda r: (r.max_lag_seconds is None, -(r.max_lag_seconds or 0.0), r.group_id))
    return rows


@dataclass
class GroupEvaluator:
    """Every ``interval_s``: each group's Burrow status; every ``rows_interval_s``: the
    index's rows."""

    view: LagView
    interval_s: float = DEFAULT_EVALUATION_INTERVAL_S
    #: Seconds between two computations of the index's rows (lags change with every log-end
    #: reading, statuses more slowly): the server's log-end interval.
    rows_interval_s: float = 10.0
    statuses: dict[str, str] = field(default_factory=dict)
    summaries: list[GroupSummary] | None = None
    #: Seconds the last pass took (statuses and rows).
    last_pass_s: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def evaluate(self) -> None:
        """One pass, synchronously: every group's status, then the index's rows."""
        started = time.monotonic()
        statuses = {}
        for listing in self.view.groups():
            if self._stop.is_set():
                return
            statuses[listing.group_id] = self.view.status(listing.group_id).status.name
        self.statuses = statuses
        self.refresh_rows()
        self.last_pass_s = time.monotonic() - started

    def refresh_rows(self) -> None:
        """The index's rows from the current lags and the last statuses."""
        self.summaries = summarise(self.view, snapshot(self.view), self.statuses)

    def rows(self) -> list[GroupSummary]:
        """The index's rows of the last pass; computed now (without statuses) before the first."""
        found = self.summaries
        if found is None:
            found = summarise(self.view, snapshot(self.view), self.statuses)
        return found

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="group-evaluator", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        evaluated_at: float | None = None
        try:
            self.refresh_rows()  # the index's rows at once; statuses follow (a longer pass)
        except SinkError as exc:
            log.warning("groups not listed (retried soon): %s", exc)
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if evaluated_at is None or started - evaluated_at >= self.interval_s:
                    evaluated_at = started
                    self.evaluate()
                else:
                    self.refresh_rows()
            except SinkError as exc:
                log.warning("groups not evaluated (retried soon): %s", exc)
            wait = min(self.interval_s, self.rows_interval_s)
            self._stop.wait(max(0.0, wait - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
