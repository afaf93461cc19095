"""Log-end offsets over time, per partition, held by the server for lag and Burrow's rules.

Every ``interval_s`` the cache reads the committed topics' log-end offsets: from the cluster
(``BrokerOffsets``) when the server has client options for it, else from the sink (a mirror's).
It keeps a ring of recent observations per partition (as Burrow does) and loads each
partition's (log-end offset, time) points (``connectors.sinks.log_end_samples``), which a server
reading the cluster adds to through ``samples_sink`` (in memory without a writable sink). A
committed offset older than the points is timed by the record at it (:meth:`record_times`).
Reading the cluster, it also notes the ingest partitions an open transaction holds
(:meth:`held`).
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from kafka.errors import KafkaError

from connectors.client.offsets_reader import BrokerOffsets
from connectors.kafka.admin import LOG_END_INTERVAL_S as DEFAULT_INTERVAL_S
from connectors.sinks import Sink, SinkError
from connectors.sinks.log_end_samples import DEFAULT_KEEP as DEFAULT_KEEP_POINTS
from connectors.sinks.log_end_samples import LogEndSample, RecordTime, merge_sample, thin
from state.coordinator.model import TopicPartition

log = logging.getLogger(__name__)

#: Observations kept per partition: an hour at the default interval.
DEFAULT_KEEP = 360
#: Seconds between two loads of the whole sampled table (in between, only what changed).
FULL_RELOAD_S = 600.0
#: Seconds of reading records at committed offsets after which a refresh starts no further
#: round: thousands of groups behind cannot hold the log-end offsets back; the rest are read at
#: the next refresh.
RECORD_READ_BUDGET_S = 2.0
#: Partitions read in a round (one offset each: a poll fetches them together), and the seconds
#: a round waits for their records (500 take 0.3-0.6 s on a loaded 2-core machine).
RECORD_READ_ROUND = 500
RECORD_READ_TIMEOUT_S = 2.0
#: Seconds before an offset whose record could not be read is tried again.
RECORD_RETRY_S = 60.0
#: Seconds an offset a group's page charts (a past commit of it) stays wanted through the
#: passes over every group, which want only the committed offsets.
RECORD_ASKED_KEEP_S = 600.0

#: A committed offset whose record is read: (topic, partition, offset).
RecordKey = tuple[str, int, int]


def _time_of(observation: tuple[int, int]) -> int:
    return observation[0]


@dataclass(frozen=True)
class SampleColumns:
    """Every partition's sampled points, oldest first, concatenated: partition ``tp``'s are
    rows ``bounds[tp][0]`` to ``bounds[tp][1]`` (exclusive) of ``offsets``, ``first_seen_ms``
    and ``last_seen_ms``."""

    bounds: dict[tuple[str, int], tuple[int, int]]
    offsets: np.ndarray
    first_seen_ms: np.ndarray
    last_seen_ms: np.ndarray

    @classmethod
    def of(cls, points: Mapping[TopicPartition, list[LogEndSample]]) -> SampleColumns:
        bounds: dict[tuple[str, int], tuple[int, int]] = {}
        offsets: list[int] = []
        first: list[int] = []
        last: list[int] = []
        for tp, table in points.items():
            if table:
                bounds[(tp.topic, tp.partition)] = (len(offsets), len(offsets) + len(table))
                offsets.extend(p.offset for p in table)
                first.extend(p.first_seen_ms for p in table)
                last.extend(p.last_seen_ms for p in table)
        return cls(
            bounds,
            np.array(offsets, np.int64),
            np.array(first, np.int64),
            np.array(last, np.int64),
        )


class LogEndCache:
    """Observed log-end offsets; :meth:`refresh` reads once, :meth:`start` keeps reading."""

    def __init__(
        self,
        sink: Sink,
        client_options: Mapping[str, Any] | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        samples_sink: Sink | None = None,
        ingest_topics: Sequence[str] = (),
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"log-end refresh interval must be > 0 s, got {interval_s}")
        self.sink = sink
        self.interval_s = interval_s
        #: The job's ingest topics, whose partitions held by an open transaction :meth:`held`
        #: gives (read at each refresh when this server reads the cluster).
        self.ingest_topics = tuple(ingest_topics)
        self._held: dict[TopicPartition, int] = {}
        #: The cluster's log-end offsets and the records at committed offsets, read on the
        #: refresh thread.
        self._broker = BrokerOffsets(client_options) if client_options is not None else None
        #: Timestamps read, of the offsets wanted (:meth:`record_times`), and the offsets whose
        #: record could not be read, with when (tried again after :data:`RECORD_RETRY_S`).
        self._record_times: dict[RecordKey, RecordTime] = {}
        self._wanted: set[RecordKey] = set()
        self._missed: dict[RecordKey, float] = {}
        #: Offsets a page charts, with when it last asked (monotonic).
        self._asked: dict[RecordKey, float] = {}
        self._wake = threading.Event()
        self._seen: dict[TopicPartition, deque[tuple[int, int]]] = {}
        #: The newest reading of each partition, by topic (what lag is computed against).
        self._latest: dict[str, dict[int, int]] = {}
        self._samples_sink = samples_sink
        self._points: dict[TopicPartition, list[LogEndSample]] = {}
        #: :meth:`columns`, made again after the points change.
        self._columns: SampleColumns | None = None
        #: Counts the refreshes: what a reader's cache of lags keys on (:attr:`generation`).
        self._generation = 0
        self._keep_points = DEFAULT_KEEP_POINTS
        self._full_loaded_at: float | None = None
        self._loaded_ms = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def observe(self, offsets: Mapping[TopicPartition, int], at_ms: int) -> None:
        """Record log-end offsets seen at ``at_ms`` (an observation older than the last one
        of its partition is ignored: time only moves forward in the ring)."""
        with self._lock:
            for tp, offset in offsets.items():
                ring = self._seen.setdefault(tp, deque(maxlen=DEFAULT_KEEP))
                if ring and ring[-1][0] >= at_ms:
                    continue  # older, or the same reading again (a mirror's, not refreshed)
                ring.append((at_ms, int(offset)))
                self._latest.setdefault(tp.topic, {})[tp.partition] = int(offset)
            self._generation += 1

    def offsets_of(self, topic: str) -> dict[int, int]:
        """The latest log-end offset of each known partition of ``topic``."""
        with self._lock:
            return dict(self._latest.get(topic, {}))

    def at_each(self, tp: TopicPartition, timestamps: list[int]) -> list[int | None]:
        """The log-end offset last seen at or before each of ``timestamps`` (None where none
        was)."""
        with self._lock:
            ring = self._seen.get(tp)
            if not ring:
                return [None] * len(timestamps)
            found = []
            for timestamp in timestamps:
                i = bisect.bisect_right(ring, timestamp, key=_time_of)
                found.append(ring[i - 1][1] if i else None)
            return found

    def recent(self, tp: TopicPartition, count: int) -> list[int]:
        """The last ``count`` observed log-end offsets, oldest first."""
        with self._lock:
            ring = self._seen.get(tp)
            return [offset for _, offset in list(ring)[-count:]] if ring else []

    def series(self, tp: TopicPartition) -> list[tuple[int, int]]:
        """Every kept (time ms, log-end offset) observation, oldest first."""
        with self._lock:
            return list(self._seen.get(tp, ()))

    def points(self, tp: TopicPartition) -> list[LogEndSample]:
        """The partition's (log-end offset, time) points as last loaded, oldest first."""
        with self._lock:
            return self._points.get(tp, [])

    def columns(self) -> SampleColumns:
        """Every partition's points as columns (:class:`SampleColumns`), as last loaded: what a
        vectorised pass over every group interpolates in."""
        with self._lock:
            if self._columns is None:
                self._columns = SampleColumns.of(self._points)
            return self._columns

    @property
    def generation(self) -> int:
        """How many refreshes ended (successful or not): changes when the log-end offsets and
        the sampled table may have."""
        return self._generation

    def refresh(self) -> int:
        """Read the log-end offsets of the committed topics once, add them to the sampled
        table (when this server reads the cluster) and load the table; the partitions read."""
        try:
            return self._refresh()
        finally:
            self._generation += 1

    def _refresh(self) -> int:
        if self._broker is None:
            stored = self.sink.log_end_offsets()
            for entry in stored.values():
                self.observe({entry.topic_partition: entry.offset}, entry.updated_at_ms)
            self._load_points()
            return len(stored)
        ends = self._broker.topic_end_offsets(self.sink.committed_topics())
        now = int(time.time() * 1000)
        self.observe(ends, now)
        if self._samples_sink is not None:
            self._samples_sink.record_log_end_samples(
                {(tp.topic, tp.partition): o for tp, o in ends.items()}, now
            )
            self._load_points()
        else:
            with self._lock:
                self._columns = None
                for tp, offset in ends.items():
                    merged, _ = merge_sample(self._points.get(tp, []), offset, now)
                    self._points[tp] = thin(merged)
        self._read_held()
        self._read_record_times()  # the offsets readers found the points cannot place
        return len(ends)

    def held(self) -> dict[TopicPartition, int]:
        """The ingest partitions an open transaction holds (LSO below HW) at the last refresh,
        each with the time (ms) of its oldest record after the LSO: the transaction's first."""
        with self._lock:
            return dict(self._held)

    def _read_held(self) -> None:
        """The held ingest partitions, each read as one record at its LSO; a partition held
        at the last refresh keeps its time when no record is read."""
        if self._broker is None or not self.ingest_topics:
            return
        broker = self._broker
        try:
            partitions = [
                TopicPartition(topic, p)
                for topic in self.ingest_topics
                for p in broker.partitions_for(topic)
            ]
            states = broker.open_transactions.read(partitions, groups=(), max_records=1)
        except (KafkaError, AttributeError) as exc:  # AttributeError: see list_offsets
            log.warning("open transactions on the ingest topics not read: %s", exc)
            return
        now = int(time.time() * 1000)
        with self._lock:
            before = self._held
            self._held = {
                tp: before.get(tp, now)
                if state.oldest_timestamp_ms is None
                else state.oldest_timestamp_ms
                for tp, state in states.items()
                if state.held
            }

    def record_times(
        self, keys: Iterable[RecordKey], every: bool = False, charted: bool = False
    ) -> dict[RecordKey, RecordTime]:
        """The timestamps read of the records at these committed offsets; the others are read
        by the refresh thread, woken for offsets not asked for before. ``every``: ``keys`` are
        all the committed offsets wanted now (a pass over every group), the others are
        forgotten but for those asked for ``charted`` (a page's past commits) in the last
        :data:`RECORD_ASKED_KEEP_S`: the cache holds one entry per committed offset the sampled
        table cannot place, and the commits pages chart. {} when the server does not read the
        cluster."""
        if self._broker is None:
            return {}
        wanted = set(keys)
        now = time.monotonic()
        with self._lock:
            fresh = wanted - self._wanted - self._record_times.keys()
            if every:
                self._asked = {
                    k: t for k, t in self._asked.items() if now - t < RECORD_ASKED_KEEP_S
                }
                kept = wanted | self._asked.keys()
                self._wanted = kept
                self._record_times = {k: v for k, v in self._record_times.items() if k in kept}
                self._missed = {k: t for k, t in self._missed.items() if k in kept}
            else:
                self._wanted |= wanted
                if charted:
                    self._asked.update(dict.fromkeys(wanted, now))
            found = {k: self._record_times[k] for k in wanted if k in self._record_times}
        if fresh:
            self._wake.set()
        return found

    def read_record_times(self) -> int:
        """Read the records of the wanted offsets not read yet, in rounds until
        :data:`RECORD_READ_BUDGET_S` is spent; how many offsets were tried."""
        try:
            return self._read_record_times()
        finally:
            self._generation += 1

    def _read_record_times(self) -> int:
        if self._broker is None:
            return 0
        started = time.monotonic()
        with self._lock:
            todo = [
                k
                for k in self._wanted
                if k not in self._record_times
                and started - self._missed.get(k, -RECORD_RETRY_S) >= RECORD_RETRY_S
            ]
        read = 0
        while todo and time.monotonic() - started < RECORD_READ_BUDGET_S:
            batch: dict[TopicPartition, RecordKey] = {}
            rest = []
            for key in todo:  # one offset per partition a round: it has one position
                tp = TopicPartition(key[0], key[1])
                if tp in batch or len(batch) >= RECORD_READ_ROUND:
                    rest.append(key)
                else:
                    batch[tp] = key
            todo = rest
            try:
                found = self._broker.record_times(
                    {tp: key[2] for tp, key in batch.items()}, RECORD_READ_TIMEOUT_S
                )
            except (KafkaError, AttributeError) as exc:  # AttributeError: see list_offsets
                log.warning("records at committed offsets not read (retried later): %s", exc)
                found = {}
            with self._lock:
                for tp, key in batch.items():
                    at = found.get(tp)
                    if at is None:  # none read, or a v0 record
                        self._missed[key] = time.monotonic()
                    elif key in self._wanted:
                        self._record_times[key] = at
            read += len(batch)
        if read:
            log.debug(
                "read the records at %d committed offsets in %.0f ms",
                read,
                (time.monotonic() - started) * 1000,
            )
        return read

    def _load_points(self) -> None:
        """The whole table now and then (:data:`FULL_RELOAD_S`), else only the points seen
        since the last load (a partition's newest, mostly), merged as the writers merge them."""
        now = time.monotonic()
        if self._full_loaded_at is None or now - self._full_loaded_at >= FULL_RELOAD_S:
            started_ms = int(time.time() * 1000)
            loaded = self.sink.log_end_samples()
            with self._lock:
                self._points = loaded
                self._columns = None
            self._full_loaded_at, self._loaded_ms = now, started_ms
            return
        since = self._loaded_ms - int(2 * self.interval_s * 1000)  # writers' clocks and lag
        self._loaded_ms = int(time.time() * 1000)
        changed = self.sink.log_end_samples_since(since)
        with self._lock:
            self._columns = None
            for topic, partition, point in changed:
                tp = TopicPartition(topic, partition)
                points = self._points.setdefault(tp, [])
                same = next((i for i, p in enumerate(points) if p.offset == point.offset), None)
                if same is not None:
                    points[same] = point
                elif not points or point.offset > points[-1].offset:
                    points.append(point)
                else:  # an offset below the newest that was never seen: the table restarted
                    self._points[tp] = [point]
                if len(points) > self._keep_points + self._keep_points // 5:
                    self._points[tp] = thin(points, self._keep_points)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="log-end-cache", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if started >= due:
                    due = started + self.interval_s
                    self.refresh()
                else:  # woken: committed offsets whose records nobody has read yet
                    self.read_record_times()
            except (SinkError, OSError, RuntimeError) as exc:
                log.warning(
                    "log-end offsets not read (retried in %.0f s): %s", self.interval_s, exc
                )
            self._wake.wait(max(0.0, due - time.monotonic()))
            self._wake.clear()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        if self._broker is not None:
            self._broker.close()
        if self._samples_sink is not None:
            self._samples_sink.close()
