"""A fast reading of the hot ingest request, a valid OffsetCommit, straight into columns.

``decode_commit_columns(data)`` reads an ingest message with ``msgspec`` into typed structs (the
checks of ``request_codec``'s docstring: JSON types, int32/int64 ranges, booleans and ``1.0`` are
not integers, nullable fields, defaults) and returns the request's partitions as columns
(``CommitColumns``), without a Python object per partition beyond msgspec's own struct.

It only ever vouches: it returns ``None`` for anything it is not sure the exact decoder
(``request_codec.decode_request``, the reference) would read as the same valid OffsetCommit, and
the caller then decodes the message exactly, so error codes and reasons come from one place.
Whenever it returns columns, they equal those of the exact decoder's request
(``commit_columns(decode_request(data))``). ``None`` for:

- any other api, any version the exact decoder does not read, a commit listing no partition;
- anything msgspec refuses (invalid JSON, NaN, a wrong type, an integer out of range, a lone
  surrogate escape), and bytes that are not valid UTF-8 anywhere in the message;
- any key msgspec did not read into a field: an unknown field (at any level, however nested), or
  a key that repeats in its object (msgspec keeps the last occurrence where the exact decoder
  rejects the request). See ``_keys_are_the_fields``.
"""

from __future__ import annotations

from typing import Annotated, Literal, NamedTuple

import msgspec
from msgspec import UNSET, Meta, UnsetType

from state.coordinator.requests import REQUEST_VERSION, OffsetCommitRequest
from state.formats.json_fields import INT32, INT64, is_valid_text

__all__ = ["CommitColumns", "commit_columns", "decode_commit_columns"]

_Int32 = Annotated[int, Meta(ge=INT32[1], le=INT32[2])]
_Int64 = Annotated[int, Meta(ge=INT64[1], le=INT64[2])]
#: The default of an absent ``committedLeaderEpoch``: out of int32, so no decoded epoch equals it
#: and counting it counts the partitions without the field (the key check needs that count).
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
    """An OffsetCommit request with at least one partition: its request-level fields, and its
    partitions as equal-length columns in request order (defaults applied, null metadata "")."""

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
    """The columns of a decoded OffsetCommit request (the exact decoder's result)."""
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
    """The columns of the OffsetCommit request ``data`` holds when it is entirely valid, else
    ``None`` (decode it with ``request_codec.decode_request``). Never raises."""
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
    """Whether a document with ``colons`` colon bytes has no key besides the ``fields`` present
    fields msgspec read (each a distinct field of a distinct object): no unknown field, no
    repeated key. ``escaped``: the document holds a backslash; ``values``: its string values.

    Every key of every object, at any depth, is followed by one colon outside strings, and JSON
    has no other colon outside strings. So the document's key count is at most its colon count
    (less the colons inside strings), and at least ``fields``: equal counts leave no room for an
    extra key. Colons inside the known string values are subtracted only when the document has no
    backslash, as then each decoded colon is one colon byte (no ``\\u003a`` escape); otherwise a
    colon in a value sends the message to the exact decoder, which costs only time.
    """
    if colons == fields:
        return True
    if colons < fields or escaped:
        return False
    return colons - "\n".join(values).count(":") == fields
