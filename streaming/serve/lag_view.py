"""A group as the server shows it: each partition's committed offset, log-end offset and lag
(in messages and seconds), and its recent commits with the lag each had, for Burrow's rules and
the charts; read from the sink and the log-end cache."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from connectors.client.offsets_reader import lag
from connectors.sinks import CommittedOffset, Sink
from connectors.sinks.log_end_samples import TimeLag, lag_ms, record_lag
from state.coordinator.model import TopicPartition
from streaming.serve.evaluation import (
    DEFAULT_INTERVALS,
    ConsumerOffset,
    GroupStatus,
    group_status,
    partition_status,
)
from streaming.serve.log_end_cache import LogEndCache

#: Groups whose commit history one query of :meth:`LagView.statuses` reads.
STATUS_CHUNK: Final = 200


@dataclass(frozen=True)
class PartitionView:
    committed: CommittedOffset
    log_end_offset: int | None
    #: Commits of the window, oldest first, each with the lag it had.
    window: list[ConsumerOffset]
    #: The lag in time (``connectors.sinks.log_end_samples.lag_ms``); None when unknown.
    time_lag: TimeLag | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return self.committed.topic_partition

    @property
    def lag(self) -> int | None:
        return lag(self.committed.offset, self.log_end_offset)

    @property
    def lag_seconds(self) -> float | None:
        """The lag in seconds; a lower bound when :attr:`lag_bounded`."""
        return None if self.time_lag is None else self.time_lag.lag_ms / 1000

    @property
    def lag_bounded(self) -> bool:
        """Whether :attr:`lag_seconds` is only a lower bound: the record at the committed offset
        is gone (:attr:`TimeLag.gone`) or was not read (older than the sampled table)."""
        return self.time_lag is not None and self.time_lag.bounded


class LagView:
    """Reads groups, their partitions and statuses over one sink and one log-end cache."""

    def __init__(
        self,
        sink: Sink,
        log_ends: LogEndCache,
        cluster: str,
        intervals: int = DEFAULT_INTERVALS,
    ) -> None:
        self.sink, self.log_ends, self.cluster, self.intervals = sink, log_ends, cluster, intervals

    def log_end_map(self, topics: set[str]) -> dict[TopicPartition, int]:
        """The latest log-end offset of each partition of ``topics``: the cache's, else (a
        topic the cache has not read yet) the sink's stored one, in one query."""
        found: dict[TopicPartition, int] = {}
        unseen = set()
        for topic in topics:
            cached = self.log_ends.offsets_of(topic)
            if not cached:
                unseen.add(topic)
            for partition, offset in cached.items():
                found[TopicPartition(topic, partition)] = offset
        if unseen:  # before the cache's first reading of them
            for tp, entry in self.sink.log_end_offsets(unseen).items():
                found[tp] = entry.offset
        return found

    def _window(
        self, committed: CommittedOffset, points: list[tuple[int, int]]
    ) -> list[ConsumerOffset]:
        """The commits (offset, commit time ms), newest first (none: the current offset alone,
        when the sink keeps no history), oldest first, each with its lag at the time."""
        if not points:
            points = [(committed.offset, committed.commit_timestamp_ms)]
        ends = self.log_ends.at_each(committed.topic_partition, [t for _, t in reversed(points)])
        return [
            ConsumerOffset(offset, at, at, lag(offset, end))
            for (offset, at), end in zip(reversed(points), ends, strict=True)
        ]

    def partitions(self, group_id: str, window: int | None = None) -> list[PartitionView]:
        """The group's partitions with their log-end offsets and each one's last ``window``
        commits (Burrow's ``intervals`` by default; 0: none, as metrics need), read in one
        history query for the group."""
        size = self.intervals if window is None else window
        committed = self.sink.fetch_offsets(group_id)
        ends = self.log_end_map({c.topic for c in committed})
        history = self.sink.recent_history(group_id, size) if size else {}
        commits = {
            tp: [(h.offset, h.commit_timestamp_ms) for h in entries]
            for tp, entries in history.items()
        }
        now = int(time.time() * 1000)
        return [
            PartitionView(
                c,
                ends.get(c.topic_partition),
                self._window(c, commits.get(c.topic_partition, [])) if size else [],
                self.time_lag(c, ends.get(c.topic_partition), now),
            )
            for c in committed
        ]

    def time_lag(
        self, committed: CommittedOffset, log_end: int | None, now_ms: int
    ) -> TimeLag | None:
        """The committed offset's lag in time against the partition's sampled table; where
        the table cannot place it, from the timestamp of the record at it once read."""
        found = lag_ms(
            self.log_ends.points(committed.topic_partition), committed.offset, log_end, now_ms
        )
        placed = found is not None and not found.bounded
        if placed or log_end is None or committed.offset >= log_end:
            return found
        key = (committed.topic, committed.partition, committed.offset)
        record = self.log_ends.record_times([key]).get(key)
        return found if record is None else record_lag(found, record, now_ms)

    def statuses(
        self, chunk: int = STATUS_CHUNK, between: Callable[[float], bool] | None = None
    ) -> Iterator[tuple[str, GroupStatus]]:
        """Every listed group's Burrow status, as :meth:`status` gives it, from one read of
        every committed offset and one history query per ``chunk`` groups. ``between`` is
        called after each chunk with the seconds it took (it may pause, so other threads get
        the interpreter) and ends the pass by returning False."""
        groups = [g.group_id for g in self.sink.list_groups()]
        committed: dict[str, list[CommittedOffset]] = {}
        for group, topic, partition, offset, at in self.sink.all_offsets():
            committed.setdefault(group, []).append(
                CommittedOffset(group, topic, partition, offset, commit_timestamp_ms=at)
            )
        ends = self.log_end_map({c.topic for parts in committed.values() for c in parts})
        for i in range(0, len(groups), chunk):
            started = time.monotonic()
            ids = groups[i : i + chunk]
            windows = self.sink.groups_recent_commits(ids, self.intervals)
            now = int(time.time() * 1000)
            for group in ids:
                partitions = [
                    PartitionView(
                        c,
                        ends.get(c.topic_partition),
                        self._window(c, windows.get((group, c.topic, c.partition), [])),
                    )
                    for c in committed.get(group, [])
                ]
                yield group, self.status_of(group, partitions, now)
            if between is not None and not between(time.monotonic() - started):
                return

    def status_of(
        self, group_id: str, partitions: list[PartitionView], now_ms: int | None = None
    ) -> GroupStatus:
        """Burrow's evaluation of the group from its ``partitions`` (their last ``intervals``
        commits count)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        statuses = [
            partition_status(
                p.committed.topic,
                p.committed.partition,
                p.window[-self.intervals :],
                p.lag or 0,
                self.log_ends.recent(p.topic_partition, self.intervals),
                now,
                self.intervals,
            )
            for p in partitions
        ]
        return group_status(self.cluster, group_id, statuses)
