"""Kafka's offset-manager rules, one value at a time: the checks of ``KafkaApis``,
``GroupCoordinatorService``, ``OffsetMetadataManager`` and ``ClassicGroup`` that decide error codes
and expiry. The engine's fast path says the same over columns and is tested against them."""

from __future__ import annotations

import re

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.model import GroupMetadataValue, OffsetAndMetadata

#: Kafka's ``Topic.MAX_NAME_LENGTH``.
TOPIC_NAME_MAX_LENGTH = 249
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")

#: ``ConsumerProtocol.PROTOCOL_TYPE``: only such groups have a known subscription (KIP-496).
CONSUMER_PROTOCOL_TYPE = "consumer"

#: Kafka's ``Long.MAX_VALUE``: deadlines saturate here instead of wrapping; it never comes.
INT64_MAX = 2**63 - 1


def is_valid_topic(topic: str | None) -> bool:
    """Kafka's ``Topic.validate``: 1..249 chars of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    return (
        topic is not None
        and 0 < len(topic) <= TOPIC_NAME_MAX_LENGTH
        and topic not in (".", "..")
        and _TOPIC_NAME.fullmatch(topic) is not None
    )


#: Partition indexes at or past this get UNKNOWN_TOPIC_OR_PARTITION. Kafka has no such limit; it
#: bounds what readers allocate per topic (Burrow lists a group's partitions by index).
MAX_PARTITIONS_PER_TOPIC = 100_000


def is_valid_partition(partition: int | None) -> bool:
    """Not null, not negative, below ``MAX_PARTITIONS_PER_TOPIC``."""
    return partition is not None and 0 <= partition < MAX_PARTITIONS_PER_TOPIC


#: Longest string a record can hold (int16 length prefix), in UTF-8 bytes.
MAX_RECORD_STRING_BYTES = 0x7FFF


def is_valid_group_id(group_id: str | None, *, empty_allowed: bool = False) -> bool:
    """Kafka's group id check, plus it must fit a record key. ``empty_allowed``: Kafka 4.1 takes
    "" in OffsetCommit, OffsetFetch and DeleteGroups, not in TxnOffsetCommit, OffsetDelete and
    JoinGroup."""
    if group_id is None:
        return False
    if not group_id:
        return empty_allowed
    return len(group_id.encode("utf-8")) <= MAX_RECORD_STRING_BYTES


def java_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units (a character outside the BMP counts 2)."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def metadata_too_large(metadata: str | None, config: CoordinatorConfig) -> bool:
    """Whether commit metadata exceeds ``offset.metadata.max.bytes``, counted as Kafka does in
    UTF-16 code units despite the name (4,096 ``é`` pass, 4,097 ``x`` do not)."""
    return metadata is not None and java_length(metadata) > config.offset_metadata_max_bytes


def subscribed_topics(metadata: GroupMetadataValue | None) -> frozenset[str] | None:
    """The topics a ``consumer`` group's members subscribe to (``computeSubscribedTopics``), or
    None when unknown: no members, or a member naming no topic (whose offsets must not expire)."""
    if metadata is None or not metadata.members:
        return None
    if metadata.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    topics: set[str] = set()
    for member in metadata.members:
        if not member.subscribed_topics:
            return None
        topics.update(member.subscribed_topics)
    return frozenset(topics)


def is_subscribed(metadata: GroupMetadataValue | None, topic: str) -> bool:
    """``ClassicGroup.isSubscribedToTopic``: false when the subscription is unknown."""
    topics = subscribed_topics(metadata)
    return topics is not None and topic in topics


def validate_commit_group(
    metadata: GroupMetadataValue | None,
    exists: bool,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    *,
    transactional: bool = False,
) -> ErrorCode:
    """The group-level check of an OffsetCommit, or of a TxnOffsetCommit when ``transactional``
    (``ClassicGroup.validateOffsetCommit``).

    ``exists``: the group has GroupMetadata or offsets. A missing group takes a negative generation
    only; an Empty group takes any negative-generation commit (admin, standalone); otherwise the
    member (by static instance id when given) and generation must match. A commit naming neither
    member, generation nor instance is refused by a group with members unless transactional (the
    first TxnOffsetCommit versions carried none). A group with members is Stable (rebalance states
    are not modelled, so REBALANCE_IN_PROGRESS, never a TxnOffsetCommit's, is not either).
    """
    if not exists:
        return ErrorCode.NONE if generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
    members = metadata.members if metadata is not None else ()
    if generation_id < 0 and not members:
        return ErrorCode.NONE
    if generation_id >= 0 or member_id or group_instance_id is not None:
        if group_instance_id is not None:
            static_member = next(
                (m.member_id for m in members if m.group_instance_id == group_instance_id), None
            )
            if static_member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if static_member != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        elif all(m.member_id != member_id for m in members):
            return ErrorCode.UNKNOWN_MEMBER_ID
        generation = metadata.generation if metadata is not None else 0
        if generation_id != generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE
    # A legacy commit (no member id, no generation) to a group with members.
    return ErrorCode.NONE if transactional else ErrorCode.UNKNOWN_MEMBER_ID


def validate_offset_delete_group(metadata: GroupMetadataValue | None, exists: bool) -> ErrorCode:
    """``ClassicGroup.validateOffsetDelete`` (KIP-496): the group exists and, with members, uses
    the consumer protocol."""
    if not exists:
        return ErrorCode.GROUP_ID_NOT_FOUND
    if (
        metadata is not None
        and metadata.members
        and metadata.protocol_type != CONSUMER_PROTOCOL_TYPE
    ):
        return ErrorCode.NON_EMPTY_GROUP
    return ErrorCode.NONE


def validate_delete_group(metadata: GroupMetadataValue | None, exists: bool) -> ErrorCode:
    """``ClassicGroup.validateDeleteGroup``: only an existing group without members is deleted."""
    if not exists:
        return ErrorCode.GROUP_ID_NOT_FOUND
    if metadata is not None and metadata.members:
        return ErrorCode.NON_EMPTY_GROUP
    return ErrorCode.NONE


def expire_timestamp(timestamp_ms: int, retention_time_ms: int) -> int | None:
    """``commit time + retention_time_ms``, or None for -1 (the broker's retention). Any other
    value is explicit, as in Kafka; a sum past int64 saturates where Kafka's wraps (README,
    "Differences from Kafka")."""
    if retention_time_ms == -1:
        return None
    return saturating_add(timestamp_ms, retention_time_ms)


def saturating_add(a: int, b: int) -> int:
    """``a + b``, at most ``INT64_MAX`` (``state.engine.columns.saturating_add`` over columns)."""
    return min(a + b, INT64_MAX)


def offset_deadline(
    offset: OffsetAndMetadata,
    topic: str,
    metadata: GroupMetadataValue | None,
    config: CoordinatorConfig,
) -> int | None:
    """When ``offset`` (of ``topic`` in a group with ``metadata``) expires, the first expiry pass
    with ``now >= deadline`` removing it; None: not in the group's current state.

    As ``ClassicGroup.offsetExpirationCondition`` (KIP-211), the base being: with members, never,
    but for topics no member of a known ``consumer`` subscription reads (KIP-496) the commit time;
    Empty with GroupMetadata, the later of commit time and when it became Empty (Kafka: the latter
    alone); a simple group, the commit time. An explicit expire timestamp replaces
    ``base + offsets.retention.ms``.
    """
    if metadata is not None and metadata.members:
        topics = subscribed_topics(metadata)
        if topics is None or topic in topics:
            return None
        base = offset.commit_timestamp_ms
    elif metadata is not None:
        base = max(offset.commit_timestamp_ms, metadata.current_state_timestamp_ms)
    else:
        base = offset.commit_timestamp_ms
    if offset.expire_timestamp_ms is not None:
        return offset.expire_timestamp_ms
    return saturating_add(base, config.offsets_retention_ms)


def empty_group_deadline(metadata: GroupMetadataValue | None, has_offsets: bool) -> int | None:
    """When an Empty group with no offsets left gets its GroupMetadata tombstone: the first
    expiry pass at or after it became Empty."""
    if metadata is None or metadata.members or has_offsets:
        return None
    return metadata.current_state_timestamp_ms


_REASONS: dict[ErrorCode, str] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "invalid topic name or partition",
    ErrorCode.OFFSET_METADATA_TOO_LARGE: "commit metadata is longer than offset.metadata.max.bytes",
    ErrorCode.NOT_COORDINATOR: "group belongs to another offsets-topic partition",
    ErrorCode.ILLEGAL_GENERATION: "generation does not match the group's",
    ErrorCode.INVALID_GROUP_ID: "group id is null, empty or too long",
    ErrorCode.UNKNOWN_MEMBER_ID: "member is not in the group",
    ErrorCode.FENCED_INSTANCE_ID: "static member has a newer member id",
    ErrorCode.NON_EMPTY_GROUP: "group has members",
    ErrorCode.GROUP_ID_NOT_FOUND: "group does not exist",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "group members subscribe to the topic",
    ErrorCode.UNSTABLE_OFFSET_COMMIT: "an open transaction holds an offset commit of the group",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "the tenant's ACLs refuse this operation on the topic",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "the tenant's ACLs refuse this operation on the group",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (
        "the tenant's ACLs refuse WRITE on the request's transactionalId"
    ),
}


def error_reason(code: int) -> str | None:
    """The response's ``error_reason`` for an error this state machine decides; None for success."""
    if code == ErrorCode.NONE:
        return None
    return _REASONS.get(ErrorCode(code), ErrorCode(code).name)
