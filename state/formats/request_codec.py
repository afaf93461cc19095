"""The ingest request wire format: one versioned UTF-8 JSON object per Kafka message.

The message key is the group id (UTF-8: a TxnOffsetCommit keyed otherwise is a dead letter,
``keyed_request``); the value is one of (``?`` = optional, with its default)::

    {"version": 1, "api": "OffsetCommit", "requestId": "r-1", "groupId": "g", "timeoutMs"?: null,
     "generationId"?: -1, "memberId"?: "", "groupInstanceId"?: null, "retentionTimeMs"?: -1,
     "topics": [{"name": "t", "partitions": [{"partitionIndex": 0, "committedOffset": 42,
                 "committedLeaderEpoch"?: -1, "committedMetadata"?: ""}]}]}
    {"version": 1, "api": "TxnOffsetCommit", "requestId": "r-5", "groupId": "g",
     "transactionalId": "tx-1", "producerId": 4000, "producerEpoch": 0, "generationId"?: -1,
     "memberId"?: "", "groupInstanceId"?: null, "topics": [...as OffsetCommit's]}
    {"version": 1, "api": "OffsetDelete", "requestId": "r-2", "groupId": "g",
     "topics": [{"name": "t", "partitions": [{"partitionIndex": 0}]}]}
    {"version": 1, "api": "DeleteGroups", "requestId": "r-3", "groupId": "g"}
    {"version": 1, "api": "GroupMetadata", "requestId": "r-4", "groupId": "g", "generationId": 3,
     "protocolType"?: "consumer", "protocolName"?: null, "leader"?: null,
     "members"?: [{"memberId": "m1", "groupInstanceId"?: null, "clientId"?: "",
                   "clientHost"?: "", "rebalanceTimeoutMs"?: 300000,
                   "sessionTimeoutMs"?: 45000, "subscribedTopics"?: []}]}

Field names are Kafka's. Every request but TxnOffsetCommit may carry ``timeoutMs`` (int32 >= 0;
absent or null: the job's default; ``state.coordinator.deadlines``). ``retentionTimeMs`` -1 is
the broker default; ``committedMetadata`` null means "". A TxnOffsetCommit is produced inside
the transaction it names (``transactionalId`` not empty, ``producerId`` int64, ``producerEpoch``
int16) and has no ``retentionTimeMs`` (Kafka's has none) and no ``timeoutMs`` (it is read only
once its transaction committed, and then applied however late); both are ignored if present.
Only ``groupInstanceId``, ``protocolName``, ``leader`` and ``timeoutMs`` may be null.

The decoder checks shape and types only: JSON types, and integers (not booleans, not ``1.0``)
within their Kafka type; the state machine answers semantic faults with Kafka's error codes.
Unknown fields are ignored (a change old readers must not ignore needs a new ``version``); a key
repeated in one object is rejected, as JSON readers disagree on which occurrence wins.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from state.coordinator.errors import ErrorCode
from state.coordinator.model import MemberMetadata, TopicPartition
from state.coordinator.requests import (
    REQUEST_VERSION,
    Api,
    DecodeError,
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    Request,
    TxnOffsetCommitRequest,
)
from state.formats.json_fields import (
    INT16,
    INT32,
    INT64,
    REQUIRED,
    DuplicateKeys,
    HugeInt,
    InvalidRequest,
    as_object,
    is_valid_text,
    json_type,
    parse_json,
    read_array,
    read_int,
    read_nullable_str,
    read_str,
    read_text,
    reject,
)


def _topics_json(
    pairs: Iterable[tuple[str, dict[str, Any]]],
) -> list[dict[str, Any]]:
    """(topic, partition object) pairs nested as Kafka's topics → partitions, merging only
    consecutive runs so that decoding returns the original order."""
    topics: list[dict[str, Any]] = []
    last: str | None = None
    for topic, partition in pairs:
        if not topics or topic != last:
            topics.append({"name": topic, "partitions": []})
            last = topic
        topics[-1]["partitions"].append(partition)
    return topics


def _member_json(m: MemberMetadata) -> dict[str, Any]:
    """An element of a GroupMetadata request's ``members`` (no ``assignment``)."""
    return {
        "memberId": m.member_id,
        "groupInstanceId": m.group_instance_id,
        "clientId": m.client_id,
        "clientHost": m.client_host,
        "rebalanceTimeoutMs": m.rebalance_timeout_ms,
        "sessionTimeoutMs": m.session_timeout_ms,
        "subscribedTopics": list(m.subscribed_topics),
    }


def _dumps(obj: object) -> str:
    """``obj`` as compact JSON, no NaN, non-ASCII literal."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _partitions_json(partitions: Iterable[PartitionCommit]) -> list[dict[str, Any]]:
    """A commit's ``topics`` array."""
    return _topics_json(
        (
            p.topic,
            {
                "partitionIndex": p.partition,
                "committedOffset": p.offset,
                "committedLeaderEpoch": p.leader_epoch,
                "committedMetadata": p.metadata,
            },
        )
        for p in partitions
    )


def encode_request(request: Request) -> bytes:
    """The UTF-8 JSON value of an ingest message: ``decode_request(encode_request(r)) == r`` for
    fields that fit their types (not range-checked here). ``ValueError`` for a lone surrogate,
    ``TypeError`` for a value JSON cannot hold."""
    head: dict[str, Any] = {"version": REQUEST_VERSION}
    if isinstance(request, OffsetCommitRequest):
        head |= {
            "api": Api.OFFSET_COMMIT.value,
            "requestId": request.request_id,
            "groupId": request.group_id,
            "generationId": request.generation_id,
            "memberId": request.member_id,
            "groupInstanceId": request.group_instance_id,
            "retentionTimeMs": request.retention_time_ms,
            "topics": _partitions_json(request.partitions),
        }
    elif isinstance(request, TxnOffsetCommitRequest):
        head |= {
            "api": Api.TXN_OFFSET_COMMIT.value,
            "requestId": request.request_id,
            "groupId": request.group_id,
            "transactionalId": request.transactional_id,
            "producerId": request.producer_id,
            "producerEpoch": request.producer_epoch,
            "generationId": request.generation_id,
            "memberId": request.member_id,
            "groupInstanceId": request.group_instance_id,
            "topics": _partitions_json(request.partitions),
        }
    elif isinstance(request, OffsetDeleteRequest):
        head |= {
            "api": Api.OFFSET_DELETE.value,
            "requestId": request.request_id,
            "groupId": request.group_id,
            "topics": _topics_json(
                (tp.topic, {"partitionIndex": tp.partition}) for tp in request.partitions
            ),
        }
    elif isinstance(request, DeleteGroupsRequest):
        head |= {
            "api": Api.DELETE_GROUPS.value,
            "requestId": request.request_id,
            "groupId": request.group_id,
        }
    elif isinstance(request, GroupMetadataRequest):
        head |= {
            "api": Api.GROUP_METADATA.value,
            "requestId": request.request_id,
            "groupId": request.group_id,
            "generationId": request.generation_id,
            "protocolType": request.protocol_type,
            "protocolName": request.protocol,
            "leader": request.leader,
            "members": [_member_json(m) for m in request.members],
        }
    else:
        raise TypeError(f"not a request: {type(request).__name__}")
    timeout_ms = None if isinstance(request, TxnOffsetCommitRequest) else request.timeout_ms
    if timeout_ms is not None:
        head["timeoutMs"] = timeout_ms
    return _dumps(head).encode("utf-8")


def encode_members(members: Iterable[MemberMetadata]) -> str:
    """Members as a GroupMetadata request's JSON array (the frame's ``members_json``)."""
    return _dumps([_member_json(m) for m in members])


def _topics(obj: dict[str, Any]) -> Iterator[tuple[str, str, list[Any]]]:
    """(name, JSON path, raw partitions array) of each entry of ``topics``, in order."""
    for ti, raw_topic in enumerate(read_array(obj, "topics", "")):
        tpath = f"topics[{ti}]"
        topic_obj = as_object(raw_topic, tpath)
        name = read_str(topic_obj, "name", tpath)
        yield name, tpath, read_array(topic_obj, "partitions", tpath)


def _checked_commit_partition(topic: str, raw: object, path: str) -> PartitionCommit:
    p = as_object(raw, path)
    index = read_int(p, "partitionIndex", path, INT32)
    offset = read_int(p, "committedOffset", path, INT64)
    epoch = read_int(p, "committedLeaderEpoch", path, INT32, -1)
    # Kafka stores a null metadata as "" (OffsetAndMetadata.NO_METADATA).
    metadata = read_nullable_str(p, "committedMetadata", path) or ""
    return PartitionCommit(topic, index, offset, epoch, metadata)


def _commit_partitions(obj: dict[str, Any]) -> tuple[PartitionCommit, ...]:
    """The partitions of a commit's ``topics``, in order."""
    return tuple(
        _checked_commit_partition(name, p, f"{tpath}.partitions[{pi}]")
        for name, tpath, raw_partitions in _topics(obj)
        for pi, p in enumerate(raw_partitions)
    )


def _offset_commit(
    obj: dict[str, Any], request_id: str, group_id: str, timeout_ms: int | None
) -> OffsetCommitRequest:
    generation_id = read_int(obj, "generationId", "", INT32, -1)
    member_id = read_str(obj, "memberId", "", "")
    instance_id = read_nullable_str(obj, "groupInstanceId", "")
    retention = read_int(obj, "retentionTimeMs", "", INT64, -1)
    return OffsetCommitRequest(
        request_id=request_id,
        group_id=group_id,
        partitions=_commit_partitions(obj),
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
        retention_time_ms=retention,
        timeout_ms=timeout_ms,
    )


def _txn_offset_commit(
    obj: dict[str, Any], request_id: str, group_id: str, _timeout_ms: int | None
) -> TxnOffsetCommitRequest:
    transactional_id = read_str(obj, "transactionalId", "")
    if not transactional_id:
        reject("transactionalId", "empty")
    producer_id = read_int(obj, "producerId", "", INT64)
    producer_epoch = read_int(obj, "producerEpoch", "", INT16)
    generation_id = read_int(obj, "generationId", "", INT32, -1)
    member_id = read_str(obj, "memberId", "", "")
    instance_id = read_nullable_str(obj, "groupInstanceId", "")
    return TxnOffsetCommitRequest(
        request_id=request_id,
        group_id=group_id,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partitions=_commit_partitions(obj),
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
    )


def _offset_delete(
    obj: dict[str, Any], request_id: str, group_id: str, timeout_ms: int | None
) -> OffsetDeleteRequest:
    partitions = []
    for name, tpath, raw_partitions in _topics(obj):
        for pi, raw in enumerate(raw_partitions):
            path = f"{tpath}.partitions[{pi}]"
            index = read_int(as_object(raw, path), "partitionIndex", path, INT32)
            partitions.append(TopicPartition(name, index))
    return OffsetDeleteRequest(
        request_id=request_id,
        group_id=group_id,
        partitions=tuple(partitions),
        timeout_ms=timeout_ms,
    )


def _members(values: list[Any], prefix: str) -> tuple[MemberMetadata, ...]:
    """The members of a JSON ``members`` array at path ``prefix``, absent fields defaulted."""
    members = []
    for i, raw in enumerate(values):
        path = f"{prefix}[{i}]"
        m = as_object(raw, path)
        topics_path = f"{path}.subscribedTopics"
        topics = [
            read_text(t, topics_path, j)
            for j, t in enumerate(read_array(m, "subscribedTopics", path, []))
        ]
        members.append(
            MemberMetadata(
                member_id=read_str(m, "memberId", path),
                group_instance_id=read_nullable_str(m, "groupInstanceId", path),
                client_id=read_str(m, "clientId", path, ""),
                client_host=read_str(m, "clientHost", path, ""),
                rebalance_timeout_ms=read_int(m, "rebalanceTimeoutMs", path, INT32, 300_000),
                session_timeout_ms=read_int(m, "sessionTimeoutMs", path, INT32, 45_000),
                subscribed_topics=tuple(topics),
            )
        )
    return tuple(members)


def _group_metadata(
    obj: dict[str, Any], request_id: str, group_id: str, timeout_ms: int | None
) -> GroupMetadataRequest:
    return GroupMetadataRequest(
        request_id=request_id,
        group_id=group_id,
        generation_id=read_int(obj, "generationId", "", INT32),
        protocol_type=read_str(obj, "protocolType", "", "consumer"),
        protocol=read_nullable_str(obj, "protocolName", ""),
        leader=read_nullable_str(obj, "leader", ""),
        members=_members(read_array(obj, "members", "", []), "members"),
        timeout_ms=timeout_ms,
    )


def _ident(obj: dict[str, Any], key: str) -> str | None:
    """A top-level id, if readable, to answer an invalid request with."""
    if isinstance(obj, DuplicateKeys) and key in obj.duplicates:
        return None  # ambiguous: do not answer on behalf of either occurrence
    value = obj.get(key)
    return value if type(value) is str and is_valid_text(value) else None


_PARSERS = {
    Api.OFFSET_COMMIT.value: _offset_commit,
    Api.TXN_OFFSET_COMMIT.value: _txn_offset_commit,
    Api.OFFSET_DELETE.value: _offset_delete,
    Api.DELETE_GROUPS.value: lambda obj, request_id, group_id, timeout_ms: DeleteGroupsRequest(
        request_id, group_id, timeout_ms
    ),
    Api.GROUP_METADATA.value: _group_metadata,
}


def decode_request(data: bytes | None) -> Request | DecodeError:
    """The request of one ingest message's value, or a ``DecodeError`` (never raises) whose
    reason names the JSON path at fault and whose ids are set when readable.

    CORRUPT_MESSAGE: null or empty, not UTF-8, not JSON, not an object; UNSUPPORTED_VERSION: a
    ``version`` outside 1..REQUEST_VERSION; INVALID_REQUEST: any other fault.
    """
    if data is None or not isinstance(data, bytes | bytearray | memoryview):
        what = "null" if data is None else type(data).__name__
        return DecodeError(ErrorCode.CORRUPT_MESSAGE, f"request: expected bytes, got {what}")
    if len(data) == 0:
        return DecodeError(ErrorCode.CORRUPT_MESSAGE, "request: empty message")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        return DecodeError(ErrorCode.CORRUPT_MESSAGE, f"request: not valid UTF-8: {e}")
    try:
        obj = parse_json(text)
    except (ValueError, RecursionError) as e:
        # ValueError covers JSONDecodeError and the rejected NaN/Infinity constants.
        reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        return DecodeError(ErrorCode.CORRUPT_MESSAGE, f"request: not valid JSON: {reason}")
    if not isinstance(obj, dict):
        return DecodeError(
            ErrorCode.CORRUPT_MESSAGE, f"request: expected a JSON object, got {json_type(obj)}"
        )
    request_id = _ident(obj, "requestId")
    group_id = _ident(obj, "groupId")
    api = _ident(obj, "api")
    try:
        return _decode_object(obj)
    except InvalidRequest as e:
        return DecodeError(e.code, e.reason, request_id, group_id, api)
    except Exception as e:  # pragma: no cover - defensive: the stream must not die on one message
        return DecodeError(
            ErrorCode.INVALID_REQUEST,
            f"request: unexpected decoder failure: {type(e).__name__}: {e}",
            request_id,
            group_id,
            api,
        )


def keyed_request(request: Request | DecodeError, key: bytes | None) -> Request | DecodeError:
    """``request`` as decoded from a message keyed ``key``; a TxnOffsetCommit whose key is not
    its ``groupId`` (UTF-8; a null key neither) is a dead letter (no request id) naming both.

    Who reads a group's pending transactional offsets finds them by key (Kafka's RequireStable:
    ``connectors.kafka.open_transactions``): a TxnOffsetCommit keyed otherwise would be applied
    unseen, a stale offset shown as stable. Other requests are left as they are."""
    if not isinstance(request, TxnOffsetCommitRequest):
        return request
    group = request.group_id
    if key is not None and bytes(key) == group.encode("utf-8"):
        return request
    if key is None:
        shown = "no key"
    else:
        try:
            shown = f"key {bytes(key).decode('utf-8')!r}"
        except UnicodeDecodeError:
            shown = f"key {bytes(key)!r} (not UTF-8)"
    return DecodeError(
        ErrorCode.INVALID_REQUEST,
        f"TxnOffsetCommit: the message has {shown}, not its groupId {group!r}: a TxnOffsetCommit "
        "is keyed by its group id, the key its group's open transactions are found by",
        api=Api.TXN_OFFSET_COMMIT.value,
    )


def _decode_object(obj: dict[str, Any]) -> Request:
    """The request of a parsed object, checked version, api, ids, fields; ``InvalidRequest`` at
    the first fault."""
    if isinstance(obj, DuplicateKeys):
        reject("request", f"duplicate key {obj.duplicates[0]!r}")
    version = obj.get("version", REQUIRED)
    if version is REQUIRED:
        reject("version", "missing")
    if isinstance(version, HugeInt):
        raise InvalidRequest(
            ErrorCode.UNSUPPORTED_VERSION, f"version: {version.text} is not supported"
        )
    if type(version) is not int:
        reject("version", f"expected an integer, got {json_type(version)}")
    if not 1 <= version <= REQUEST_VERSION:
        raise InvalidRequest(
            ErrorCode.UNSUPPORTED_VERSION,
            f"version: {version} is not supported (supported: 1 to {REQUEST_VERSION})",
        )
    api = read_str(obj, "api", "")
    parser = _PARSERS.get(api)
    if parser is None:
        reject("api", f"unknown api {api!r} (known: {', '.join(_PARSERS)})")
    request_id = read_str(obj, "requestId", "")
    group_id = read_str(obj, "groupId", "")
    timeout_ms = None if api == Api.TXN_OFFSET_COMMIT.value else _timeout_ms(obj)
    return parser(obj, request_id, group_id, timeout_ms)  # type: ignore[no-any-return]


def _timeout_ms(obj: dict[str, Any]) -> int | None:
    """``timeoutMs``: None when absent or null, else a non-negative int32."""
    value = obj.get("timeoutMs")
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= INT32[2]:
        value = read_int(obj, "timeoutMs", "", INT32)
        if value < 0:
            reject("timeoutMs", f"{value} is negative")
    return value


def decode_members(members_json: str) -> tuple[MemberMetadata, ...]:
    """Members from ``encode_members``'s JSON; ``ValueError`` naming the field at fault."""
    if not isinstance(members_json, str):
        raise ValueError(f"members: expected a JSON string, got {type(members_json).__name__}")
    try:
        values = parse_json(members_json)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"members: not valid JSON: {e}") from None
    try:
        if type(values) is not list:
            reject("members", f"expected an array, got {json_type(values)}")
        return _members(values, "members")
    except InvalidRequest as e:
        raise ValueError(e.reason) from None
