"""The hot ingest request, a valid OffsetCommit, read with ``msgspec`` straight into columns.

``decode_commit_columns`` only vouches: its columns equal
``commit_columns(request_codec.decode_request(data))``, and it returns ``None`` (decode exactly,
where error reasons come from) for any other api or version, a commit without partitions,
anything msgspec refuses, invalid UTF-8 anywhere, and any key msgspec did not read into a field
(an unknown field at any depth, or a repeated key: ``_keys_are_the_fields``).
"""

from __future__ import annotations

from typing import Annotated, Literal, NamedTuple

import msgspec
from msgspec import UNSET, Meta, UnsetType

from state.coordinator.requests import REQUEST_VERSION, OffsetCommitRequest
from state.formats.json_fields import INT32, INT64, is_valid_text

_Int32 = Annotated[int, Meta(ge=INT32[1], le=INT32[2])]
_Int64 = Annotated[int, Meta(ge=INT64[1], le=INT64[2])]
#: An absent ``committedLeaderEpoch``: out of int32, so counting it counts the absent fields.
_ABSENT_EPOCH = INT32[1] - 1


# gc=False: these structs hold no reference cycles, and untracked objects are cheaper to make.
class _Partition(msgspec.Struct, gc=False):
    partitionIndex: _Int32
    committedOffset: _Int64
    committedLeaderEpoch: _Int32 = _ABSENT_EPOCH
    # UNSET (absent) and None (null) both mean "", but only a present field is a key.
    committedMetadata: str | None | UnsetType = UNSET


class _Topic(msgspec.Struct, gc=False):
    name: str
    partitions: list[_Partition]


class _OffsetCommit(msgspec.Struct, gc=False):
    version: Annotated[int, Meta(ge=1, le=REQUEST_VERSION)]
    api: Literal["OffsetCommit"]  # Api.OFFSET_COMMIT
    requestId: str
    groupId: str
    topics: list[_Topic]
    # Optional fields default to UNSET, so that their presence can be counted.
    timeoutMs: Annotated[int, Meta(ge=0, le=INT32[2])] | None | UnsetType = UNSET
    generationId: _Int32 | UnsetType = UNSET
    memberId: str | UnsetType = UNSET
    groupInstanceId: str | None | UnsetType = UNSET
    retentionTimeMs: _Int64 | UnsetType = UNSET


#: The required fields of an OffsetCommit's objects: the request's, a topic's, a partition's.
_REQUEST_KEYS = 5
_TOPIC_KEYS = 2
_PARTITION_KEYS = 2

# strict (the default): no coercion, so a boolean, a float or a string is never an integer.
_decoder = msgspec.json.Decoder(_OffsetCommit)


class CommitColumns(NamedTuple):
    """An OffsetCommit with partitions: its request fields, and its partitions as columns in
    request order (defaults applied, null metadata "")."""

    request_id: str
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    retention_time_ms: int
    timeout_ms: int | None
    topics: list[str]
    partitions: list[int]
    offsets: list[int]
    leader_epochs: list[int]
    metadata: list[str]


def commit_columns(request: OffsetCommitRequest) -> CommitColumns:
    """The columns of a decoded OffsetCommit request."""
    parts = request.partitions
    return CommitColumns(
        request.request_id,
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id,
        request.retention_time_ms,
        request.timeout_ms,
        [p.topic for p in parts],
        [p.partition for p in parts],
        [p.offset for p in parts],
        [p.leader_epoch for p in parts],
        [p.metadata for p in parts],
    )


def decode_commit_columns(data: bytes | bytearray) -> CommitColumns | None:
    """The columns of the OffsetCommit ``data`` holds when entirely valid, else ``None``; never
    raises."""
    # Invalid UTF-8 inside an ignored value passes msgspec, but the exact decoder refuses the
    # whole message; ASCII (the usual message) needs no further look.
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        request = _decoder.decode(data)
    except Exception:  # whatever msgspec refuses, and however: the exact decoder explains it
        return None

    topics: list[str] = []
    partitions: list[int] = []
    offsets: list[int] = []
    epochs: list[int] = []
    metadata: list[str | None | UnsetType] = []
    for topic in request.topics:
        parts = topic.partitions
        topics += [topic.name] * len(parts)
        partitions += [p.partitionIndex for p in parts]
        offsets += [p.committedOffset for p in parts]
        epochs += [p.committedLeaderEpoch for p in parts]
        metadata += [p.committedMetadata for p in parts]
    n = len(partitions)
    if n == 0:
        return None  # one row with null topic: rare, left to the exact path

    absent_epochs = epochs.count(_ABSENT_EPOCH)
    absent_metadata = metadata.count(UNSET)
    optional = (
        request.timeoutMs,
        request.generationId,
        request.memberId,
        request.groupInstanceId,
        request.retentionTimeMs,
    )
    fields = (
        _REQUEST_KEYS
        + len(optional)
        - optional.count(UNSET)
        + _TOPIC_KEYS * len(request.topics)
        + _PARTITION_KEYS * n
        + (n - absent_epochs)
        + (n - absent_metadata)
    )
    if absent_epochs:
        epochs = [-1 if e == _ABSENT_EPOCH else e for e in epochs]
    if absent_metadata or None in metadata:
        metadata = ["" if m is None or m is UNSET else m for m in metadata]
    timeout, generation_id, member_id, instance_id, retention = optional
    member_id = "" if member_id is UNSET else member_id
    instance_id = None if instance_id is UNSET else instance_id
    colons = data.count(b":")
    # One byte search (a longer needle is many times slower): no backslash, no escape at all.
    escaped = b"\\" in data
    if colons != fields or escaped:
        # The rare document that needs its string values looked at (colons in them, escapes).
        values = [request.requestId, request.groupId, member_id, instance_id or ""]
        values += [t.name for t in request.topics]
        values += metadata
        if not _keys_are_the_fields(colons, fields, escaped, values):
            return None
        # Raw UTF-8, once validated, cannot hold a lone surrogate, but a \u escape can spell one.
        if escaped and not is_valid_text("".join(values)):
            return None
    return CommitColumns(
        request.requestId,
        request.groupId,
        -1 if generation_id is UNSET else generation_id,
        member_id,
        instance_id,
        -1 if retention is UNSET else retention,
        None if timeout is UNSET else timeout,
        topics,
        partitions,
        offsets,
        epochs,
        metadata,  # type: ignore[arg-type]
    )


def _keys_are_the_fields(colons: int, fields: int, escaped: bool, values: list[str]) -> bool:
    """Whether a document of ``colons`` colon bytes has no key besides the ``fields`` msgspec
    read (no unknown field, no repeated key); ``values``: its string values.

    Each key at any depth is followed by the only colons outside strings, so equal counts leave no
    room for another key. Colons inside values are subtracted only without a backslash in the
    document (``escaped``), when no ``\\u003a`` escape can hide one.
    """
    if colons == fields:
        return True
    if colons < fields or escaped:
        return False
    return colons - "\n".join(values).count(":") == fields
