"""The lag part of /metrics, written as text: parsed back by prometheus-client's parser, with
kafka_exporter's and kafka-lag-exporter's names, label values escaped, and kminion-style topic
granularity (no per-partition series); and byte for byte the text the per-line writer it
replaced made (``reference_exposition``), over drawn groups, names and lags."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from connectors.sinks import GroupListing
from connectors.sinks.log_end_samples import TimeLag
from streaming.serve.exposition import Granularity, render
from tests.streaming.serve.reference_exposition import (
    PartitionFigures,
    frame_of_figures,
    lag_text,
)

GROUP = 'odd "group"\\name'
FIGURES = {
    GROUP: [
        PartitionFigures("t", 0, 10, 5_000, 30, 20, TimeLag(12_500)),
        PartitionFigures("t", 1, 7, 6_000, 7, 0, TimeLag(0)),
        PartitionFigures("u", 0, 0, -1, 900, 900, TimeLag(600_000, bounded=True)),
    ]
}
LISTINGS = [GroupListing(GROUP, 3, 2, 4)]


def _text(
    figures: dict[str, list[PartitionFigures]],
    listings: list[GroupListing],
    statuses: dict[str, str],
    cluster: str,
    granularity: Granularity = "partition",
) -> str:
    return render(frame_of_figures(figures, listings), statuses, cluster, granularity).decode()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_per_partition_series_under_both_exporters_names() -> None:
    samples = _samples(_text(FIGURES, LISTINGS, {GROUP: "ERR"}, "local"))
    kle = {"cluster_name": "local", "group": GROUP}
    part = {**kle, "topic": "t", "partition": "0"}
    assert _value(samples, "kafka_consumergroup_group_lag_seconds", **part) == 12.5
    assert _value(samples, "kafka_consumergroup_group_lag", **part) == 20
    assert _value(samples, "kafka_consumergroup_group_offset", **part) == 10
    assert _value(samples, "consumer_offsets_group_last_commit_timestamp_seconds", **part) == 5
    exporter = {"consumergroup": GROUP, "topic": "t", "partition": "0"}
    assert _value(samples, "kafka_consumergroup_lag", **exporter) == 20
    assert _value(samples, "kafka_consumergroup_current_offset", **exporter) == 10
    bounded = {**kle, "topic": "u", "partition": "0"}
    assert _value(samples, "consumer_offsets_group_lag_seconds_bounded", **bounded) == 1
    assert ("consumer_offsets_group_lag_seconds_bounded", tuple(sorted(part.items()))) not in (
        samples
    )
    assert _value(samples, "kafka_consumergroup_group_max_lag_seconds", **kle) == 600
    assert _value(samples, "kafka_consumergroup_group_max_lag", **kle) == 900
    assert _value(samples, "kafka_consumergroup_group_sum_lag", **kle) == 920
    assert _value(samples, "consumer_offsets_group_status", **kle, status="ERR") == 1
    assert _value(samples, "kafka_consumergroup_members", consumergroup=GROUP) == 4
    assert _value(samples, "kafka_consumergroup_lag_sum", consumergroup=GROUP, topic="t") == 20
    assert (
        _value(
            samples, "kafka_partition_latest_offset", cluster_name="local", topic="u", partition="0"
        )
        == 900
    )


def test_topic_granularity_has_no_partition_series() -> None:
    samples = _samples(_text(FIGURES, LISTINGS, {}, "local", "topic"))
    names = {name for name, _ in samples}
    assert not names & {
        "kafka_consumergroup_group_lag_seconds",
        "kafka_consumergroup_lag",
        "kafka_consumergroup_current_offset",
    }
    kle = {"cluster_name": "local", "group": GROUP}
    assert _value(samples, "kafka_consumergroup_group_topic_sum_lag", **kle, topic="u") == 900
    assert _value(samples, "consumer_offsets_group_topic_max_lag_seconds", **kle, topic="t") == 12.5
    assert _value(samples, "kafka_consumergroup_group_max_lag_seconds", **kle) == 600
    with pytest.raises(ValueError, match="granularity"):
        _text(FIGURES, LISTINGS, {}, "local", "member")  # type: ignore[arg-type]


_NAMES = st.text(alphabet='ab\\"\n.é', min_size=1, max_size=4)
_MS = st.integers(0, 2**45)


@st.composite
def _figures(draw: st.DrawFn) -> tuple[dict[str, list[PartitionFigures]], list[GroupListing]]:
    """Groups (sorted, as the sink lists them) with partitions of a few topics; a partition's
    log end is the same in every group, as the server reads it."""
    groups = sorted(draw(st.sets(_NAMES, max_size=5)))
    topics = sorted(draw(st.sets(st.sampled_from(["a", "b.c", "d-e", "z"]), min_size=1)))
    ends = {(t, p): draw(st.none() | st.integers(0, 10**12)) for t in topics for p in range(3)}
    figures = {}
    for group in groups:
        keys = sorted(draw(st.sets(st.sampled_from(sorted(ends)), min_size=1)))
        parts = []
        for topic, partition in keys:
            offset = draw(st.integers(0, 10**12))
            end = ends[(topic, partition)]
            time_lag = draw(st.none() | st.builds(TimeLag, _MS, st.booleans()))
            lag = None if end is None else max(0, end - offset)
            parts.append(
                PartitionFigures(
                    topic, partition, offset, draw(st.integers(-1, 2**45)), end, lag, time_lag
                )
            )
        figures[group] = parts
    listed = sorted(set(groups) | draw(st.sets(_NAMES, max_size=2)))
    listings = [GroupListing(g, 1, None, draw(st.none() | st.integers(0, 9))) for g in listed]
    return figures, listings


@settings(deadline=None, max_examples=200)
@given(
    _figures(),
    st.dictionaries(_NAMES, st.sampled_from(["OK", "WARN", "ERR", ""])),
    _NAMES,
    st.sampled_from(["partition", "topic"]),
)
def test_the_same_text_as_the_per_line_writer(
    drawn: tuple[dict[str, list[PartitionFigures]], list[GroupListing]],
    statuses: dict[str, str],
    cluster: str,
    granularity: Granularity,
) -> None:
    figures, listings = drawn
    expected = lag_text(figures, listings, statuses, cluster, granularity)
    assert _text(figures, listings, statuses, cluster, granularity) == expected
