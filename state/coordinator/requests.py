"""Requests to the offset manager, in the shape of Kafka's OffsetCommit/TxnOffsetCommit/
OffsetDelete/DeleteGroups.

One request per ingest message (wire format: ``state.formats.request_codec``); ``timeout_ms``
(None: the job's default) bounds when it may be applied (``state.coordinator.deadlines``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from state.coordinator.model import MemberMetadata, TopicPartition

#: The newest ingest request format version this code reads and writes.
REQUEST_VERSION = 1


class Api(StrEnum):
    """The requests of the ingest format (its ``api`` field), named as Kafka's APIs."""

    OFFSET_COMMIT = "OffsetCommit"
    TXN_OFFSET_COMMIT = "TxnOffsetCommit"
    OFFSET_DELETE = "OffsetDelete"
    DELETE_GROUPS = "DeleteGroups"
    # A classic group's generation and members, as stored when a rebalance completes.
    GROUP_METADATA = "GroupMetadata"


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    """One partition of an OffsetCommit: the offset to commit, with its leader epoch (-1:
    unknown) and metadata."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    """Commit offsets for a group, as a member of ``generation_id`` (-1 with an empty member id:
    an admin or standalone commit)."""

    request_id: str
    group_id: str
    partitions: tuple[PartitionCommit, ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    #: -1 uses the broker's ``offsets.retention.minutes``.
    retention_time_ms: int = -1
    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    """Commit offsets for a group inside the producer's transaction (KIP-98, KIP-447): written
    to the ingest topic in that transaction, so it is applied only if the transaction commits.

    Validated as an OffsetCommit except that a request without member id and generation is taken
    even when the group has members; no retention (Kafka's TxnOffsetCommit has none) and no
    deadline: the job sees it only once its transaction committed, and the transaction's output
    then stands, so it is applied however late. The transactional id, producer id and epoch name
    the transaction holding it."""

    request_id: str
    group_id: str
    transactional_id: str
    producer_id: int  # int64
    producer_epoch: int  # int16
    partitions: tuple[PartitionCommit, ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    """KIP-496: delete committed offsets of an empty group, or of topics it no longer subscribes."""

    request_id: str
    group_id: str
    partitions: tuple[TopicPartition, ...]
    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest:
    """Delete one empty group and all its offsets (one group per ingest message)."""

    request_id: str
    group_id: str
    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataRequest:
    """Store a classic group's generation and members (the GroupMetadata record written when a
    rebalance completes)."""

    request_id: str
    group_id: str
    generation_id: int
    protocol_type: str = "consumer"
    protocol: str | None = None
    leader: str | None = None
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)
    timeout_ms: int | None = None


Request = (
    OffsetCommitRequest
    | TxnOffsetCommitRequest
    | OffsetDeleteRequest
    | DeleteGroupsRequest
    | GroupMetadataRequest
)


@dataclass(frozen=True, slots=True)
class DecodeError:
    """An ingest message that is not a valid request: answered with ``error_code`` if it names a
    request id, else dead-lettered. ``reason`` names the offending field."""

    error_code: int
    reason: str
    request_id: str | None = None
    group_id: str | None = None
    api: str | None = None
