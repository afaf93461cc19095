"""Lag in seconds and per-group figures under kafka-lag-exporter's metric names and labels, so
its Grafana dashboards and alerts work unchanged, with this project's own per-partition figures.

kafka-lag-exporter's (labels ``cluster_name``, ``group``, and ``topic``, ``partition`` per
partition): ``kafka_consumergroup_group_lag_seconds``, ``kafka_consumergroup_group_lag``,
``kafka_consumergroup_group_offset``, ``kafka_consumergroup_group_max_lag_seconds``,
``kafka_consumergroup_group_max_lag``, ``kafka_consumergroup_group_sum_lag`` and
``kafka_partition_latest_offset``. A partition whose lag in seconds is only a bound (its
committed offset is older than the sampled table, ``connectors.sinks.log_end_samples``) also
has ``consumer_offsets_group_lag_seconds_bounded 1``: its figure is the least the lag can be.

This project's: ``consumer_offsets_group_last_commit_timestamp_seconds`` (per partition, when
the group last committed it) and ``consumer_offsets_group_status`` (Burrow's evaluation of the
group: 1 for the current status label, ``OK`` … ``ERR``; what ``STALL``/``STOP``/``ERR`` alerts
read).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from streaming.serve.lag_view import PartitionView

#: Burrow's group statuses (``consumer_offsets_group_status``'s label values).
GROUP_STATUSES = ("NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND")


class TimeLagFamilies:
    """Collects one scrape's figures group by group (:meth:`add_group`), then yields them."""

    def __init__(self, cluster: str, topic_granularity: bool = False) -> None:
        self.cluster = cluster
        self.topic_granularity = topic_granularity
        part = ["cluster_name", "group", "topic", "partition"]
        group = ["cluster_name", "group"]
        self.lag_seconds = GaugeMetricFamily(
            "kafka_consumergroup_group_lag_seconds",
            "Extrapolated lag in seconds of a consumer group at a topic/partition "
            "(a lower bound where consumer_offsets_group_lag_seconds_bounded is 1)",
            labels=part,
        )
        self.lag = GaugeMetricFamily(
            "kafka_consumergroup_group_lag",
            "Lag in offsets of a consumer group at a topic/partition",
            labels=part,
        )
        self.offset = GaugeMetricFamily(
            "kafka_consumergroup_group_offset",
            "Last committed offset of a consumer group at a topic/partition",
            labels=part,
        )
        self.bounded = GaugeMetricFamily(
            "consumer_offsets_group_lag_seconds_bounded",
            "1 where the committed offset is older than the sampled log-end table: the lag in "
            "seconds is at least the figure shown",
            labels=part,
        )
        self.last_commit = GaugeMetricFamily(
            "consumer_offsets_group_last_commit_timestamp_seconds",
            "When the group last committed an offset of the topic/partition (Unix time)",
            labels=part,
        )
        self.latest = GaugeMetricFamily(
            "kafka_partition_latest_offset",
            "Latest offset of a partition",
            labels=["cluster_name", "topic", "partition"],
        )
        self.max_lag_seconds = GaugeMetricFamily(
            "kafka_consumergroup_group_max_lag_seconds",
            "Max extrapolated lag in seconds of a consumer group over its partitions",
            labels=group,
        )
        self.max_lag = GaugeMetricFamily(
            "kafka_consumergroup_group_max_lag",
            "Max lag in offsets of a consumer group over its partitions",
            labels=group,
        )
        self.sum_lag = GaugeMetricFamily(
            "kafka_consumergroup_group_sum_lag",
            "Sum of the lag in offsets of a consumer group over its partitions",
            labels=group,
        )
        self.status = GaugeMetricFamily(
            "consumer_offsets_group_status",
            "Burrow's evaluation of the group (1 for its current status)",
            labels=[*group, "status"],
        )
        self._latest_seen: set[tuple[str, int]] = set()

    def add_group(
        self, group_id: str, partitions: Sequence[PartitionView], status: str | None
    ) -> None:
        """One group's partitions (and its Burrow status, when evaluated)."""
        group = [self.cluster, group_id]
        max_seconds = max_lag = sum_lag = 0.0
        for p in partitions:
            topic, partition = p.committed.topic, p.committed.partition
            labels = [*group, topic, str(partition)]
            seconds = p.lag_seconds
            if seconds is not None:
                max_seconds = max(max_seconds, seconds)
            if p.lag is not None:
                max_lag = max(max_lag, p.lag)
                sum_lag += p.lag
            if not self.topic_granularity:
                self._add_partition(p, labels, seconds)
            if p.log_end_offset is not None and (topic, partition) not in self._latest_seen:
                self._latest_seen.add((topic, partition))
                self.latest.add_metric(
                    [self.cluster, topic, str(partition)], float(p.log_end_offset)
                )
        self.max_lag_seconds.add_metric(group, max_seconds)
        self.max_lag.add_metric(group, max_lag)
        self.sum_lag.add_metric(group, sum_lag)
        if status is not None:
            for name in GROUP_STATUSES:
                self.status.add_metric([*group, name], 1.0 if name == status else 0.0)

    def _add_partition(self, p: PartitionView, labels: list[str], seconds: float | None) -> None:
        self.offset.add_metric(labels, float(p.committed.offset))
        if p.lag is not None:
            self.lag.add_metric(labels, float(p.lag))
        if seconds is not None:
            self.lag_seconds.add_metric(labels, seconds)
            if p.lag_bounded:
                self.bounded.add_metric(labels, 1.0)
        if p.committed.commit_timestamp_ms >= 0:
            self.last_commit.add_metric(labels, p.committed.commit_timestamp_ms / 1000)

    def families(self) -> Iterator[Metric]:
        yield from (self.max_lag_seconds, self.max_lag, self.sum_lag, self.status)
        if not self.topic_granularity:
            yield from (
                self.lag_seconds,
                self.lag,
                self.offset,
                self.bounded,
                self.last_commit,
            )
        yield self.latest
