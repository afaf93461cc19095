"""The lag part of /metrics as it was written before it was vectorised, one Python string per
line: the oracle the column-wise writer (``streaming.serve.exposition``) must match byte for
byte. :func:`frame_of_figures` makes the frame those figures describe."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from connectors.sinks import GroupListing
from connectors.sinks.log_end_samples import TimeLag
from streaming.serve.exposition import _HELP, GRANULARITIES, Granularity
from streaming.serve.lag_frame import LagFrame


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


def frame_of_figures(
    figures: Mapping[str, list[PartitionFigures]], listings: list[GroupListing]
) -> LagFrame:
    """The frame of ``figures`` (groups in their order, partitions as given)."""
    rows = [(g, p) for g, parts in figures.items() for p in parts]
    groups = list(figures)
    topics = list(dict.fromkeys(p.topic for _, p in rows))

    def ints(values: list[int]) -> np.ndarray:
        return np.array(values, np.int64)

    return LagFrame(
        groups=pa.array(groups, pa.string()),
        group_index=ints([groups.index(g) for g, _ in rows]),
        topics=pa.array(topics, pa.string()),
        topic_index=ints([topics.index(p.topic) for _, p in rows]),
        partition=ints([p.partition for _, p in rows]),
        offset=ints([p.offset for _, p in rows]),
        commit_timestamp_ms=ints([p.commit_timestamp_ms for _, p in rows]),
        log_end=ints([p.log_end or 0 for _, p in rows]),
        has_end=np.array([p.log_end is not None for _, p in rows], bool),
        lag=ints([p.lag or 0 for _, p in rows]),
        lag_ms=ints([p.time_lag.lag_ms if p.time_lag else 0 for _, p in rows]),
        has_time=np.array([p.time_lag is not None for _, p in rows], bool),
        bounded=np.array([bool(p.time_lag and p.time_lag.bounded) for _, p in rows], bool),
        listings=listings,
        made_ms=0,
    )


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def lag_text(
    figures: Mapping[str, list[PartitionFigures]],
    listings: list[GroupListing],
    statuses: Mapping[str, str],
    cluster: str,
    granularity: Granularity = "partition",
) -> str:
    """The lag families as exposition text, every family with its HELP and TYPE."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    out: dict[str, list[str]] = {name: [] for name in _HELP}
    per_partition = granularity == "partition"
    c = _escape(cluster)
    latest: dict[tuple[str, int], int] = {}
    for listing in listings:
        g = _escape(listing.group_id)
        out["kafka_consumergroup_members"].append(
            f'kafka_consumergroup_members{{consumergroup="{g}"}} {listing.members or 0}'
        )
    current_offset = out["kafka_consumergroup_current_offset"].append
    group_offset = out["kafka_consumergroup_group_offset"].append
    exporter_lag = out["kafka_consumergroup_lag"].append
    group_lag = out["kafka_consumergroup_group_lag"].append
    lag_seconds = out["kafka_consumergroup_group_lag_seconds"].append
    bounded = out["consumer_offsets_group_lag_seconds_bounded"].append
    last_commit = out["consumer_offsets_group_last_commit_timestamp_seconds"].append
    for group, parts in figures.items():
        g = _escape(group)
        kle = f'cluster_name="{c}",group="{g}"'
        max_seconds, max_lag, sum_lag = 0.0, 0, 0
        by_topic: dict[str, tuple[int, float]] = {}
        for p in parts:
            t = _escape(p.topic)
            seconds = None if p.time_lag is None else p.time_lag.lag_ms / 1000
            if p.lag is not None:
                max_lag = max(max_lag, p.lag)
                sum_lag += p.lag
            if seconds is not None:
                max_seconds = max(max_seconds, seconds)
            if p.log_end is not None:
                latest[(p.topic, p.partition)] = p.log_end
            topic_sum, topic_seconds = by_topic.get(t, (0, 0.0))
            by_topic[t] = (topic_sum + (p.lag or 0), max(topic_seconds, seconds or 0.0))
            if not per_partition:
                continue
            ke = f'{{consumergroup="{g}",topic="{t}",partition="{p.partition}"}} '
            kl = f'{{{kle},topic="{t}",partition="{p.partition}"}} '
            current_offset(f"kafka_consumergroup_current_offset{ke}{p.offset}")
            group_offset(f"kafka_consumergroup_group_offset{kl}{p.offset}")
            if p.lag is not None:
                exporter_lag(f"kafka_consumergroup_lag{ke}{p.lag}")
                group_lag(f"kafka_consumergroup_group_lag{kl}{p.lag}")
            if seconds is not None:
                lag_seconds(f"kafka_consumergroup_group_lag_seconds{kl}{_number(seconds)}")
                if p.time_lag is not None and p.time_lag.bounded:
                    bounded(f"consumer_offsets_group_lag_seconds_bounded{kl}1")
            if p.commit_timestamp_ms >= 0:
                last_commit(
                    "consumer_offsets_group_last_commit_timestamp_seconds"
                    f"{kl}{_number(p.commit_timestamp_ms / 1000)}"
                )
        for t, (topic_sum, topic_seconds) in sorted(by_topic.items()):
            out["kafka_consumergroup_lag_sum"].append(
                f'kafka_consumergroup_lag_sum{{consumergroup="{g}",topic="{t}"}} {topic_sum}'
            )
            if not per_partition:
                out["kafka_consumergroup_group_topic_sum_lag"].append(
                    f'kafka_consumergroup_group_topic_sum_lag{{{kle},topic="{t}"}} {topic_sum}'
                )
                out["consumer_offsets_group_topic_max_lag_seconds"].append(
                    f'consumer_offsets_group_topic_max_lag_seconds{{{kle},topic="{t}"}} '
                    f"{_number(topic_seconds)}"
                )
        out["kafka_consumergroup_group_max_lag_seconds"].append(
            f"kafka_consumergroup_group_max_lag_seconds{{{kle}}} {_number(max_seconds)}"
        )
        out["kafka_consumergroup_group_max_lag"].append(
            f"kafka_consumergroup_group_max_lag{{{kle}}} {max_lag}"
        )
        out["kafka_consumergroup_group_sum_lag"].append(
            f"kafka_consumergroup_group_sum_lag{{{kle}}} {sum_lag}"
        )
        status = statuses.get(group)
        if status:
            out["consumer_offsets_group_status"].append(
                f'consumer_offsets_group_status{{{kle},status="{_escape(status)}"}} 1'
            )
    for (topic, partition), end in sorted(latest.items()):
        t = _escape(topic)
        out["kafka_topic_partition_current_offset"].append(
            f'kafka_topic_partition_current_offset{{topic="{t}",partition="{partition}"}} {end}'
        )
        out["kafka_partition_latest_offset"].append(
            f'kafka_partition_latest_offset{{cluster_name="{c}",topic="{t}",'
            f'partition="{partition}"}} {end}'
        )
    chunks = []
    for name, lines in out.items():
        if lines:
            chunks.append(f"# HELP {name} {_HELP[name]}\n# TYPE {name} gauge\n")
            chunks.append("\n".join(lines))
            chunks.append("\n")
    return "".join(chunks)
