"""Log-end offsets over time: the pure table (merge, thinning, interpolation and its bound) and
its storage in every sink backend (``topic_log_end_samples``)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

import pytest

from connectors.sinks import Sink
from connectors.sinks.log_end_samples import (
    LogEndSample,
    RecordTime,
    TimeLag,
    lag_ms,
    merge_sample,
    offset_time_ms,
    record_lag,
    thin,
)
from state.coordinator.model import TopicPartition


def table(*points: tuple[int, int, int]) -> list[LogEndSample]:
    return [LogEndSample(*p) for p in points]


# --- merging and thinning ---------------------------------------------------------------------


def test_a_repeated_offset_extends_the_newest_point_into_a_flat_segment() -> None:
    points: list[LogEndSample] = []
    for at, offset in [(0, 10), (10, 10), (20, 10), (30, 15), (40, 15)]:
        points, _ = merge_sample(points, offset, at)
    assert points == table((10, 0, 20), (15, 30, 40))


def test_an_older_sample_changes_nothing_and_a_smaller_offset_starts_over() -> None:
    points = table((10, 0, 20), (15, 30, 40))
    assert merge_sample(points, 20, 35) == (points, False)
    assert merge_sample(points, 3, 50) == (table((3, 50, 50)), True)
    with pytest.raises(ValueError, match="log-end offset"):
        merge_sample(points, -1, 50)


def test_thinning_keeps_the_ends_and_evens_the_steps() -> None:
    points = table(*[(i * 100, i * 10, i * 10) for i in range(200)])
    kept = thin(points, 60)
    assert len(kept) == 60
    assert kept[0] == points[0] and kept[-1] == points[-1]
    gaps = [b.first_seen_ms - a.last_seen_ms for a, b in pairwise(kept)]
    # 1990 ms over 59 steps: each 20 or 40 ms (the evenest a 10 ms grid allows).
    assert max(gaps) <= 2 * min(gaps) and sum(gaps) == 1990
    assert thin(points[:5], 60) == points[:5]
    with pytest.raises(ValueError, match=">= 2"):
        thin(points, 1)


# --- interpolation ----------------------------------------------------------------------------


def test_an_offset_between_two_points_is_interpolated_from_the_flat_segments_ends() -> None:
    # The log end stood at 100 until t=1000, then 200 from t=2000: 150 was written at 1500.
    points = table((100, 0, 1000), (200, 2000, 3000))
    assert offset_time_ms(points, 150) == (1500, False)
    assert offset_time_ms(points, 100) == (1000, False)
    assert lag_ms(points, 150, 200, now_ms=10_000) == TimeLag(8500)


def test_caught_up_is_zero() -> None:
    points = table((100, 0, 1000), (200, 2000, 3000))
    assert lag_ms(points, 200, 200, now_ms=10_000) == TimeLag(0)
    assert lag_ms(points, 250, 200, now_ms=10_000) == TimeLag(0)


def test_before_the_oldest_point_the_lag_is_bounded_by_the_tables_age() -> None:
    # A replay from offset 0 of a topic sampled since t=5000: at least now - 5000, flagged.
    points = table((1_000_000, 5000, 6000), (1_000_500, 7000, 7000))
    assert lag_ms(points, 0, 1_000_500, now_ms=65_000) == TimeLag(60_000, bounded=True)
    # Never an extrapolation: the figure grows with the wall clock only.
    assert lag_ms(points, 0, 1_000_500, now_ms=3_600_000) == TimeLag(3_595_000, bounded=True)


def test_below_the_table_the_records_timestamp_times_the_lag_a_bound_only_if_it_is_gone() -> None:
    bound = TimeLag(60_000, bounded=True)  # sampling began a minute ago
    # The record at the committed offset, written at t=5000: exact, not the bound.
    assert record_lag(bound, RecordTime(5000), now_ms=125_000) == TimeLag(120_000)
    assert record_lag(None, RecordTime(5000), now_ms=125_000) == TimeLag(120_000)
    # Deleted: the first record kept bounds it, unless the table's bound is larger.
    kept = RecordTime(95_000, gone=True)
    assert record_lag(bound, kept, now_ms=125_000) == TimeLag(60_000, bounded=True, gone=True)
    assert record_lag(None, kept, now_ms=125_000) == TimeLag(30_000, bounded=True, gone=True)


def test_a_log_end_past_the_newest_point_extends_the_table_to_now() -> None:
    points = table((100, 0, 1000))
    # Read 300 now (t=3000): records 100..299 were written between 1000 and 3000.
    assert lag_ms(points, 200, 300, now_ms=3000) == TimeLag(1000)
    # Behind with nothing sampled: unknown, not a guess.
    assert lag_ms([], 5, 10, now_ms=3000) is None
    assert lag_ms([], 5, None, now_ms=3000) is None
    assert lag_ms([], 10, 10, now_ms=3000) == TimeLag(0)


# --- the sink's table -------------------------------------------------------------------------


def test_samples_are_merged_thinned_and_read_back(make_sink: Callable[..., Sink]) -> None:
    writer = make_sink()
    for i in range(10):
        writer.record_log_end_samples({("t\x00", 0): 100 + 10 * i, ("t\x00", 1): 5}, 1000 * i, 4)
    writer.record_log_end_samples({("t\x00", 0): 100}, 500)  # older than the newest: ignored
    reader = make_sink(read_only=True)
    found = reader.log_end_samples()
    flat = found[TopicPartition("t\x00", 1)]
    assert flat == table((5, 0, 9000))
    busy = found[TopicPartition("t\x00", 0)]
    assert len(busy) == 4
    assert busy[0] == LogEndSample(100, 0, 0) and busy[-1] == LogEndSample(190, 9000, 9000)
    assert reader.log_end_samples(["other"]) == {}


def test_log_end_offsets_are_sampled_and_survive_a_reopen(make_sink: Callable[..., Sink]) -> None:
    writer = make_sink()
    writer.write_log_end_offsets({("a", 0): 7})
    writer.write_log_end_offsets({("a", 0): 9})
    writer.close()
    points = make_sink(read_only=True).log_end_samples()[TopicPartition("a", 0)]
    assert [p.offset for p in points] == [7, 9]
    assert points[0].first_seen_ms <= points[1].first_seen_ms


def test_a_smaller_offset_starts_the_partition_over_and_stale_samples_are_ignored(
    make_sink: Callable[..., Sink],
) -> None:
    sink = make_sink()
    sink.record_log_end_samples({("t", 0): 100}, 1000)
    sink.record_log_end_samples({("t", 0): 200}, 2000)
    sink.record_log_end_samples({("t", 0): 50}, 1500)  # older than the newest point: ignored
    assert [p.offset for p in sink.log_end_samples()[TopicPartition("t", 0)]] == [100, 200]
    sink.record_log_end_samples({("t", 0): 7}, 3000)  # the topic was recreated
    assert sink.log_end_samples()[TopicPartition("t", 0)] == table((7, 3000, 3000))
    assert [(tp, p.offset) for tp, _, p in sink.log_end_samples_since(2500)] == [("t", 7)]


def test_every_offset_in_one_read_and_a_group_probe(make_sink: Callable[..., Sink]) -> None:
    from connectors.sinks import BatchProgress
    from connectors.sinks.reads import OFFSET_COLUMNS_SCHEMA
    from tests.connectors.sinks.record_frames import commit, frame, group_metadata

    sink = make_sink()
    records = frame(
        commit("g\x00", "t", 1, 5, commit_timestamp_ms=10),
        commit("g\x00", "t", 0, 4, commit_timestamp_ms=11),
        commit("a", "u", 0, 9, commit_timestamp_ms=12),
        group_metadata("empty", generation=1, members=0),
    )
    sink.write_batch(0, records, BatchProgress(batch_id=0))
    assert sink.all_offsets() == [
        ("a", "u", 0, 9, 12),
        ("g\x00", "t", 0, 4, 11),
        ("g\x00", "t", 1, 5, 10),
    ]
    assert sink.offset_columns().to_pylist() == [
        dict(zip(OFFSET_COLUMNS_SCHEMA.names, row, strict=True)) for row in sink.all_offsets()
    ]
    assert sink.group_exists("g\x00") and sink.group_exists("empty")
    assert not sink.group_exists("nobody")
