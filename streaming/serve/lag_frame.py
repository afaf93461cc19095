"""Every group's committed partitions with their lag, as columns: what the pages over all
groups (``/metrics``, the dashboard's index) read. The lag in seconds is ``lag_ms``'s arithmetic
over whole arrays: the figures a group's own page (``lag_view``) shows, to the millisecond."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.sinks import GroupListing
from connectors.sinks.log_end_samples import TimeLag, record_lag
from streaming.serve.lag_view import LagView
from streaming.serve.log_end_cache import LogEndCache, SampleColumns


@dataclass(frozen=True, eq=False)
class LagFrame:
    """Every committed partition, one row each, sorted by group, topic and partition.

    ``groups`` and ``topics`` hold each distinct name once (``group_index`` and
    ``topic_index`` point into them, per row); a row's lag is unknown where ``has_end`` is
    False, its lag in seconds where ``has_time`` is False. ``listings`` are every group of
    the sink (``Sink.list_groups``), ``made_ms`` when the lags were computed.
    """

    groups: pa.Array
    group_index: np.ndarray
    topics: pa.Array
    topic_index: np.ndarray
    partition: np.ndarray
    offset: np.ndarray
    commit_timestamp_ms: np.ndarray
    log_end: np.ndarray
    has_end: np.ndarray
    lag: np.ndarray
    lag_ms: np.ndarray
    has_time: np.ndarray
    bounded: np.ndarray
    listings: list[GroupListing]
    made_ms: int

    @property
    def rows(self) -> int:
        return len(self.offset)

    def group_starts(self) -> np.ndarray:
        """The first row of each group (rows are sorted by group), and the row count last."""
        changes = np.flatnonzero(np.diff(self.group_index)) + 1
        return np.concatenate(([0], changes, [self.rows])).astype(np.int64)


def _codes(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The distinct values of a string column, first seen first, and each row's index."""
    encoded = pc.dictionary_encode(values)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    return encoded.dictionary, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def interpolate(
    samples: SampleColumns,
    start: np.ndarray,
    stop: np.ndarray,
    committed: np.ndarray,
    log_end: np.ndarray,
    has_end: np.ndarray,
    now_ms: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lag_ms`` of every row at once: (lag ms, known, bounded). A row's partition has the
    points ``start`` to ``stop`` of ``samples`` (``start == stop``: none)."""
    rows = len(committed)
    lag = np.zeros(rows, np.int64)
    known = np.ones(rows, bool)
    bounded = np.zeros(rows, bool)
    caught_up = has_end & (committed >= log_end)
    sampled = stop > start
    known[~caught_up & ~sampled] = False  # behind, and nothing sampled says since when
    work = np.flatnonzero(~caught_up & sampled)
    if not len(work):
        return lag, known, bounded
    c, lo, hi = committed[work], start[work], stop[work]
    newest = samples.offsets[hi - 1]
    # A log end read after the table's newest point: a point (log end, now) after it.
    virtual = has_end[work] & (log_end[work] > newest)
    top = np.where(virtual, log_end[work], newest)
    inside = c < top  # else at or past the newest offset known: caught up (0)
    below = inside & (c < samples.offsets[lo])  # older than the table: the bound
    at_ms = np.zeros(len(work), np.float64)
    at_ms[below] = samples.first_seen_ms[lo[below]]
    tail = inside & ~below & (c >= newest)  # between the newest point and the virtual one
    last = samples.last_seen_ms[hi - 1]
    span = np.where(tail, top - newest, 1)
    at_ms[tail] = _between(last[tail], (c[tail] - newest[tail]) / span[tail], now_ms - last[tail])
    mid = np.flatnonzero(inside & ~below & ~tail)
    if len(mid):
        i = _bisect_right(samples.offsets, lo[mid], hi[mid], c[mid]) - 1
        low, high = samples.offsets[i], samples.offsets[i + 1]
        low_last, high_first = samples.last_seen_ms[i], samples.first_seen_ms[i + 1]
        at_ms[mid] = _between(low_last, (c[mid] - low) / (high - low), high_first - low_last)
    lags = np.where(inside, np.maximum(0, now_ms - np.rint(at_ms).astype(np.int64)), 0)
    lag[work] = lags
    bounded[work] = below
    return lag, known, bounded


def _between(low_last: np.ndarray, fraction: np.ndarray, gap: np.ndarray) -> np.ndarray:
    """``low_last + fraction * gap`` in floating point, as ``offset_time_ms`` computes it."""
    return low_last.astype(np.float64) + fraction * np.asarray(gap, np.float64)


def _bisect_right(
    values: np.ndarray, lo: np.ndarray, hi: np.ndarray, wanted: np.ndarray
) -> np.ndarray:
    """``bisect_right(values, wanted[k], lo[k], hi[k])`` for every ``k`` at once (each slice
    sorted)."""
    lo, hi = lo.copy(), hi.copy()
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) // 2
        right = open_ & (values[np.where(open_, mid, 0)] <= wanted)
        lo = np.where(right, mid + 1, lo)
        hi = np.where(open_ & ~right, mid, hi)


def build_frame(
    offsets: pa.Table,
    log_ends: Mapping[tuple[str, int], int],
    samples: SampleColumns,
    listings: list[GroupListing],
    now_ms: int,
) -> LagFrame:
    """The frame of ``offsets`` (``Sink.offset_columns``) against the latest log-end offset of
    each (topic, partition) and its sampled points, at ``now_ms``."""
    groups, group_index = _codes(offsets.column("group_id"))
    topics, topic_index = _codes(offsets.column("topic"))
    partition = offsets.column("partition").to_numpy().astype(np.int64)
    committed = offsets.column("offset").to_numpy().astype(np.int64)
    width = int(partition.max()) + 1 if len(partition) else 1
    tps, tp_index = np.unique(topic_index * width + partition, return_inverse=True)
    names = topics.to_pylist()
    tp_end = np.zeros(len(tps), np.int64)
    tp_has_end = np.zeros(len(tps), bool)
    tp_start = np.zeros(len(tps), np.int64)
    tp_stop = np.zeros(len(tps), np.int64)
    for k, code in enumerate(tps.tolist()):
        key = (names[code // width], code % width)
        end = log_ends.get(key)
        if end is not None:
            tp_end[k], tp_has_end[k] = end, True
        tp_start[k], tp_stop[k] = samples.bounds.get(key, (0, 0))
    log_end, has_end = tp_end[tp_index], tp_has_end[tp_index]
    lag_ms, has_time, bounded = interpolate(
        samples, tp_start[tp_index], tp_stop[tp_index], committed, log_end, has_end, now_ms
    )
    return LagFrame(
        groups=groups,
        group_index=group_index,
        topics=topics,
        topic_index=topic_index,
        partition=partition,
        offset=committed,
        commit_timestamp_ms=offsets.column("commit_timestamp_ms").to_numpy().astype(np.int64),
        log_end=log_end,
        has_end=has_end,
        lag=np.where(has_end, np.maximum(0, log_end - committed), 0),
        lag_ms=lag_ms,
        has_time=has_time,
        bounded=bounded,
        listings=listings,
        made_ms=now_ms,
    )


def with_record_times(frame: LagFrame, log_ends: LogEndCache) -> LagFrame:
    """``frame`` with the rows its table cannot place (behind, and below the oldest point or
    with none) timed by the record at their committed offset (:func:`record_lag`), in place:
    every such row's offset is what ``log_ends`` reads and keeps (``record_times``)."""
    rows = np.flatnonzero(
        (frame.bounded | ~frame.has_time) & frame.has_end & (frame.offset < frame.log_end)
    )
    topics = frame.topics.to_pylist()
    keys = [
        (topics[frame.topic_index[r]], int(frame.partition[r]), int(frame.offset[r]))
        for r in rows.tolist()
    ]
    found = log_ends.record_times(keys, every=True)
    for r, key in zip(rows.tolist(), keys, strict=True):
        if (record := found.get(key)) is not None:
            before = TimeLag(int(frame.lag_ms[r]), True) if frame.has_time[r] else None
            lag = record_lag(before, record, frame.made_ms)
            frame.lag_ms[r], frame.has_time[r], frame.bounded[r] = lag.lag_ms, True, lag.bounded
    return frame


def frame_of(view: LagView, now_ms: int | None = None) -> LagFrame:
    """Every group's partitions as the view sees them now (one query for the offsets, one
    for the groups)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    offsets = view.sink.offset_columns()
    topics = set(pc.unique(offsets.column("topic")).to_pylist())
    ends = {(tp.topic, tp.partition): end for tp, end in view.log_end_map(topics).items()}
    frame = build_frame(offsets, ends, view.log_ends.columns(), view.sink.list_groups(), now)
    return with_record_times(frame, view.log_ends)
