"""Requests to the offset manager, in the shape of Kafka's OffsetCommit/OffsetDelete/DeleteGroups.

Producers write one request per message to the ingest topic (key: the group id, value: versioned
JSON, see ``state.formats.request_codec`` and the README). The streaming job flattens a batch of
messages into a *request frame*: one row per partition of each request (one row for requests without
partitions), in log order. ``REQUEST_FRAME_SCHEMA`` is that frame's contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import pyarrow as pa

from state.coordinator.model import MemberMetadata, TopicPartition

#: The newest ingest request format version this code reads and writes.
REQUEST_VERSION = 1


class Api(StrEnum):
    OFFSET_COMMIT = "OffsetCommit"
    OFFSET_DELETE = "OffsetDelete"
    DELETE_GROUPS = "DeleteGroups"
    # Stores a classic group's generation and members, as the coordinator does when a rebalance
    # completes (the GroupMetadata record). Commits are then checked against it.
    GROUP_METADATA = "GroupMetadata"


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    request_id: str
    group_id: str
    partitions: tuple[PartitionCommit, ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    #: -1 uses the broker's ``offsets.retention.minutes``.
    retention_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    """KIP-496: delete committed offsets of an empty group, or of topics it no longer subscribes."""

    request_id: str
    group_id: str
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest:
    """Delete one empty group and all its offsets (one group per ingest message)."""

    request_id: str
    group_id: str


@dataclass(frozen=True, slots=True)
class GroupMetadataRequest:
    request_id: str
    group_id: str
    generation_id: int
    protocol_type: str = "consumer"
    protocol: str | None = None
    leader: str | None = None
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


Request = OffsetCommitRequest | OffsetDeleteRequest | DeleteGroupsRequest | GroupMetadataRequest


@dataclass(frozen=True, slots=True)
class DecodeError:
    """An ingest message that is not a valid request: answered with ``error_code`` if it names a
    request id, else dead-lettered. ``reason`` names the offending field."""

    error_code: int
    reason: str
    request_id: str | None = None
    group_id: str | None = None
    api: str | None = None


#: One row per partition of each request, in log order (``ingest_offset``, ``partition_index``).
#: Request-level fields repeat on each row. Requests without partitions (DeleteGroups,
#: GroupMetadata, or a commit listing none) have one row with null topic/partition.
#: ``error_code`` != 0 marks a row the decoder already rejected, ``error_reason`` says why.
REQUEST_FRAME_SCHEMA = pa.schema(
    [
        pa.field("ingest_offset", pa.int64(), nullable=False),
        pa.field("partition_index", pa.int32(), nullable=False),
        # Broker append time of the ingest message (LogAppendTime): the commit timestamp.
        pa.field("timestamp_ms", pa.int64(), nullable=False),
        pa.field("api", pa.string()),
        pa.field("request_id", pa.string()),
        pa.field("group_id", pa.string()),
        pa.field("generation_id", pa.int32(), nullable=False),
        pa.field("member_id", pa.string(), nullable=False),
        pa.field("group_instance_id", pa.string()),
        pa.field("retention_time_ms", pa.int64(), nullable=False),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("leader_epoch", pa.int32(), nullable=False),
        pa.field("metadata", pa.string()),
        # GroupMetadata only: the request's "members" array as JSON text.
        pa.field("members_json", pa.string()),
        pa.field("error_code", pa.int16(), nullable=False),
        pa.field("error_reason", pa.string()),
    ]
)
