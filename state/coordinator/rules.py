"""Kafka's offset-manager rules, one value at a time.

These are the checks of Kafka's ``KafkaApis``, ``GroupCoordinatorService``,
``OffsetMetadataManager`` and ``ClassicGroup`` that decide a request's error codes and when an
offset expires. The reference coordinator and the shard's exact path call them; the shard's
vectorized commit path implements the same rules over columns and is tested against them.
"""

from __future__ import annotations

import re

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.model import GroupMetadataValue, OffsetAndMetadata

#: Kafka's ``Topic.MAX_NAME_LENGTH``.
TOPIC_NAME_MAX_LENGTH = 249
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")

#: The consumer protocol type (``ConsumerProtocol.PROTOCOL_TYPE``): only such groups have a known
#: subscription, which KIP-496 uses for OffsetDelete and offset expiry.
CONSUMER_PROTOCOL_TYPE = "consumer"

#: The largest int64 (Kafka's ``Long.MAX_VALUE``): deadlines saturate here instead of wrapping
#: around, and a deadline of INT64_MAX never comes. The engine's vectorized arithmetic and the
#: record codecs' range checks use this one.
INT64_MAX = 2**63 - 1


def is_valid_topic(topic: str | None) -> bool:
    """Kafka's ``Topic.validate``: 1..249 chars of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    return (
        topic is not None
        and 0 < len(topic) <= TOPIC_NAME_MAX_LENGTH
        and topic not in (".", "..")
        and _TOPIC_NAME.fullmatch(topic) is not None
    )


#: The job answers UNKNOWN_TOPIC_OR_PARTITION for a partition index at or past this. Kafka has no
#: hard limit (any int32 index), but no real topic comes near it; the cap bounds what any reader
#: of the offsets allocates per topic, e.g. Burrow's positional list of a group's partitions (a
#: commit of partition 2^31-1 would make it 2^31 entries long).
MAX_PARTITIONS_PER_TOPIC = 100_000


def is_valid_partition(partition: int | None) -> bool:
    """A partition index the job takes: not null, not negative, below
    :data:`MAX_PARTITIONS_PER_TOPIC`."""
    return partition is not None and 0 <= partition < MAX_PARTITIONS_PER_TOPIC


#: Longest string a record can hold (int16 length prefix), in UTF-8 bytes.
MAX_RECORD_STRING_BYTES = 0x7FFF


def is_valid_group_id(group_id: str | None, *, empty_allowed: bool = False) -> bool:
    """Kafka's group id check, plus a group id must fit in a record key.

    Kafka 4.1 takes an empty group id in OffsetCommit, OffsetFetch and DeleteGroups
    (``empty_allowed``: the group "" is a group like any other) and refuses it in OffsetDelete and
    JoinGroup (``GroupCoordinatorService.isGroupIdNotEmpty``). A group id too long for a record
    fails in Kafka when the record is written; here every API answers INVALID_GROUP_ID."""
    if group_id is None:
        return False
    if not group_id:
        return empty_allowed
    return len(group_id.encode("utf-8")) <= MAX_RECORD_STRING_BYTES


def java_length(text: str) -> int:
    """Java's ``String.length()`` of ``text``: UTF-16 code units (a character outside the Basic
    Multilingual Plane counts twice)."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def metadata_too_large(metadata: str | None, config: CoordinatorConfig) -> bool:
    """Whether commit metadata exceeds ``offset.metadata.max.bytes``.

    Kafka compares Java's ``String.length()`` (UTF-16 code units) despite the setting's name, so
    4,096 ``é`` (8,192 bytes of UTF-8) pass and 4,097 ``x`` do not; the record's int16 length
    prefix still bounds the bytes (``CoordinatorConfig`` keeps the setting at most 32,767 / 4).
    """
    return metadata is not None and java_length(metadata) > config.offset_metadata_max_bytes


def subscribed_topics(metadata: GroupMetadataValue | None) -> frozenset[str] | None:
    """The topics a classic group's members subscribe to, or None when unknown.

    Known only for a ``consumer`` group with members that all name their topics, as Kafka's
    ``ClassicGroup.computeSubscribedTopics`` knows it only when every member's subscription parses.
    A member with no topics counts as unknown: a request that omits subscriptions must not make
    active members' offsets expire.
    """
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
) -> ErrorCode:
    """The group-level check of an OffsetCommit (``OffsetMetadataManager.validateOffsetCommit`` and
    ``ClassicGroup.validateOffsetCommit``).

    ``exists``: the group has GroupMetadata or committed offsets. A missing group accepts a commit
    with a negative generation (it becomes a simple group) and answers ILLEGAL_GENERATION otherwise
    (OffsetCommit < v9). A group is Empty when it has no members (a simple group always is); an
    Empty group accepts negative-generation commits whatever the member id (admin and standalone
    commits).
    Otherwise the member must be in the group (by static instance id when given) and the generation
    must be the group's. Rebalance states are not modelled: a group with members is Stable.
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
    return ErrorCode.UNKNOWN_MEMBER_ID


def validate_offset_delete_group(metadata: GroupMetadataValue | None, exists: bool) -> ErrorCode:
    """KIP-496 group check: the group must exist; a group with members must use the consumer
    protocol (``ClassicGroup.validateOffsetDelete``), whose subscribed topics are then protected."""
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
    """The explicit expire timestamp of a commit: ``commit time + retention_time_ms`` when the
    request sets a retention (OffsetCommit v2-v4), else None and the broker's retention applies.

    As in Kafka's ``OffsetMetadataManager``, any value other than -1 is explicit: 0 or a negative
    retention expires the offset at the next retention check. Where the sum passes the int64
    range Kafka's wraps around to a past timestamp and the offset expires at once; here it
    saturates and the offset never expires (README, "Differences from Kafka")."""
    if retention_time_ms == -1:
        return None
    return saturating_add(timestamp_ms, retention_time_ms)


def saturating_add(a: int, b: int) -> int:
    """``a + b``, or ``INT64_MAX`` when the sum passes it: a deadline that would overflow a Java
    long never comes (``state.engine.columns.saturating_add`` is the same over columns)."""
    return min(a + b, INT64_MAX)


def offset_deadline(
    offset: OffsetAndMetadata,
    topic: str,
    metadata: GroupMetadataValue | None,
    config: CoordinatorConfig,
) -> int | None:
    """When ``offset`` (of ``topic`` in a group with ``metadata``) expires: it is removed by the
    first expiry pass with ``now >= deadline``; None means it cannot expire in the group's current
    state.

    Kafka >= 2.1 (KIP-211) via ``ClassicGroup.offsetExpirationCondition``:
    - a group with members: offsets never expire, except, in a ``consumer`` group with a known
      subscription, offsets of topics no member subscribes to (KIP-496), based on the commit time;
    - an Empty group with GroupMetadata: based on the later of the commit time and the time the
      group became Empty (Kafka uses the latter alone, which can expire a commit made after the
      group emptied as soon as it is written);
    - a simple group (offsets only): based on the commit time.
    An explicit expire timestamp (OffsetCommit v1 value) replaces ``base + offsets.retention.ms``.
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
    """When a group's GroupMetadata is deleted for being Empty with no offsets left.

    Kafka deletes such a group (writing a GroupMetadata tombstone) in the first expiry pass after it
    became Empty and lost its last offset; here that pass is the first with ``now`` at or after the
    time it became Empty.
    """
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
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "the tenant's ACLs refuse this operation on the topic",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "the tenant's ACLs refuse this operation on the group",
}


def error_reason(code: int) -> str | None:
    """The response's ``error_reason`` for an error this state machine decides; None for success."""
    if code == ErrorCode.NONE:
        return None
    return _REASONS.get(ErrorCode(code), ErrorCode(code).name)
