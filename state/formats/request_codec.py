"""The ingest request wire format: one versioned UTF-8 JSON object per Kafka message.

The message key is the group id (UTF-8); the value is one of (``?`` = optional, with its default)::

    {"version": 1, "api": "OffsetCommit", "requestId": "r-1", "groupId": "g", "timeoutMs"?: null,
     "generationId"?: -1, "memberId"?: "", "groupInstanceId"?: null, "retentionTimeMs"?: -1,
     "topics": [{"name": "t", "partitions": [{"partitionIndex": 0, "committedOffset": 42,
                 "committedLeaderEpoch"?: -1, "committedMetadata"?: ""}]}]}
    {"version": 1, "api": "OffsetDelete", "requestId": "r-2", "groupId": "g",
     "topics": [{"name": "t", "partitions": [{"partitionIndex": 0}]}]}
    {"version": 1, "api": "DeleteGroups", "requestId": "r-3", "groupId": "g"}
    {"version": 1, "api": "GroupMetadata", "requestId": "r-4", "groupId": "g", "generationId": 3,
     "protocolType"?: "consumer", "protocolName"?: null, "leader"?: null,
     "members"?: [{"memberId": "m1", "groupInstanceId"?: null, "clientId"?: "",
                   "clientHost"?: "", "rebalanceTimeoutMs"?: 300000,
                   "sessionTimeoutMs"?: 45000, "subscribedTopics"?: []}]}

Field names are those of Kafka's request schemas. Every request may carry ``timeoutMs`` (int32,
>= 0; absent or null: the job's ``request_timeout_ms``): the job applies the request only if it
reaches it before the message's timestamp plus that timeout (``state.coordinator.deadlines``);
the encoder writes it only when set, so a request without one is encoded as before.
``retentionTimeMs`` -1 means the broker default; ``committedMetadata`` null means "" (as Kafka
stores it). ``groupInstanceId``, ``protocolName``, ``leader`` and ``timeoutMs`` may be null; no
other field may.

The decoder checks shape and types only: every field has its JSON type, integers are JSON
integers (not booleans, not ``1.0``) that fit their Kafka type (int32 for partition indexes,
generations, leader epochs and timeouts; int64 for offsets and retention). Semantic checks (empty
group id, negative partition, metadata size, topic names) belong to the state machine, which
answers them with Kafka's error codes. Unknown fields are ignored, so a producer may add fields
within a version (forward compatibility); a change that older readers must not ignore needs a new
``version``. A key that appears twice in one object is rejected, since JSON readers disagree on
which occurrence wins.
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
)
from state.formats.json_fields import (
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

__all__ = ["decode_members", "decode_request", "encode_members", "encode_request"]


# ---------------------------------------------------------------------------------------------
# Encoding


def _topics_json(
    pairs: Iterable[tuple[str, dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Group (topic, partition object) pairs into Kafka's topics → partitions nesting.

    Only consecutive runs of a topic are merged, so decoding (which flattens in order) returns
    the partitions in exactly the original order.
    """
    topics: list[dict[str, Any]] = []
    last: str | None = None
    for topic, partition in pairs:
        if not topics or topic != last:
            topics.append({"name": topic, "partitions": []})
            last = topic
        topics[-1]["partitions"].append(partition)
    return topics


def _member_json(m: MemberMetadata) -> dict[str, Any]:
    """A member as an element of a GroupMetadata request's ``members`` (no ``assignment``)."""
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
    """``obj`` as JSON text: compact, and without NaN (not JSON); non-ASCII stays literal
    (smaller than \\u escapes)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_request(request: Request) -> bytes:
    """Encode a request as the UTF-8 JSON value of an ingest message, all fields explicit.

    ``decode_request(encode_request(r)) == r`` for every request whose fields fit their types.
    Values are not range-checked here (the decoder is the arbiter and answers a bad request with
    INVALID_REQUEST); raises ``ValueError`` for a string that is not valid Unicode (a lone
    surrogate) and ``TypeError`` for a value JSON cannot hold.
    """
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
            "topics": _topics_json(
                (
                    p.topic,
                    {
                        "partitionIndex": p.partition,
                        "committedOffset": p.offset,
                        "committedLeaderEpoch": p.leader_epoch,
                        "committedMetadata": p.metadata,
                    },
                )
                for p in request.partitions
            ),
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
    if request.timeout_ms is not None:
        head["timeoutMs"] = request.timeout_ms
    return _dumps(head).encode("utf-8")


def encode_members(members: Iterable[MemberMetadata]) -> str:
    """Encode members as the JSON array of a GroupMetadata request (the request frame's
    ``members_json`` column). ``assignment`` is not part of the request format and is dropped."""
    return _dumps([_member_json(m) for m in members])


# ---------------------------------------------------------------------------------------------
# Decoding (field readers: state.formats.json_fields)


def _topics(obj: dict[str, Any]) -> Iterator[tuple[str, str, list[Any]]]:
    """Yield (topic name, path of the topic, its raw partitions array) for each entry of the
    request's ``topics`` array, in order."""
    for ti, raw_topic in enumerate(read_array(obj, "topics", "")):
        tpath = f"topics[{ti}]"
        topic_obj = as_object(raw_topic, tpath)
        name = read_str(topic_obj, "name", tpath)
        yield name, tpath, read_array(topic_obj, "partitions", tpath)


def _checked_commit_partition(topic: str, raw: object, path: str) -> PartitionCommit:
    """One commit partition, read field by field, naming the first field at fault."""
    p = as_object(raw, path)
    index = read_int(p, "partitionIndex", path, INT32)
    offset = read_int(p, "committedOffset", path, INT64)
    epoch = read_int(p, "committedLeaderEpoch", path, INT32, -1)
    # Kafka stores a null metadata as "" (OffsetAndMetadata.NO_METADATA).
    metadata = read_nullable_str(p, "committedMetadata", path) or ""
    return PartitionCommit(topic, index, offset, epoch, metadata)


def _offset_commit(
    obj: dict[str, Any], request_id: str, group_id: str, timeout_ms: int | None
) -> OffsetCommitRequest:
    """The fields of an OffsetCommit request object after its version, api and ids."""
    generation_id = read_int(obj, "generationId", "", INT32, -1)
    member_id = read_str(obj, "memberId", "", "")
    instance_id = read_nullable_str(obj, "groupInstanceId", "")
    retention = read_int(obj, "retentionTimeMs", "", INT64, -1)
    partitions = [
        _checked_commit_partition(name, p, f"{tpath}.partitions[{pi}]")
        for name, tpath, raw_partitions in _topics(obj)
        for pi, p in enumerate(raw_partitions)
    ]
    return OffsetCommitRequest(
        request_id=request_id,
        group_id=group_id,
        partitions=tuple(partitions),
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
        retention_time_ms=retention,
        timeout_ms=timeout_ms,
    )


def _offset_delete(
    obj: dict[str, Any], request_id: str, group_id: str, timeout_ms: int | None
) -> OffsetDeleteRequest:
    """The fields of an OffsetDelete request object after its version, api and ids."""
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
    """The fields of a GroupMetadata request object after its version, api and ids."""
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
    """A top-level identifying field, if it is readable, for answering an invalid request."""
    if isinstance(obj, DuplicateKeys) and key in obj.duplicates:
        return None  # ambiguous: do not answer on behalf of either occurrence
    value = obj.get(key)
    return value if type(value) is str and is_valid_text(value) else None


_PARSERS = {
    Api.OFFSET_COMMIT.value: _offset_commit,
    Api.OFFSET_DELETE.value: _offset_delete,
    Api.DELETE_GROUPS.value: lambda obj, request_id, group_id, timeout_ms: DeleteGroupsRequest(
        request_id, group_id, timeout_ms
    ),
    Api.GROUP_METADATA.value: _group_metadata,
}


def decode_request(data: bytes | None) -> Request | DecodeError:
    """Decode the value of one ingest message. Never raises.

    Returns the request, or a ``DecodeError`` whose ``reason`` names the offending JSON path
    (e.g. ``topics[0].partitions[2].committedOffset: expected an integer, got string``) and whose
    ``request_id``/``group_id``/``api`` are set whenever the top-level object carries them as
    strings, so the caller can answer the request. Error codes: CORRUPT_MESSAGE for a null or
    empty value, invalid UTF-8, invalid JSON or a non-object; UNSUPPORTED_VERSION for a
    ``version`` outside 1..REQUEST_VERSION; INVALID_REQUEST for everything else (missing
    ``version``, unknown ``api``, missing, wrong-typed or out-of-range fields, duplicate keys).
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


def _decode_object(obj: dict[str, Any]) -> Request:
    """The request a parsed top-level object holds: version, then api, then the ids, then the
    api's fields; raises ``InvalidRequest`` at the first field at fault."""
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
    return parser(obj, request_id, group_id, _timeout_ms(obj))  # type: ignore[no-any-return]


def _timeout_ms(obj: dict[str, Any]) -> int | None:
    """The request's ``timeoutMs``: None when absent or null (the job's default applies), else
    an int32 that is not negative."""
    value = obj.get("timeoutMs")
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= INT32[2]:
        value = read_int(obj, "timeoutMs", "", INT32)
        if value < 0:
            reject("timeoutMs", f"{value} is negative")
    return value


def decode_members(members_json: str) -> tuple[MemberMetadata, ...]:
    """Decode a JSON array of members (``encode_members`` output, or a GroupMetadata request's
    ``members``). Raises ``ValueError`` whose message names the field, e.g.
    ``members[1].sessionTimeoutMs: expected an integer, got string``."""
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
