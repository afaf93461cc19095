"""Building a request from the caller's arguments (checked as Kafka's client checks them, before
anything is sent) and its ingest message, keyed by group id on the partition that owns the group
(``partition_for``), so one group's requests stay in order. No Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from state.coordinator.model import TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit, Request
from state.formats.request_codec import encode_request


class OffsetLike(Protocol):
    """Anything with an ``offset`` (and optionally ``metadata`` and ``leader_epoch``), such as
    ``state.coordinator.model.OffsetAndMetadata`` or kafka-python's ``OffsetAndMetadata``."""

    @property
    def offset(self) -> int: ...


#: What ``commit`` accepts: partitions to the next offset to consume, or to an offset-like value.
Offsets = Mapping[TopicPartition | tuple[str, int], int | OffsetLike]


def offset_commit(
    group_id: str,
    offsets: Offsets,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
    retention_ms: int = -1,
) -> OffsetCommitRequest:
    """The OffsetCommit of a ``commit``/``commit_async`` call, request id still empty (each
    attempt gets its own); raises like :func:`partition_commits`."""
    return OffsetCommitRequest(
        request_id="",
        group_id=group_id,
        partitions=tuple(partition_commits(offsets)),
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        retention_time_ms=retention_ms,
    )


def partition_commits(offsets: Offsets) -> list[PartitionCommit]:
    """The caller's offsets checked, in order: TypeError for a non-str topic, a non-int
    partition or offset (booleans included) or non-str metadata, ValueError for a negative
    offset (as Kafka's client)."""
    commits = []
    for tp, value in offsets.items():
        topic, partition = tp
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise TypeError(f"partition of {topic!r} must be an int, got {partition!r}")
        if isinstance(value, int) and not isinstance(value, bool):
            offset, metadata, epoch = value, "", -1
        elif hasattr(value, "offset") and not isinstance(value, bool):
            offset = value.offset
            metadata = getattr(value, "metadata", "") or ""
            epoch = getattr(value, "leader_epoch", -1)
            epoch = -1 if epoch is None else epoch
        else:
            raise TypeError(f"offset of {topic}-{partition} must be an int, got {value!r}")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f"offset of {topic}-{partition} must be an int, got {offset!r}")
        if offset < 0:
            raise ValueError(f"invalid negative offset {offset} for {topic}-{partition}")
        if not isinstance(metadata, str):
            raise TypeError(f"metadata of {topic}-{partition} must be a str")
        commits.append(PartitionCommit(topic, partition, offset, int(epoch), metadata))
    return commits


def partitions_of(request: OffsetCommitRequest) -> list[TopicPartition]:
    """The partitions an OffsetCommit asks for, in its order."""
    return [TopicPartition(c.topic, c.partition) for c in request.partitions]


def with_partitions(
    request: OffsetCommitRequest, request_id: str, partitions: Sequence[TopicPartition]
) -> OffsetCommitRequest:
    """One attempt of ``request`` with its request id, for ``partitions`` of the original (every
    other field kept: a retry commits exactly what the first attempt asked for them)."""
    by_tp = {TopicPartition(c.topic, c.partition): c for c in request.partitions}
    return replace(request, request_id=request_id, partitions=tuple(by_tp[tp] for tp in partitions))


def with_timeout(request: Request, timeout_ms: int) -> Request:
    """``request`` carrying ``timeout_ms`` (``timeoutMs``): the job refuses it, without applying
    anything, once it reaches it ``timeout_ms`` after its message's timestamp or later."""
    return replace(request, timeout_ms=timeout_ms)


@dataclass(frozen=True, slots=True)
class IngestMessage:
    """A request as the ingest topic carries it: key = the group id (UTF-8), value = its JSON."""

    request_id: str
    group_id: str
    key: bytes
    value: bytes

    def partition(self, partitions: int) -> int:
        """The partition of an ingest topic of ``partitions`` partitions that owns the group."""
        return partition_for(self.group_id, partitions)


def ingest_message(request: Request) -> IngestMessage:
    """``request`` encoded for the ingest topic; ValueError for text that is not valid Unicode
    (a lone surrogate), so callers encode before they register or send anything."""
    value = encode_request(request)
    return IngestMessage(
        request.request_id, request.group_id, request.group_id.encode("utf-8"), value
    )
