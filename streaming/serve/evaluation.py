"""Burrow's consumer lag evaluation: a status per partition from a window of its recent commits,
and a status per group.

The rules are Burrow's (``core/internal/evaluator/caching.go``), in its order, over the last
``intervals`` commits of a partition, each with the lag it had when it was committed:

- the current lag is zero: OK, whatever the window says;
- STOP: the time since the last commit exceeds the time the window spans (the consumer stopped
  committing), unless a recent log-end offset shows the consumer was caught up;
- otherwise, if some commit of the window had zero lag: OK;
- REWIND: an offset lower than the one before it;
- STALL: the offset never changed over the window (lag, but no progress);
- WARN: offsets move but the lag never decreases (the consumer falls behind);
- else OK.

A group is the worst of its partitions, with STOP, STALL and REWIND reported as ERR. Pure
functions: the server gathers the windows (``streaming.serve.lag_view``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from itertools import pairwise
from typing import Any

#: Burrow's default window: 10 offsets per partition.
DEFAULT_INTERVALS = 10


class Status(IntEnum):
    """Burrow's status constants, in its order of severity."""

    NOTFOUND = 0
    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6


@dataclass(frozen=True)
class ConsumerOffset:
    """One commit of the window: Burrow's ``ConsumerOffset``. ``lag`` is None when no log-end
    offset was known at the time."""

    offset: int
    timestamp_ms: int
    observed_at_ms: int
    lag: int | None

    def as_burrow(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "timestamp": self.timestamp_ms,
            "observedAt": self.observed_at_ms,
            "lag": self.lag,
        }


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    status: Status
    current_lag: int
    complete: float
    start: ConsumerOffset | None = None
    end: ConsumerOffset | None = None
    owner: str = ""
    client_id: str = ""

    def as_burrow(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "owner": self.owner,
            "client_id": self.client_id,
            "status": self.status.name,
            "start": self.start.as_burrow() if self.start else None,
            "end": self.end.as_burrow() if self.end else None,
            "current_lag": self.current_lag,
            "complete": self.complete,
        }


@dataclass(frozen=True)
class GroupStatus:
    cluster: str
    group: str
    status: Status
    complete: float
    partitions: list[PartitionStatus] = field(default_factory=list)
    maxlag: PartitionStatus | None = None
    totallag: int = 0

    def as_burrow(self, only_problems: bool) -> dict[str, Any]:
        """Burrow's ``ConsumerGroupStatus``: ``/status`` lists only partitions not OK, ``/lag``
        lists every partition."""
        shown = [p for p in self.partitions if not only_problems or p.status != Status.OK]
        return {
            "cluster": self.cluster,
            "group": self.group,
            "status": self.status.name,
            "complete": self.complete,
            "partitions": [p.as_burrow() for p in shown],
            "partition_count": len(self.partitions),
            "maxlag": self.maxlag.as_burrow() if self.maxlag else None,
            "totallag": self.totallag,
        }


def partition_status(
    topic: str,
    partition: int,
    window: list[ConsumerOffset],
    current_lag: int,
    log_end_offsets: list[int],
    now_ms: int,
    intervals: int = DEFAULT_INTERVALS,
    minimum_complete: float = 0.0,
) -> PartitionStatus:
    """The status of one partition from its last commits (oldest first, at most ``intervals``)
    and the log-end offsets seen recently (``log_end_offsets``, for the STOP rule)."""
    offsets = window[-intervals:]
    complete = min(1.0, len(offsets) / intervals) if intervals else 1.0
    if not offsets:
        return PartitionStatus(topic, partition, Status.OK, current_lag, complete)
    status = Status.OK
    if complete >= minimum_complete:
        status = _calculate(offsets, log_end_offsets, current_lag, now_ms)
    return PartitionStatus(
        topic, partition, status, current_lag, complete, start=offsets[0], end=offsets[-1]
    )


def _calculate(
    offsets: list[ConsumerOffset], log_end_offsets: list[int], current_lag: int, now_ms: int
) -> Status:
    if current_lag <= 0:
        return Status.OK
    if _stopped(offsets, now_ms) and not _recent_lag_zero(offsets, log_end_offsets):
        return Status.STOP
    if any(o.lag == 0 for o in offsets):
        return Status.OK
    if any(b.offset < a.offset for a, b in pairwise(offsets)):
        return Status.REWIND
    if all(o.offset == offsets[0].offset for o in offsets):
        return Status.STALL
    if _lag_not_decreasing(offsets):
        return Status.WARN
    return Status.OK


def _stopped(offsets: list[ConsumerOffset], now_ms: int) -> bool:
    first, last = offsets[0].timestamp_ms, offsets[-1].timestamp_ms
    return (now_ms - last) > (last - first)


def _recent_lag_zero(offsets: list[ConsumerOffset], log_end_offsets: list[int]) -> bool:
    last = offsets[-1].offset
    return any(log_end <= last for log_end in log_end_offsets)


def _lag_not_decreasing(offsets: list[ConsumerOffset]) -> bool:
    previous: int | None = None
    for o in offsets:
        if o.lag is None:
            continue
        if previous is not None and o.lag < previous:
            return False
        previous = o.lag
    return True


def group_status(cluster: str, group: str, partitions: list[PartitionStatus]) -> GroupStatus:
    """The group's status: the worst partition's, STOP, STALL and REWIND counted as ERR."""
    status = Status.OK
    maxlag: PartitionStatus | None = None
    for p in partitions:
        if p.status > status:
            status = Status.ERR if p.status > Status.ERR else p.status
        if maxlag is None or p.current_lag > maxlag.current_lag:
            maxlag = p
    complete = (
        sum(1 for p in partitions if p.complete == 1.0) / len(partitions) if partitions else 0.0
    )
    return GroupStatus(
        cluster=cluster,
        group=group,
        status=status,
        complete=complete,
        partitions=partitions,
        maxlag=maxlag,
        totallag=sum(p.current_lag for p in partitions),
    )
