"""``/metrics``: the job's (or the mirror's) progress from the sink's status, read at every
scrape, each group's commits counter, and the lag families (``exposition``). The lag families'
text is made at most once per log-end interval and kept (gzipped too once asked for), so a
scrape writes bytes it already has; it is at most two log-end intervals old."""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from connectors.client.liveness import NOT_RESPONDING, liveness
from connectors.sinks import SinkError, StandbyState
from streaming.serve.exposition import Granularity, render
from streaming.serve.lag_frame import LagFrame
from streaming.serve.lag_view import LagView
from streaming.serve.memo import Memo

log = logging.getLogger(__name__)

#: Seconds after the last scrape the text is still kept made.
WARM_S = 600.0
#: zlib's fastest level: the text is repetitive (labels), so it still shrinks some thirtyfold.
_GZIP_LEVEL = 1


@dataclass(eq=False)
class Exposition:
    """The lag families made from ``frame``, and once asked for, a gzip stream begun on them."""

    frame: LagFrame
    text: bytes
    _gzip: tuple[bytes, Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin_gzip(self) -> tuple[bytes, Any]:
        with self._lock:
            if self._gzip is None:
                compressor = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
                head = compressor.compress(self.text) + compressor.flush(zlib.Z_SYNC_FLUSH)
                self._gzip = (head, compressor)
            return self._gzip

    def gzipped(self, more: bytes) -> bytes:
        """The text, then ``more``, as one gzip stream (the kept compressor left as is)."""
        head, compressor = self.begin_gzip()
        tail = compressor.copy()
        return head + tail.compress(more) + tail.flush()


class LagExposition:
    """The lag families' text of ``frames``' latest frame, kept between scrapes."""

    def __init__(
        self,
        frames: Memo[LagFrame],
        statuses: Callable[[], Mapping[str, str]],
        cluster: str,
        granularity: Granularity,
        interval_s: float,
        refreshes: Callable[[], object],
    ) -> None:
        self._frames, self._statuses = frames, statuses
        self._cluster, self._granularity = cluster, granularity
        #: Whether a scraper asked for gzip: every later text is gzipped as it is made.
        self.gzip_wanted = False
        self._interval_s = interval_s
        self._scraped_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._made = Memo(
            self._make,
            interval_s,
            key=refreshes,
            stale_s=interval_s,
            clock=time.time,
            as_of=lambda e: e.frame.made_ms / 1000,
        )

    def _make(self) -> Exposition:
        frame = self._frames.get()
        made = Exposition(frame, render(frame, self._statuses(), self._cluster, self._granularity))
        if self.gzip_wanted:
            made.begin_gzip()
        return made

    def _scraped(self) -> Exposition:
        self._scraped_at = time.monotonic()
        if self._thread is None:
            self._thread = threading.Thread(target=self._keep, name="lag-text", daemon=True)
            self._thread.start()
        return self._made.get()

    def text(self, more: bytes = b"") -> bytes:
        """The lag families, then ``more``."""
        return self._scraped().text + more

    def text_of(
        self, select: Callable[[LagFrame], tuple[LagFrame, Mapping[str, str]]], more: bytes = b""
    ) -> bytes:
        """The lag families of what ``select`` keeps of the latest frame (a tenant's view, not
        kept), then ``more``."""
        frame, statuses = select(self._scraped().frame)
        return render(frame, statuses, self._cluster, self._granularity) + more

    def gzipped(self, more: bytes = b"") -> bytes:
        """:meth:`text` gzipped (compressed now for the first scraper that asks)."""
        self.gzip_wanted = True
        return self._scraped().gzipped(more)

    def _keep(self) -> None:
        """While scraped: the text made again as it ages, so that no scrape waits for it."""
        while not self._stop.wait(self._interval_s / 2):
            scraped = self._scraped_at
            if scraped is not None and time.monotonic() - scraped < WARM_S:
                try:
                    self._made.get()
                except Exception as exc:  # the next scrape makes it and sees the error
                    log.warning("lag families not made: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


#: The status label's values: the stored states, and a live state's stale heartbeat.
STATUSES = ("LOADING", "STARTING", "ACTIVE", "STOPPED", NOT_RESPONDING.replace(" ", "_"))


class SinkCollector(Collector):
    """Collects every metric from the sink at scrape time (no state between scrapes)."""

    def __init__(self, view: LagView, may_see_group: Callable[[str], bool] | None = None) -> None:
        self.view = view
        #: The groups whose counters are shown (a tenant's: ``tenant_views``); None: all.
        self.may_see_group = may_see_group

    def collect(self) -> Iterator[Metric]:
        if self.may_see_group is None:  # the job's own partitions and processes: operators only
            yield self._held()
            yield from self._leases()
        yield from self._progress()
        yield from self._commits()

    def _held(self) -> Metric:
        """Seconds each ingest partition has been held by an open transaction (since its
        oldest record after the last stable offset): the job reads no further there."""
        family = GaugeMetricFamily(
            "consumer_offsets_ingest_partition_held_seconds",
            "Seconds since the oldest record after the last stable offset of an ingest "
            "partition an open transaction holds (requests behind it wait; absent when none)",
            labels=["topic", "partition"],
        )
        now_ms = time.time() * 1000
        for tp, since_ms in sorted(self.view.log_ends.held().items()):
            family.add_metric([tp.topic, str(tp.partition)], max(0.0, now_ms - since_ms) / 1000)
        return family

    def _leases(self) -> Iterator[Metric]:
        """Each deployment's lease (which process writes, until when) and its standbys."""
        try:
            found = self.view.sink.deployments()
        except SinkError:
            return
        labels = ["deployment"]
        epoch = GaugeMetricFamily(
            "consumer_offsets_lease_epoch",
            "Epoch of the deployment's lease (bumped at each change of holder)",
            labels=labels,
        )
        expires = GaugeMetricFamily(
            "consumer_offsets_lease_expires_in_seconds",
            "Seconds until the deployment's lease expires unless renewed (<= 0: expired or "
            "released)",
            labels=labels,
        )
        holder = GaugeMetricFamily(
            "consumer_offsets_lease_holder_info",
            "The process holding the deployment's lease (host:pid/instance), 1; absent when free",
            labels=[*labels, "holder"],
        )
        standbys = GaugeMetricFamily(
            "consumer_offsets_standbys",
            "Standbys of the deployment seen in the last 5 s, by state",
            labels=[*labels, "state"],
        )
        for lease, waiting in found:
            epoch.add_metric([lease.name], lease.epoch)
            expires.add_metric([lease.name], lease.expires_in_ms / 1000)
            if lease.holder:
                holder.add_metric([lease.name, lease.holder], 1.0)
            for state in get_args(StandbyState):
                count = sum(1 for s in waiting if s.state == state)
                standbys.add_metric([lease.name, state], count)
        yield from (epoch, expires, holder, standbys)

    def _commits(self) -> Iterator[Metric]:
        """Each group's commits counter (the sink's): offset commits applied, one per
        partition, as Kafka writes one record per partition committed."""
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
