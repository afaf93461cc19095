"""Values of the offset manager, named as in Kafka's group coordinator (no validation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic, as Kafka names one."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (``OffsetCommitValue``); ``expire_timestamp_ms`` is set only when the
    commit carried an explicit retention."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member of a classic group, as stored in ``GroupMetadataValue.members``."""

    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    session_timeout_ms: int = 45_000
    # Topics the member subscribes to (the decoded ConsumerProtocolSubscription).
    subscribed_topics: tuple[str, ...] = ()
    # Raw ConsumerProtocolAssignment bytes; empty when unknown.
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """The value of a GroupMetadata record: a classic group's generation and members."""

    protocol_type: str = "consumer"
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


class OffsetCommitKey(NamedTuple):
    """Key of an offset record in ``__consumer_offsets`` (key versions 0 and 1)."""

    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    """Key of a group metadata record in ``__consumer_offsets`` (key version 2)."""

    group: str


class UnknownKey(NamedTuple):
    """A key version this project does not interpret (e.g. KIP-848 consumer-group records)."""

    version: int
    data: bytes


RecordKey = OffsetCommitKey | GroupMetadataKey | UnknownKey
RecordValue = OffsetAndMetadata | GroupMetadataValue | None  # None is a tombstone


class Record(NamedTuple):
    """One record of the offsets topic; ``value is None`` is a tombstone."""

    key: RecordKey
    value: RecordValue
