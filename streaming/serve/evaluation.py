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
- WARN: offsets move but the lag never decreases (the consumer falls behind), judged only
  when the lag at every commit of the window is known (a commit ``serve`` did not sample
  leaves the rule out: it cannot say "never");
- else OK.

A group is the worst of its partitions, with STOP, STALL and REWIND reported as ERR. Each
status carries a ``reason`` (the rule, since when): an extra field of Burrow's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from itertools import pairwise
from typing import Any

from connectors.client.liveness import duration

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
    #: Which rule gave the status and since when (not Burrow's: an extra field).
    reason: str = ""

    def as_burrow(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "owner": "",  # the sink knows no assignment
            "client_id": "",
            "status": self.status.name,
            "start": self.start.as_burrow() if self.start else None,
            "end": self.end.as_burrow() if self.end else None,
            "current_lag": self.current_lag,
            "complete": self.complete,
            "reason": self.reason,
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
    #: The worst partition's reason, named (not Burrow's: an extra field).
    reason: str = ""

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
            "reason": self.reason,
        }


def partition_status(
    topic: str,
    partition: int,
    window: list[ConsumerOffset],
    current_lag: int,
    log_end_offsets: list[int],
    now_ms: int,
    intervals: int = DEFAULT_INTERVALS,
) -> PartitionStatus:
    """The status of one partition from its last commits (oldest first, at most ``intervals``)
    and the log-end offsets seen recently (``log_end_offsets``, for the STOP rule)."""
    offsets = window[-intervals:]
    complete = min(1.0, len(offsets) / intervals) if intervals else 1.0
    if not offsets:
        return PartitionStatus(
            topic, partition, Status.OK, current_lag, complete, reason="OK: no commit yet"
        )
    status, reason = _calculate(offsets, log_end_offsets, current_lag, now_ms)
    return PartitionStatus(
        topic, partition, status, current_lag, complete, offsets[0], offsets[-1], reason
    )


def _calculate(
    offsets: list[ConsumerOffset], log_end_offsets: list[int], current_lag: int, now_ms: int
) -> tuple[Status, str]:
    """Burrow's rules in its order: the status and the reason (the rule, since when)."""
    first, last, n = offsets[0], offsets[-1], len(offsets)
    if current_lag <= 0:
        return Status.OK, "OK: caught up (lag 0)"
    stopped = now_ms - last.timestamp_ms > last.timestamp_ms - first.timestamp_ms
    # Burrow's "recent lag zero": a log-end offset seen lately at or below the last commit.
    if stopped and not any(end <= last.offset for end in log_end_offsets):
        window = (
            f"longer than the {duration(last.timestamp_ms - first.timestamp_ms)} its last {n}"
            " commits span"
            if n > 1
            else "one commit seen"
        )
        return Status.STOP, (
            f"STOP: no commit for {duration(now_ms - last.timestamp_ms)} while {current_lag:,}"
            f" behind ({window})"
        )
    if any(o.lag == 0 for o in offsets):
        return Status.OK, f"OK: lag 0 at one of its last {n} commits"
    back = next(((a, b) for a, b in pairwise(offsets) if b.offset < a.offset), None)
    if back is not None:
        return Status.REWIND, (
            f"REWIND: offset went back from {back[0].offset:,} to {back[1].offset:,}"
            f" {duration(now_ms - back[1].timestamp_ms)} ago"
        )
    if all(o.offset == first.offset for o in offsets):
        return Status.STALL, (
            f"STALL: offset {first.offset:,} unchanged over its last {n} commits"
            f" ({duration(now_ms - first.timestamp_ms)}) while {current_lag:,} behind"
        )
    # "Never fell" needs the lag at every commit: one not sampled (made before ``serve``
    # started, or before it first read the log end) may be where the lag fell, so the rule
    # is left out until the window holds only sampled commits, as Burrow's window after a
    # restart holds only what it saw.
    unsampled = sum(1 for o in offsets if o.lag is None)
    if unsampled:
        return Status.OK, (
            f"OK: consuming; lag not sampled at {unsampled} of its last {n} commits"
            " (made before serve read the log end)"
        )
    lags = [o.lag for o in offsets if o.lag is not None]
    if all(a <= b for a, b in pairwise(lags)):  # the lag never decreases
        return Status.WARN, (
            f"WARN: lag never fell over its last {n} commits ({lags[0]:,} to {lags[-1]:,})"
            f" in {duration(last.timestamp_ms - first.timestamp_ms)}: falling behind"
        )
    return Status.OK, f"OK: consuming, lag fell over its last {n} commits"


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
        reason=_group_reason(status, partitions),
    )


def _group_reason(status: Status, partitions: list[PartitionStatus]) -> str:
    """The worst partition's reason (then its lag), named, and how many others are not OK."""
    failing = [p for p in partitions if p.status != Status.OK]
    if not failing:
        return f"OK: all {len(partitions)} partition(s) consuming or caught up"
    worst = max(failing, key=lambda p: (p.status, p.current_lag))
    others = f"; {len(failing) - 1} other partition(s) not OK" if len(failing) > 1 else ""
    return f"{status.name}: {worst.topic}-{worst.partition} {worst.reason}{others}"
