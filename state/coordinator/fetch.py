"""OffsetFetch semantics over a group's committed offsets, shared by the shard and the sink-backed
read API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetAndMetadata, TopicPartition

#: The offset Kafka answers for a partition without a committed offset
#: (``OffsetFetchResponse.INVALID_OFFSET``).
INVALID_OFFSET = -1


class PartitionData(NamedTuple):
    """One partition of an OffsetFetch response."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error_code: int


def fetch(
    committed: Mapping[TopicPartition, OffsetAndMetadata],
    partitions: Sequence[TopicPartition] | None,
) -> list[PartitionData]:
    """Answer an OffsetFetch for one group from its committed offsets.

    ``partitions`` None asks for every committed partition (sorted by topic and partition; none for
    a group that does not exist). A listed partition without a committed offset is answered with
    offset -1, leader epoch -1, metadata "" and no error, as Kafka does; listed partitions are
    answered in the order given, duplicates included.
    """
    if partitions is None:
        wanted: Sequence[TopicPartition] = sorted(committed)
    else:
        wanted = [TopicPartition(*tp) for tp in partitions]
    out: list[PartitionData] = []
    for tp in wanted:
        value = committed.get(tp)
        if value is None:
            out.append(
                PartitionData(tp.topic, tp.partition, INVALID_OFFSET, -1, "", ErrorCode.NONE)
            )
        else:
            out.append(
                PartitionData(
                    tp.topic,
                    tp.partition,
                    value.offset,
                    value.leader_epoch,
                    value.metadata,
                    ErrorCode.NONE,
                )
            )
    return out
