"""Kafka's request handlers for one group: validate a request, return its records and responses.

As in ``OffsetMetadataManager``, a handler reads the group through a ``GroupView`` and never changes
it: the caller replays the records. Used by the reference coordinator and the shard's exact path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
    TopicPartition,
)
from state.coordinator.requests import (
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    Request,
    TxnOffsetCommitRequest,
)
from state.coordinator.rules import (
    error_reason,
    expire_timestamp,
    is_subscribed,
    is_valid_group_id,
    is_valid_partition,
    is_valid_topic,
    metadata_too_large,
    validate_commit_group,
    validate_delete_group,
    validate_offset_delete_group,
)


@dataclass(frozen=True, slots=True)
class Response:
    """A partition's answer, or the request's (``topic`` and ``partition`` None)."""

    topic: str | None
    partition: int | None
    error_code: int
    error_reason: str | None = None

    @staticmethod
    def of(topic: str | None, partition: int | None, code: int) -> Response:
        return Response(topic, partition, int(code), error_reason(code))


@dataclass(frozen=True, slots=True)
class HandlerResult:
    """Records to replay, in order, and a response per partition (request order) or one for the
    request."""

    records: list[Record]
    responses: list[Response]


class GroupView(Protocol):
    """Read access to one group's current state."""

    @property
    def metadata(self) -> GroupMetadataValue | None:
        """The group's GroupMetadata; None for a simple group (offsets only) or no group."""
        ...

    def exists(self) -> bool:
        """Whether the group has GroupMetadata or at least one committed offset."""
        ...

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        """The committed offset of ``tp``, None if there is none."""
        ...

    def topic_partitions(self) -> list[TopicPartition]:
        """All partitions with a committed offset, sorted."""
        ...


def handle(
    request: Request,
    group: GroupView,
    timestamp_ms: int,
    shard_id: int,
    config: CoordinatorConfig,
) -> HandlerResult:
    """Answer ``request`` over its group's view (empty for no group or an invalid id);
    ``timestamp_ms``, its log-append time, stamps commits and metadata changes."""
    if isinstance(request, OffsetCommitRequest | TxnOffsetCommitRequest):
        return _offset_commit(request, group, timestamp_ms, shard_id, config)
    if isinstance(request, OffsetDeleteRequest):
        return _offset_delete(request, group, shard_id, config)
    if isinstance(request, DeleteGroupsRequest):
        return _delete_group(request, group, shard_id, config)
    if isinstance(request, GroupMetadataRequest):
        return _group_metadata(request, timestamp_ms, shard_id, config)
    raise TypeError(f"not a request: {type(request).__name__}")


def _group_id_error(
    group_id: str | None, shard_id: int, config: CoordinatorConfig, *, empty_allowed: bool = False
) -> ErrorCode:
    """INVALID_GROUP_ID for an unusable id, NOT_COORDINATOR for another shard's group."""
    if not is_valid_group_id(group_id, empty_allowed=empty_allowed):
        return ErrorCode.INVALID_GROUP_ID
    assert group_id is not None
    if config.state_shard_for(group_id) != shard_id:
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.NONE


def _group_error(
    group_id: str,
    group: GroupView,
    shard_id: int,
    config: CoordinatorConfig,
    validate: Callable[[GroupMetadataValue | None, bool], ErrorCode],
    *,
    empty_allowed: bool = False,
) -> ErrorCode:
    """The id checks, then ``validate(metadata, exists)`` of the group's state."""
    error = _group_id_error(group_id, shard_id, config, empty_allowed=empty_allowed)
    if error == ErrorCode.NONE:
        error = validate(group.metadata, group.exists())
    return error


def _answer(code: ErrorCode, records: list[Record] | None = None) -> HandlerResult:
    """A request-level answer, with the ``records`` to replay."""
    return HandlerResult(records or [], [Response.of(None, None, code)])


def _offset_commit(
    request: OffsetCommitRequest | TxnOffsetCommitRequest,
    group: GroupView,
    timestamp_ms: int,
    shard_id: int,
    config: CoordinatorConfig,
) -> HandlerResult:
    """OffsetCommit and TxnOffsetCommit: one response per partition, in request order, and a
    record per accepted partition (``OffsetMetadataManager.commitOffset`` and
    ``commitTransactionalOffset``). A TxnOffsetCommit reaches the state only once its
    transaction committed; it differs in its group checks (``validate_commit_group``), refuses
    the empty group id (``GroupCoordinatorService.commitTransactionalOffsets``) and has no
    retention."""
    transactional = isinstance(request, TxnOffsetCommitRequest)
    # A commit listing no partitions is answered by Kafka's KafkaApis without the coordinator.
    if not request.partitions:
        return _answer(ErrorCode.NONE)
    codes: list[ErrorCode | None] = [None] * len(request.partitions)
    # Unknown topics are answered per partition before the coordinator sees the request (KafkaApis);
    # if none is left, group errors are never reported.
    for i, p in enumerate(request.partitions):
        if not (is_valid_topic(p.topic) and is_valid_partition(p.partition)):
            codes[i] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    records: list[Record] = []
    if any(code is None for code in codes):
        group_error = _group_id_error(
            request.group_id, shard_id, config, empty_allowed=not transactional
        )
        if group_error == ErrorCode.NONE:
            group_error = validate_commit_group(
                group.metadata,
                group.exists(),
                request.generation_id,
                request.member_id,
                request.group_instance_id,
                transactional=transactional,
            )
        retention = request.retention_time_ms if isinstance(request, OffsetCommitRequest) else -1
        expire = expire_timestamp(timestamp_ms, retention)
        for i, p in enumerate(request.partitions):
            if codes[i] is not None:
                continue
            if group_error != ErrorCode.NONE:
                codes[i] = group_error
            elif metadata_too_large(p.metadata, config):
                codes[i] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                codes[i] = ErrorCode.NONE
                value = OffsetAndMetadata(
                    offset=p.offset,
                    # A commit with an explicit expire timestamp is written as OffsetCommitValue v1,
                    # which has no leader epoch: keep what the record holds, so state rebuilt from
                    # the offsets topic equals the state that wrote it.
                    leader_epoch=p.leader_epoch if expire is None else -1,
                    metadata=p.metadata or "",
                    commit_timestamp_ms=timestamp_ms,
                    expire_timestamp_ms=expire,
                )
                records.append(
                    Record(OffsetCommitKey(request.group_id, p.topic, p.partition), value)
                )
    responses = [
        Response.of(p.topic, p.partition, code)
        for p, code in zip(request.partitions, codes, strict=True)
        if code is not None
    ]
    return HandlerResult(records, responses)


def _offset_delete(
    request: OffsetDeleteRequest,
    group: GroupView,
    shard_id: int,
    config: CoordinatorConfig,
) -> HandlerResult:
    """OffsetDelete (KIP-496): a request-level error, or one response per partition and a
    tombstone per committed offset deleted (``OffsetMetadataManager.deleteOffsets``)."""
    group_error = _group_error(
        request.group_id, group, shard_id, config, validate_offset_delete_group
    )
    # A request-level error is the whole answer, as in Kafka's OffsetDelete response.
    if group_error != ErrorCode.NONE or not request.partitions:
        return _answer(group_error)
    records: list[Record] = []
    responses: list[Response] = []
    deleted: set[TopicPartition] = set()
    for tp in request.partitions:
        topic, partition = tp
        if not (is_valid_topic(topic) and is_valid_partition(partition)):
            responses.append(Response.of(topic, partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        elif is_subscribed(group.metadata, topic):
            responses.append(Response.of(topic, partition, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
        else:
            key = TopicPartition(topic, partition)
            if key not in deleted and group.offset(key) is not None:
                deleted.add(key)
                records.append(Record(OffsetCommitKey(request.group_id, topic, partition), None))
            responses.append(Response.of(topic, partition, ErrorCode.NONE))
    return HandlerResult(records, responses)


def _delete_group(
    request: DeleteGroupsRequest,
    group: GroupView,
    shard_id: int,
    config: CoordinatorConfig,
) -> HandlerResult:
    """DeleteGroups for one group: tombstones for its offsets, then for the group."""
    group_error = _group_error(
        request.group_id, group, shard_id, config, validate_delete_group, empty_allowed=True
    )
    if group_error != ErrorCode.NONE:
        return _answer(group_error)
    records = [
        Record(OffsetCommitKey(request.group_id, tp.topic, tp.partition), None)
        for tp in group.topic_partitions()
    ]
    # Kafka writes the group's tombstone whether or not it ever had a GroupMetadata record (a
    # group of standalone commits has none).
    records.append(Record(GroupMetadataKey(request.group_id), None))
    return _answer(ErrorCode.NONE, records)


def _group_metadata(
    request: GroupMetadataRequest,
    timestamp_ms: int,
    shard_id: int,
    config: CoordinatorConfig,
) -> HandlerResult:
    """GroupMetadata: the group's new GroupMetadata record, its state time ``timestamp_ms``."""
    group_error = _group_id_error(request.group_id, shard_id, config)
    if group_error != ErrorCode.NONE:
        return _answer(group_error)
    value = GroupMetadataValue(
        protocol_type=request.protocol_type,
        generation=request.generation_id,
        protocol=request.protocol,
        leader=request.leader,
        current_state_timestamp_ms=timestamp_ms,
        members=tuple(request.members),
    )
    return _answer(ErrorCode.NONE, [Record(GroupMetadataKey(request.group_id), value)])
