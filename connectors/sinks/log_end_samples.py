"""Log-end offsets over time per partition, which turn a lag in messages into a lag in time
(pure: the sink stores the points, the readers interpolate).

Time lag, as kafka-lag-exporter defines it: now minus when the log end passed the committed
offset, interpolated between the points around it, 0 when caught up. Below the oldest point it
comes from the committed record's timestamp (exact), or is a lower bound; never extrapolated.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: Points kept per partition (:func:`thin` widens the older steps, never the newest).
DEFAULT_KEEP: Final = 60


@dataclass(frozen=True, slots=True)
class LogEndSample:
    """One point of a partition's table: ``offset`` was its log end from ``first_seen_ms`` to
    ``last_seen_ms`` (equal for a point seen once)."""

    offset: int
    first_seen_ms: int
    last_seen_ms: int


@dataclass(frozen=True, slots=True)
class TimeLag:
    """A committed offset's lag in time; ``bounded``: at least ``lag_ms``."""

    lag_ms: int
    bounded: bool = False
    #: Bounded because the committed record is gone (retention, compaction).
    gone: bool = False


@dataclass(frozen=True, slots=True)
class RecordTime:
    """The timestamp of the record at a committed offset; ``gone``: that record was deleted and
    this is the first kept after it, so the committed one is older still."""

    timestamp_ms: int
    gone: bool = False

    @classmethod
    def read_at(cls, offset: int, found_offset: int, found_timestamp_ms: int) -> RecordTime | None:
        """The time of the record at committed ``offset``, from the first record read at or
        after it (``found_offset``, its timestamp): ``gone`` when that is a later one; None
        when the record carries no timestamp (-1: a v0 record)."""
        if found_timestamp_ms < 0:
            return None
        return cls(found_timestamp_ms, gone=found_offset > offset)


def merge_sample(
    points: Sequence[LogEndSample], offset: int, at_ms: int
) -> tuple[list[LogEndSample], bool]:
    """``points`` (oldest first) with log end ``offset`` seen at ``at_ms``, and whether the table
    started over: the newest offset again extends its point, a larger one appends one, an older
    sample changes nothing, a smaller offset (topic recreated or truncated) starts over."""
    if offset < 0:
        raise ValueError(f"log-end offset must be >= 0, got {offset}")
    if not points:
        return [LogEndSample(offset, at_ms, at_ms)], False
    newest = points[-1]
    if at_ms < newest.last_seen_ms:
        return list(points), False
    if offset == newest.offset:
        return [*points[:-1], LogEndSample(offset, newest.first_seen_ms, at_ms)], False
    if offset < newest.offset:
        return [LogEndSample(offset, at_ms, at_ms)], True
    return [*points, LogEndSample(offset, at_ms, at_ms)], False


def thin(points: Sequence[LogEndSample], keep: int = DEFAULT_KEEP) -> list[LogEndSample]:
    """``points`` (oldest first) cut to ``keep`` by dropping, one at a time, the inner point whose
    neighbours are closest in time (ties: the oldest): the steps widen with age."""
    if keep < 2:
        raise ValueError(f"points kept per partition must be >= 2, got {keep}")
    kept = list(points)
    while len(kept) > keep:
        spans = [
            kept[i + 1].first_seen_ms - kept[i - 1].last_seen_ms for i in range(1, len(kept) - 1)
        ]
        kept.pop(1 + spans.index(min(spans)))
    return kept


def offset_time_ms(
    points: Sequence[LogEndSample], offset: int, offsets: Sequence[int] | None = None
) -> tuple[int, bool] | None:
    """When the log end passed ``offset``, and whether that is only a bound (below the oldest
    point); None without points or at or past the newest. ``offsets``: the points' offsets, if
    the caller keeps them."""
    if not points or offset >= points[-1].offset:
        return None
    oldest = points[0]
    if offset < oldest.offset:
        return oldest.first_seen_ms, True
    if offsets is None:
        offsets = [p.offset for p in points]
    i = bisect.bisect_right(offsets, offset) - 1  # points[i].offset <= offset < points[i+1]
    low, high = points[i], points[i + 1]
    # The log end was low.offset until low.last_seen_ms and high.offset from high.first_seen_ms:
    # the records between were produced in that gap, evenly as far as anyone can tell.
    fraction = (offset - low.offset) / (high.offset - low.offset)
    return round(low.last_seen_ms + fraction * (high.first_seen_ms - low.last_seen_ms)), False


def lag_ms(
    points: Sequence[LogEndSample],
    committed: int,
    log_end: int | None,
    now_ms: int,
    offsets: Sequence[int] | None = None,
) -> TimeLag | None:
    """The time lag at ``committed`` of a partition whose latest log end is ``log_end``: 0 when
    caught up, else ``now_ms`` minus :func:`offset_time_ms`; None when behind with no point."""
    if log_end is not None and committed >= log_end:
        return TimeLag(0)
    if not points:
        return None  # behind, but nothing sampled says since when
    if log_end is not None and log_end > points[-1].offset:
        # The latest log end was read after the table's newest point: the records after that
        # point were produced between its last time and now.
        points = [*points, LogEndSample(log_end, now_ms, now_ms)]
        offsets = None if offsets is None else [*offsets, log_end]
    found = offset_time_ms(points, committed, offsets)
    if found is None:
        return TimeLag(0)  # at or past the newest offset known: caught up
    at, bounded = found
    return TimeLag(max(0, now_ms - at), bounded)


def record_lag(found: TimeLag | None, record: RecordTime, now_ms: int) -> TimeLag:
    """The lag of a committed offset the table cannot place (``found``), from its record's
    timestamp: exact, or where the record is gone the larger of the two lower bounds."""
    lag = max(0, now_ms - record.timestamp_ms)
    if not record.gone:
        return TimeLag(lag)
    return TimeLag(max(lag, found.lag_ms if found else 0), bounded=True, gone=True)
