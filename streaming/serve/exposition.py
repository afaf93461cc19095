"""The lag part of ``/metrics`` as Prometheus text, written directly: at 200,000 committed
partitions a scrape has a million lines, which prometheus-client's object per sample would
take seconds to build. Same format (text 0.0.4), same names as the collector had.

kafka_exporter's names and labels (``consumergroup``, ``topic``, ``partition``):
``kafka_consumergroup_current_offset``, ``kafka_consumergroup_lag``,
``kafka_consumergroup_lag_sum`` (group and topic), ``kafka_consumergroup_members``,
``kafka_topic_partition_current_offset``. kafka-lag-exporter's, with its labels
(``cluster_name``, ``group``, ``topic``, ``partition``) and the project's own:
listed in ``_HELP`` (``consumer_offsets_group_lag_seconds_bounded`` is 1 where a lag in
seconds is only a lower bound; ``consumer_offsets_group_status`` is Burrow's status of the
group at the evaluator's last pass).

``granularity="topic"`` (kminion's option): no per-partition series; per group and topic the
sums and maxima instead (``kafka_consumergroup_lag_sum``,
``kafka_consumergroup_group_topic_sum_lag``, ``consumer_offsets_group_topic_max_lag_seconds``),
and the per-group figures as always.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from connectors.sinks import GroupListing
from streaming.serve.snapshot import PartitionFigures

Granularity = Literal["partition", "topic"]
GRANULARITIES: Final = ("partition", "topic")

_HELP: Final = {
    "kafka_consumergroup_current_offset": (
        "Current committed offset of a consumer group at a topic/partition"
    ),
    "kafka_consumergroup_lag": "Current approximate lag of a consumer group at a topic/partition",
    "kafka_consumergroup_lag_sum": (
        "Current approximate lag of a consumer group at a topic for all partitions"
    ),
    "kafka_consumergroup_members": "Amount of members in a consumer group",
    "kafka_topic_partition_current_offset": "Current offset of a broker at a topic/partition",
    "kafka_consumergroup_group_offset": (
        "Last committed offset of a consumer group at a topic/partition"
    ),
    "kafka_consumergroup_group_lag": "Lag in offsets of a consumer group at a topic/partition",
    "kafka_consumergroup_group_lag_seconds": (
        "Extrapolated lag in seconds of a consumer group at a topic/partition "
        "(a lower bound where consumer_offsets_group_lag_seconds_bounded is 1)"
    ),
    "consumer_offsets_group_lag_seconds_bounded": (
        "1 where the committed offset is older than the sampled log-end table: the lag in "
        "seconds is at least the figure shown"
    ),
    "consumer_offsets_group_last_commit_timestamp_seconds": (
        "When the group last committed an offset of the topic/partition (Unix time)"
    ),
    "kafka_consumergroup_group_topic_sum_lag": (
        "Sum of the lag in offsets of a consumer group over a topic's partitions"
    ),
    "consumer_offsets_group_topic_max_lag_seconds": (
        "Max lag in seconds of a consumer group over a topic's partitions"
    ),
    "kafka_consumergroup_group_max_lag_seconds": (
        "Max extrapolated lag in seconds of a consumer group over its partitions"
    ),
    "kafka_consumergroup_group_max_lag": (
        "Max lag in offsets of a consumer group over its partitions"
    ),
    "kafka_consumergroup_group_sum_lag": (
        "Sum of the lag in offsets of a consumer group over its partitions"
    ),
    "consumer_offsets_group_status": (
        "Burrow's evaluation of the group: 1, labelled with its current status (the series of "
        "other statuses are absent)"
    ),
    "kafka_partition_latest_offset": "Latest offset of a partition",
}


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
