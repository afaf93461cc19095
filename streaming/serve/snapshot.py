"""What the pages over every group show, kept by a thread (:class:`GroupEvaluator`): each group's
Burrow status (too dear per request) and the dashboard index's rows."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from connectors.sinks import SinkError
from streaming.serve.lag_frame import LagFrame
from streaming.serve.lag_view import LagView

log = logging.getLogger(__name__)

#: The share of the time a pass over every group's status runs (it holds the interpreter).
EVALUATION_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A row of the dashboard's index."""

    group_id: str
    partitions: int
    #: Members of its generation: 0 for a group that never joined (standalone commits, as
    #: Kafka counts an Empty group's), as kafka_consumergroup_members says.
    members: int
    total_lag: int
    #: The largest lag in seconds of the group's partitions; None when none is known.
    max_lag_seconds: float | None
    #: Whether that figure is only a lower bound.
    bounded: bool
    #: Burrow's status of the group at the evaluator's last pass ("" before its first).
    status: str
    #: Why: the status's rule and since when (``GroupStatus.reason``; "" before the first pass).
    reason: str = ""


def summarise(
    frame: LagFrame, statuses: dict[str, str], reasons: dict[str, str] | None = None
) -> list[GroupSummary]:
    """The index's rows, by lag in seconds (largest first, unknown last), then group."""
    starts = frame.group_starts()
    lag = np.where(frame.has_end, frame.lag, 0)
    total = np.add.reduceat(lag, starts[:-1]) if frame.rows else np.zeros(0, np.int64)
    worst = np.where(frame.has_time, frame.lag_ms, -1)
    figures: dict[str, tuple[int, float | None, bool]] = {}
    for k, group in enumerate(frame.groups.to_pylist()):
        rows = worst[starts[k] : starts[k + 1]]
        top = int(rows.argmax())
        known = rows[top] >= 0
        figures[group] = (
            int(total[k]),
            float(rows[top]) / 1000 if known else None,
            bool(known and frame.bounded[starts[k] + top]),
        )
    rows = []
    for listing in frame.listings:
        lag, seconds, bounded = figures.get(listing.group_id, (0, None, False))
        rows.append(
            GroupSummary(
                listing.group_id,
                listing.partitions,
                listing.members or 0,
                lag,
                seconds,
                bounded,
                statuses.get(listing.group_id, ""),
                (reasons or {}).get(listing.group_id, ""),
            )
        )
    rows.sort(key=lambda r: (r.max_lag_seconds is None, -(r.max_lag_seconds or 0.0), r.group_id))
    return rows


@dataclass
class GroupEvaluator:
    """Every ``interval_s``: each group's Burrow status; every ``rows_interval_s``: the
    index's rows (from ``frames``)."""

    view: LagView
    #: Every group's lags now (or as recently as the caller allows).
    frames: Callable[[], LagFrame]
    interval_s: float
    #: Seconds between two computations of the index's rows: the server's log-end interval.
    rows_interval_s: float
    statuses: dict[str, str] = field(default_factory=dict)
    #: Each group's ``GroupStatus.reason`` at the last pass.
    reasons: dict[str, str] = field(default_factory=dict)
    summaries: list[GroupSummary] | None = None
    #: Seconds the last pass took (statuses and rows).
    last_pass_s: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def evaluate(self) -> None:
        """One pass, synchronously: every group's status, then the index's rows."""
        started = time.monotonic()
        statuses, reasons = {}, {}
        for group_id, status in self.view.statuses(between=self._pause):
            statuses[group_id] = status.status.name
            reasons[group_id] = status.reason
        if self._stop.is_set():
            return
        self.statuses, self.reasons = statuses, reasons
        self.refresh_rows()
        self.last_pass_s = time.monotonic() - started

    def _pause(self, took_s: float) -> bool:
        """Between two chunks of a pass: leave the interpreter to the requests; False once
        stopped."""
        return not self._stop.wait(took_s * (1 - EVALUATION_SHARE) / EVALUATION_SHARE)

    def refresh_rows(self) -> None:
        """The index's rows from the current lags and the last statuses."""
        self.summaries = summarise(self.frames(), self.statuses, self.reasons)

    def rows(self) -> list[GroupSummary]:
        """The index's rows of the last pass; computed now (without statuses) before the first."""
        if self.summaries is None:
            return summarise(self.frames(), self.statuses, self.reasons)
        return self.summaries

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
