"""``/metrics``: consumer lag with kafka_exporter's metric names and labels, and the job's (or
the mirror's) progress from the sink's status, read from the sink at every scrape.

kafka_exporter's names, so existing dashboards and alerts work unchanged:
``kafka_consumergroup_current_offset``, ``kafka_consumergroup_lag`` (per partition, labels
``consumergroup``, ``topic``, ``partition``), ``kafka_consumergroup_lag_sum`` (per group and
topic), ``kafka_consumergroup_members`` and ``kafka_topic_partition_current_offset`` (the
log-end offset). ``kafka_consumergroup_commits_total`` (labels ``cluster_name``, ``group``)
counts each group's offset commits. The progress metrics are ``consumer_offsets_*``;
``consumer_offsets_status`` says ACTIVE (or LOADING) only while the job's heartbeat is fresh,
else NOT_RESPONDING (``connectors.client.liveness``), and
``consumer_offsets_heartbeat_timestamp_seconds`` when it was last seen. The lag families
(kafka_exporter's and kafka-lag-exporter's, lag in seconds and each group's Burrow status) are
written as text by ``streaming.serve.exposition``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from connectors.client.liveness import NOT_RESPONDING, liveness
from connectors.sinks import SinkError
from streaming.serve.lag_view import LagView

#: The status label's values: the stored states, and a live state's stale heartbeat.
STATUSES = ("LOADING", "STARTING", "ACTIVE", "STOPPED", NOT_RESPONDING.replace(" ", "_"))


class SinkCollector(Collector):
    """Collects every metric from the sink at scrape time (no state between scrapes)."""

    def __init__(self, view: LagView, may_see_group: Callable[[str], bool] | None = None) -> None:
        self.view = view
        #: The groups whose counters are shown (a tenant's: ``tenant_views``); None: all.
        self.may_see_group = may_see_group

    def collect(self) -> Iterator[Metric]:
        # The lag families are written as text beside these (streaming.serve.exposition).
        yield from self._progress()
        yield from self._commits()

    def _commits(self) -> Iterator[Metric]:
        """Each group's commits counter (the sink's, shared by every ``serve`` and kept
        across restarts): offset commits applied, one per partition, as Kafka writes one
        record per partition committed; it starts over when all the group's offsets go."""
        try:
            counts = self.view.sink.group_commits()
        except SinkError:
            return
        family = CounterMetricFamily(
            "kafka_consumergroup_commits",
            "Offset commits applied for the group (one per partition committed)",
            labels=["cluster_name", "group"],
        )
        for group, count in sorted(counts.items()):
            if self.may_see_group is not None and not self.may_see_group(group):
                continue
            family.add_metric([self.view.cluster, group], float(count))
        yield family

    def _progress(self) -> Iterator[Metric]:
        try:
            status = self.view.sink.status()
        except SinkError:
            return
        alive = liveness(status)
        current = alive.status.replace(" ", "_")
        state = GaugeMetricFamily(
            "consumer_offsets_status",
            "The job's status: the sink's, NOT_RESPONDING when its heartbeat is stale "
            "(1 for the current one)",
            labels=["status"],
        )
        for name in STATUSES:
            state.add_metric([name], 1.0 if current == name else 0.0)
        yield state
        if alive.last_seen_ms is not None:
            yield _gauge(
                "consumer_offsets_heartbeat_timestamp_seconds",
                "When the job (or the mirror) last recorded its heartbeat (Unix time)",
                alive.last_seen_ms / 1000,
            )
        yield _gauge(
            "consumer_offsets_batches", "Micro-batches committed", status.last_batch_id + 1
        )
        progress = status.last_progress
        if progress is None:
            return
        figures: list[tuple[str, str, Any]] = [
            ("last_batch_input_rows", "Input rows of the last micro-batch", progress.input_rows),
            (
                "last_batch_commits_applied",
                "Offset commits applied by the last micro-batch",
                progress.commits_applied,
            ),
            ("last_batch_rejected", "Requests rejected in the last micro-batch", progress.rejected),
            ("last_batch_tombstones", "Tombstones of the last micro-batch", progress.tombstones),
            ("state_keys", "Keys in the state after the last micro-batch", progress.state_keys),
            (
                "last_batch_duration_seconds",
                "Duration of the last micro-batch",
                progress.duration_ms / 1000,
            ),
            (
                "last_batch_timestamp_seconds",
                "When the last micro-batch was committed (Unix time)",
                progress.timestamp_ms / 1000,
            ),
        ]
        for name, help_text, value in figures:
            yield _gauge(f"consumer_offsets_{name}", help_text, value)


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=float(value))


def registry_for(
    view: LagView, may_see_group: Callable[[str], bool] | None = None
) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SinkCollector(view, may_see_group))
    return registry
