"""Every group's lags computed column-wise (``streaming.serve.lag_frame``): each row's lag in
messages and in seconds is what ``lag_ms`` gives its partition one at a time (the figure a
group's own page shows), over drawn sample tables, log ends and committed offsets; and the
index's rows (``snapshot.summarise``) sum and pick the largest as they did per group."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.sinks import GroupListing
from connectors.sinks.log_end_samples import LogEndSample, lag_ms
from connectors.sinks.reads import OFFSET_COLUMNS_SCHEMA
from state.coordinator.model import TopicPartition
from streaming.serve.lag_frame import build_frame
from streaming.serve.log_end_cache import SampleColumns
from streaming.serve.snapshot import summarise

NOW = 1_700_000_000_000
PARTITIONS = [("a", 0), ("a", 1), ("b", 0), ("c", 2)]


@st.composite
def _points(draw: st.DrawFn) -> list[LogEndSample]:
    """A partition's table: offsets rising, each seen over a span, spans in time order."""
    offsets = sorted(draw(st.sets(st.integers(0, 10_000), max_size=6)))
    points, at = [], NOW - draw(st.integers(0, 10**8))
    for offset in offsets:
        first = at + draw(st.integers(0, 10**6))
        last = first + draw(st.integers(0, 10**6))
        points.append(LogEndSample(offset, first, last))
        at = last
    return points


@st.composite
def _case(draw: st.DrawFn) -> tuple[pa.Table, dict, dict]:
    tables = {tp: draw(_points()) for tp in PARTITIONS}
    ends = {tp: end for tp in PARTITIONS if (end := draw(st.none() | st.integers(0, 12_000)))}
    rows = []
    for group in sorted(draw(st.sets(st.sampled_from(["g1", "g2", "g3"]), min_size=1))):
        for topic, partition in sorted(draw(st.sets(st.sampled_from(PARTITIONS), min_size=1))):
            rows.append((group, topic, partition, draw(st.integers(0, 12_000)), NOW - 5))
    columns = list(zip(*rows, strict=True))
    offsets = pa.table(
        [pa.array(c, f.type) for c, f in zip(columns, OFFSET_COLUMNS_SCHEMA, strict=True)],
        schema=OFFSET_COLUMNS_SCHEMA,
    )
    return offsets, ends, tables


@settings(deadline=None, max_examples=300)
@given(_case())
def test_each_rows_lag_is_lag_ms_of_its_partition(case: tuple[pa.Table, dict, dict]) -> None:
    offsets, ends, tables = case
    samples = SampleColumns.of({TopicPartition(*tp): points for tp, points in tables.items()})
    frame = build_frame(offsets, ends, samples, [], NOW)
    for i, row in enumerate(offsets.to_pylist()):
        tp = (row["topic"], row["partition"])
        end = ends.get(tp)
        expected = lag_ms(tables[tp], row["offset"], end, NOW)
        assert frame.has_end[i] == (end is not None)
        if end is not None:
            assert frame.lag[i] == max(0, end - row["offset"])
        assert frame.has_time[i] == (expected is not None)
        if expected is not None:
            assert (int(frame.lag_ms[i]), bool(frame.bounded[i])) == (
                expected.lag_ms,
                expected.bounded,
            )


def test_the_index_rows_sum_and_take_the_first_largest() -> None:
    rows = [("g1", "t", 0, 5, 0), ("g1", "t", 1, 0, 0), ("g2", "t", 0, 9, 0)]
    columns = list(zip(*rows, strict=True))
    offsets = pa.table(
        [pa.array(c, f.type) for c, f in zip(columns, OFFSET_COLUMNS_SCHEMA, strict=True)],
        schema=OFFSET_COLUMNS_SCHEMA,
    )
    # t-0 sampled only from offset 6: g1 (at 5) is older than the table, a bound; t-1 is not
    # sampled at all; g2 is caught up.
    samples = SampleColumns.of({TopicPartition("t", 0): [LogEndSample(6, NOW - 60_000, NOW)]})
    listings = [GroupListing(g, 1, None, None) for g in ("g0", "g1", "g2")]
    frame = build_frame(offsets, {("t", 0): 9, ("t", 1): 4}, samples, listings, NOW)
    assert list(frame.lag) == [4, 4, 0]
    summaries = summarise(frame, {"g1": "WARN"})
    assert [
        (s.group_id, s.total_lag, s.max_lag_seconds, s.bounded, s.status) for s in summaries
    ] == [
        ("g1", 8, 60.0, True, "WARN"),
        ("g2", 0, 0.0, False, ""),
        ("g0", 0, None, False, ""),
    ]
    assert np.array_equal(frame.group_starts(), [0, 2, 3])
