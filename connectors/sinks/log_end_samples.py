"""Log-end offsets over time, per partition: the table that turns a lag in messages into a lag
in time. Pure functions, no I/O: the sink stores the points (``topic_log_end_samples``), the
readers (``serve``, the CLI) interpolate.

A point is a log-end offset and the span of time it was seen (``first_seen_ms`` to
``last_seen_ms``): an idle partition keeps one point. Past ``keep`` points :func:`thin` drops
the inner point whose neighbours are closest in time, so the table keeps covering all the time
since sampling began, coarser further back.

Time lag (:func:`lag_ms`), as kafka-lag-exporter defines it: ``now`` minus when the log end
passed the committed offset, interpolated between the points around it; 0 when caught up.
Below the oldest point a reader with the cluster reads the committed record's timestamp
(:class:`RecordTime`, :func:`record_lag`: exact); without it the lag is a lower bound (since
sampling began), flagged so a reader prints ">=". It is never extrapolated (how
kafka-lag-exporter printed "3+ years").
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: Points kept per partition. At a 10 s sampling interval the first 60 points cover 10 min;
#: after that thinning widens the steps, never the error at the newest points.
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
    """A committed offset's lag in time: ``lag_ms`` (>= 0); ``bounded`` when the offset is older
    than the table, so the true lag is at least ``lag_ms``."""

    lag_ms: int
    bounded: bool = False
    #: Bounded because the record at the committed offset is gone (deleted by retention or
    #: compaction), not because it was not read.
    gone: bool = False


@dataclass(frozen=True, slots=True)
class RecordTime:
    """The timestamp of the record at a committed offset, read from the partition (CreateTime or
    LogAppendTime, as the topic keeps them). ``gone``: that record was deleted and this is the
    timestamp of the first one kept after it, so the committed record is older still."""

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
    """``points`` (oldest first) with log end ``offset`` seen at ``at_ms``; and whether the
    table started over.

    The same offset as the newest point extends it (a flat segment); a larger one appends a
    point; a sample older than the newest point changes nothing (time only moves forward). A
    smaller offset than the newest (the topic was deleted and recreated, or truncated) starts
    the table over: the old points describe records that no longer exist.
    """
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
    """``points`` (oldest first) reduced to at most ``keep`` by dropping, one at a time, the
    inner point whose neighbours are closest in time (ties: the oldest), so the steps stay even
    and widen with age; the oldest and the newest point stay."""
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
    """When the log end passed ``offset`` (ms), and whether that is only a bound (``offset``
    below the oldest point: the oldest point's first time). None without points, or when
    ``offset`` is at or past the newest point (not produced yet as far as the table knows).
    ``offsets``: the points' offsets, when the caller keeps them (saves building the list)."""
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
    """The time lag of a group at ``committed`` on a partition whose log end is ``log_end``
    (the latest read) and whose table is ``points``: 0 when caught up (``committed >=
    log_end``), else ``now_ms`` minus the committed offset's time (:func:`offset_time_ms`),
    bounded below the oldest point. None when behind but nothing was sampled yet.
    ``offsets`` as for :func:`offset_time_ms`."""
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
    """The lag of a committed offset the table cannot place (``found`` bounded, or None: no
    point) from the timestamp of its record: ``now_ms`` minus it, exact; where the record is
    gone, the larger of the two lower bounds, still bounded."""
    lag = max(0, now_ms - record.timestamp_ms)
    if not record.gone:
        return TimeLag(lag)
    return TimeLag(max(lag, found.lag_ms if found else 0), bounded=True, gone=True)
