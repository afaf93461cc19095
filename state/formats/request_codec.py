"""The ingest request wire format: one versioned UTF-8 JSON object per Kafka message.

The message key is the group id (UTF-8); the value is one of (``?`` = optional, with its default)::

    {"version": 1, "api": "OffsetCommit", "requestId": "r-1", "groupId": "g",
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

Field names are those of Kafka's request schemas. ``retentionTimeMs`` -1 means the broker
default; ``committedMetadata`` null means "" (as Kafka stores it). ``groupInstanceId``,
``protocolName`` and ``leader`` may be null; no other field may.

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
from collections.abc import Iterable
from typing import Any, NoReturn

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

__all__ = ["decode_members", "decode_request", "encode_members", "encode_request"]

_INT32 = ("int32", -(1 << 31), (1 << 31) - 1)
_INT64 = ("int64", -(1 << 63), (1 << 63) - 1)

# Sentinel for "field absent, no default": the field is required.
_REQUIRED: Any = object()


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
    # Compact and without NaN (not JSON); non-ASCII stays literal (smaller than \\u escapes).
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
    return _dumps(head).encode("utf-8")


def encode_members(members: Iterable[MemberMetadata]) -> str:
    """Encode members as the JSON array of a GroupMetadata request (the request frame's
    ``members_json`` column). ``assignment`` is not part of the request format and is dropped."""
    return _dumps([_member_json(m) for m in members])


# ---------------------------------------------------------------------------------------------
# Decoding


class _Invalid(Exception):
    """Internal: the request is invalid; carries the error code and the reason."""

    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class _DuplicateKeys(dict):  # type: ignore[type-arg]
    """A JSON object in which some key appeared more than once."""

    duplicates: list[str]


class _HugeInt:
    """A JSON integer too long to be any Kafka integer; kept as text so that a field check can
    name it instead of the whole message failing to parse."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    duplicates = []
    for key, _ in pairs:
        if key in seen:
            duplicates.append(key)
        seen.add(key)
    marked = _DuplicateKeys(obj)
    marked.duplicates = duplicates
    return marked


def _parse_int(text: str) -> int | _HugeInt:
    # 20 digits and a sign cover int64; longer literals can only be out of range, and leaving
    # them as text also keeps Python's int-from-string digit limit from failing the whole parse.
    return int(text) if len(text) <= 21 else _HugeInt(text)


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


_decoder = json.JSONDecoder(
    object_pairs_hook=_object_pairs, parse_int=_parse_int, parse_constant=_reject_constant
)


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | _HugeInt):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__  # not reachable from JSON


def _bad(path: str, msg: str) -> NoReturn:
    raise _Invalid(ErrorCode.INVALID_REQUEST, f"{path}: {msg}")


def _path(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _as_object(value: object, path: str) -> dict[str, Any]:
    if type(value) is dict:
        return value  # type: ignore[return-value]
    if isinstance(value, _DuplicateKeys):
        _bad(path or "request", f"duplicate key {value.duplicates[0]!r}")
    _bad(path, f"expected an object, got {_type_name(value)}")


def _valid_text(value: str) -> bool:
    """Whether ``value`` can be encoded as UTF-8 (JSON escapes can produce lone surrogates,
    which no record or response could carry)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _str(obj: dict[str, Any], key: str, prefix: str, default: Any = _REQUIRED) -> str:
    value = obj.get(key, _REQUIRED)
    if value is _REQUIRED:
        if default is _REQUIRED:
            _bad(_path(prefix, key), "missing")
        return default  # type: ignore[no-any-return]
    if type(value) is not str:
        _bad(_path(prefix, key), f"expected a string, got {_type_name(value)}")
    if not _valid_text(value):
        _bad(_path(prefix, key), "string contains an unpaired surrogate")
    return value


def _nullable_str(obj: dict[str, Any], key: str, prefix: str) -> str | None:
    """An optional string that may be null; absent means null."""
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is not str:
        _bad(_path(prefix, key), f"expected a string or null, got {_type_name(value)}")
    if not _valid_text(value):
        _bad(_path(prefix, key), "string contains an unpaired surrogate")
    return value


def _int(
    obj: dict[str, Any],
    key: str,
    prefix: str,
    kind: tuple[str, int, int],
    default: Any = _REQUIRED,
) -> int:
    value = obj.get(key, _REQUIRED)
    if value is _REQUIRED:
        if default is _REQUIRED:
            _bad(_path(prefix, key), "missing")
        return default  # type: ignore[no-any-return]
    # bool is a subclass of int in Python but not an integer in JSON.
    if type(value) is not int:
        if isinstance(value, _HugeInt):
            _bad(_path(prefix, key), f"{value.text} is out of range for {kind[0]}")
        _bad(_path(prefix, key), f"expected an integer, got {_type_name(value)}")
    name, lo, hi = kind
    if value < lo or value > hi:
        _bad(_path(prefix, key), f"{value} is out of range for {name}")
    return value


def _array(obj: dict[str, Any], key: str, prefix: str, default: Any = _REQUIRED) -> list[Any]:
    value = obj.get(key, _REQUIRED)
    if value is _REQUIRED:
        if default is _REQUIRED:
            _bad(_path(prefix, key), "missing")
        return default  # type: ignore[no-any-return]
    if type(value) is not list:
        _bad(_path(prefix, key), f"expected an array, got {_type_name(value)}")
    return value


def _topics(obj: dict[str, Any]) -> Iterable[tuple[str, str, dict[str, Any]]]:
    """Yield (topic, path of the partition, partition object) for each partition, in order."""
    for ti, raw_topic in enumerate(_array(obj, "topics", "")):
        tpath = f"topics[{ti}]"
        topic_obj = _as_object(raw_topic, tpath)
        name = _str(topic_obj, "name", tpath)
        for pi, raw_partition in enumerate(_array(topic_obj, "partitions", tpath)):
            ppath = f"{tpath}.partitions[{pi}]"
            yield name, ppath, _as_object(raw_partition, ppath)


def _checked_commit_partition(topic: str, raw: object, path: str) -> PartitionCommit:
    """Field-by-field reading of one commit partition, naming the first field at fault."""
    p = _as_object(raw, path)
    index = _int(p, "partitionIndex", path, _INT32)
    offset = _int(p, "committedOffset", path, _INT64)
    epoch = _int(p, "committedLeaderEpoch", path, _INT32, -1)
    # Kafka stores a null metadata as "" (OffsetAndMetadata.NO_METADATA).
    metadata = _nullable_str(p, "committedMetadata", path) or ""
    return PartitionCommit(topic, index, offset, epoch, metadata)


def _offset_commit(obj: dict[str, Any], request_id: str, group_id: str) -> OffsetCommitRequest:
    generation_id = _int(obj, "generationId", "", _INT32, -1)
    member_id = _str(obj, "memberId", "", "")
    instance_id = _nullable_str(obj, "groupInstanceId", "")
    retention = _int(obj, "retentionTimeMs", "", _INT64, -1)
    _, lo32, hi32 = _INT32
    _, lo64, hi64 = _INT64
    partitions = []
    append = partitions.append
    for ti, raw_topic in enumerate(_array(obj, "topics", "")):
        tpath = f"topics[{ti}]"
        topic_obj = _as_object(raw_topic, tpath)
        name = _str(topic_obj, "name", tpath)
        for pi, p in enumerate(_array(topic_obj, "partitions", tpath)):
            # Fast path for a well-formed partition (one per committed offset, so hot); any
            # doubt goes to the checked reader, which builds the path and names the field.
            if type(p) is dict:
                index = p.get("partitionIndex")
                offset = p.get("committedOffset")
                epoch = p.get("committedLeaderEpoch", -1)
                metadata = p.get("committedMetadata", "")
                if (
                    type(index) is int
                    and type(offset) is int
                    and type(epoch) is int
                    and type(metadata) is str
                    and lo32 <= index <= hi32
                    and lo64 <= offset <= hi64
                    and lo32 <= epoch <= hi32
                    and (metadata.isascii() or _valid_text(metadata))
                ):
                    append(PartitionCommit(name, index, offset, epoch, metadata))
                    continue
            append(_checked_commit_partition(name, p, f"{tpath}.partitions[{pi}]"))
    return OffsetCommitRequest(
        request_id=request_id,
        group_id=group_id,
        partitions=tuple(partitions),
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
        retention_time_ms=retention,
    )


def _offset_delete(obj: dict[str, Any], request_id: str, group_id: str) -> OffsetDeleteRequest:
    partitions = tuple(
        TopicPartition(topic, _int(p, "partitionIndex", ppath, _INT32))
        for topic, ppath, p in _topics(obj)
    )
    return OffsetDeleteRequest(request_id=request_id, group_id=group_id, partitions=partitions)


def _members(values: list[Any], prefix: str) -> tuple[MemberMetadata, ...]:
    members = []
    for i, raw in enumerate(values):
        path = f"{prefix}[{i}]"
        m = _as_object(raw, path)
        topics_path = f"{path}.subscribedTopics"
        topics = []
        for j, t in enumerate(_array(m, "subscribedTopics", path, [])):
            if type(t) is not str:
                _bad(f"{topics_path}[{j}]", f"expected a string, got {_type_name(t)}")
            if not _valid_text(t):
                _bad(f"{topics_path}[{j}]", "string contains an unpaired surrogate")
            topics.append(t)
        members.append(
            MemberMetadata(
                member_id=_str(m, "memberId", path),
                group_instance_id=_nullable_str(m, "groupInstanceId", path),
                client_id=_str(m, "clientId", path, ""),
                client_host=_str(m, "clientHost", path, ""),
                rebalance_timeout_ms=_int(m, "rebalanceTimeoutMs", path, _INT32, 300_000),
                session_timeout_ms=_int(m, "sessionTimeoutMs", path, _INT32, 45_000),
                subscribed_topics=tuple(topics),
            )
        )
    return tuple(members)


def _group_metadata(obj: dict[str, Any], request_id: str, group_id: str) -> GroupMetadataRequest:
    return GroupMetadataRequest(
        request_id=request_id,
        group_id=group_id,
        generation_id=_int(obj, "generationId", "", _INT32),
        protocol_type=_str(obj, "protocolType", "", "consumer"),
        protocol=_nullable_str(obj, "protocolName", ""),
        leader=_nullable_str(obj, "leader", ""),
        members=_members(_array(obj, "members", "", []), "members"),
    )


def _ident(obj: dict[str, Any], key: str) -> str | None:
    """A top-level identifying field, if it is readable, for answering an invalid request."""
    if isinstance(obj, _DuplicateKeys) and key in obj.duplicates:
        return None  # ambiguous: do not answer on behalf of either occurrence
    value = obj.get(key)
    return value if type(value) is str and _valid_text(value) else None


_PARSERS = {
    Api.OFFSET_COMMIT.value: _offset_commit,
    Api.OFFSET_DELETE.value: _offset_delete,
    Api.DELETE_GROUPS.value: lambda obj, request_id, group_id: DeleteGroupsRequest(
        request_id, group_id
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
        obj = _decoder.decode(text)
    except (ValueError, RecursionError) as e:
        # ValueError covers JSONDecodeError and the rejected NaN/Infinity constants.
        reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        return DecodeError(ErrorCode.CORRUPT_MESSAGE, f"request: not valid JSON: {reason}")
    if not isinstance(obj, dict):
        return DecodeError(
            ErrorCode.CORRUPT_MESSAGE, f"request: expected a JSON object, got {_type_name(obj)}"
        )
    request_id = _ident(obj, "requestId")
    group_id = _ident(obj, "groupId")
    api = _ident(obj, "api")
    try:
        return _decode_object(obj)
    except _Invalid as e:
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
    if isinstance(obj, _DuplicateKeys):
        _bad("request", f"duplicate key {obj.duplicates[0]!r}")
    version = obj.get("version", _REQUIRED)
    if version is _REQUIRED:
        _bad("version", "missing")
    if isinstance(version, _HugeInt):
        raise _Invalid(ErrorCode.UNSUPPORTED_VERSION, f"version: {version.text} is not supported")
    if type(version) is not int:
        _bad("version", f"expected an integer, got {_type_name(version)}")
    if not 1 <= version <= REQUEST_VERSION:
        raise _Invalid(
            ErrorCode.UNSUPPORTED_VERSION,
            f"version: {version} is not supported (supported: 1 to {REQUEST_VERSION})",
        )
    api = _str(obj, "api", "")
    parser = _PARSERS.get(api)
    if parser is None:
        _bad("api", f"unknown api {api!r} (known: {', '.join(_PARSERS)})")
    request_id = _str(obj, "requestId", "")
    group_id = _str(obj, "groupId", "")
    return parser(obj, request_id, group_id)  # type: ignore[no-any-return]


def decode_members(members_json: str) -> tuple[MemberMetadata, ...]:
    """Decode a JSON array of members (``encode_members`` output, or a GroupMetadata request's
    ``members``). Raises ``ValueError`` whose message names the field, e.g.
    ``members[1].sessionTimeoutMs: expected an integer, got string``."""
    if not isinstance(members_json, str):
        raise ValueError(f"members: expected a JSON string, got {type(members_json).__name__}")
    try:
        values = _decoder.decode(members_json)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"members: not valid JSON: {e}") from None
    try:
        if type(values) is not list:
            _bad("members", f"expected an array, got {_type_name(values)}")
        return _members(values, "members")
    except _Invalid as e:
        raise ValueError(e.reason) from None
