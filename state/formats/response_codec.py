"""The responses-topic and dead-letter wire formats: encoded from a response frame, decoded.

One message per answered request on the responses topic (key = the request id, UTF-8)::

    {"version": 1, "requestId": "r-1", "groupId": "g", "api": "OffsetCommit",
     "errorCode": 0, "errorMessage": null,
     "partitions": [{"topic": "t", "partitionIndex": 0, "errorCode": 0, "errorMessage": null}]}

The top-level code and message answer the request (0/null when answered per partition);
``partitions`` follow request order. Input without a readable request id is a dead letter (null
key)::

    {"ingestPartition": 3, "ingestOffset": 1234, "errorCode": 2, "reason": "..."}

Encoding is vectorized with Arrow; each string is ``json.dumps``'s literal (ASCII output, so every
message is valid UTF-8). Decoding is one message at a time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.model import TopicPartition
from state.formats.frames import RESPONSE_FRAME_SCHEMA

RESPONSE_VERSION = 1

#: ``key`` null for dead letters; ``ingest_offset`` is the answered message's.
MESSAGE_SCHEMA = pa.schema(
    [
        pa.field("ingest_offset", pa.int64(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary(), nullable=False),
    ]
)


def json_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each string as a JSON string literal (``null`` for null): ``json.dumps`` of it."""
    values = _combined(values)
    if len(values) <= _FEW:
        return pa.array([_literal(v) for v in _strings(values)], pa.string())
    # A column repeats few values (topics, groups, reasons): each distinct one encoded once.
    encoded = values.dictionary_encode(null_encoding="encode")
    literals = [_literal(v) for v in _strings(encoded.dictionary)]
    return pa.array(literals, pa.string()).take(encoded.indices)


#: Up to this many values, encoding each costs less than finding the distinct ones.
_FEW = 64


def _strings(values: pa.Array) -> list[str | None]:
    """A string column as Python strings (None for null), without a pyarrow scalar each."""
    return values.to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return]


def _literal(value: str | None) -> str:
    """``json.dumps(value)`` (ASCII output, so valid UTF-8), without its per-call overhead."""
    return "null" if value is None else encode_basestring_ascii(value)


def encode_responses(responses: pa.Table, ingest_partition: int) -> tuple[pa.Table, pa.Table]:
    """A response frame as (responses, dead letters), both ``MESSAGE_SCHEMA``, in ingest order:
    one response per ``ingest_offset`` and one dead letter per row without ``request_id``."""
    if responses.num_rows == 0:
        return MESSAGE_SCHEMA.empty_table(), MESSAGE_SCHEMA.empty_table()
    responses = responses.select(RESPONSE_FRAME_SCHEMA.names)
    order = np.argsort(responses["ingest_offset"].to_numpy(), kind="stable")
    if not np.array_equal(order, np.arange(len(order))):
        responses = responses.take(pa.array(order))
    if responses["request_id"].null_count == 0:
        return _answers(responses), MESSAGE_SCHEMA.empty_table()
    answered = pc.is_valid(responses["request_id"])
    dead = responses.filter(pc.invert(answered))
    return _answers(responses.filter(answered)), _dead_letters(dead, ingest_partition)


#: Up to this many response rows, the messages are written a request at a time in Python: the
#: Arrow kernels' fixed cost is most of a small batch's encoding.
_FEW_ROWS = 256


def _answers(rows: pa.Table) -> pa.Table:
    if rows.num_rows == 0:
        return MESSAGE_SCHEMA.empty_table()
    # (A partition's answer always names its partition; the kernels would null the message.)
    if rows.num_rows <= _FEW_ROWS and rows["partition"].null_count == rows["topic"].null_count:
        return _answers_of_rows(rows)
    offsets = rows["ingest_offset"].to_numpy()
    first_of_request = np.ones(len(offsets), dtype=bool)
    first_of_request[1:] = offsets[1:] != offsets[:-1]
    starts = np.flatnonzero(first_of_request)
    n = len(starts)
    top_code, reason, parts = _request_level(rows, first_of_request, n)

    # Partition level: one JSON object per row, joined per request.
    entries = pc.binary_join_element_wise(
        '{"topic":',
        json_strings(parts["topic"]),
        ',"partitionIndex":',
        pc.cast(parts["partition"], pa.string()),
        ',"errorCode":',
        pc.cast(parts["error_code"], pa.string()),
        ',"errorMessage":',
        json_strings(parts["error_reason"]),
        "}",
        "",
    )
    counts = np.bincount(parts["request"], minlength=n)
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    lists = pa.ListArray.from_arrays(pa.array(list_offsets), _combined(entries))
    partitions = pc.binary_join(lists, ",")

    def heads(name: str) -> pa.Array:
        column = _combined(rows[name])
        return column if n == len(offsets) else column.take(pa.array(starts))

    request_ids = heads("request_id")
    values = pc.binary_join_element_wise(
        '{"version":' + str(RESPONSE_VERSION) + ',"requestId":',
        json_strings(request_ids),
        ',"groupId":',
        json_strings(heads("group_id")),
        ',"api":',
        json_strings(heads("api")),
        ',"errorCode":',
        pc.cast(pa.array(top_code), pa.string()),
        ',"errorMessage":',
        json_strings(reason),
        ',"partitions":[',
        partitions,
        "]}",
        "",
    )
    return pa.table(
        [heads("ingest_offset"), _utf8(request_ids), _utf8(values)], schema=MESSAGE_SCHEMA
    )


def _answers_of_rows(rows: pa.Table) -> pa.Table:
    """``_answers`` a request at a time: the same messages, byte for byte."""
    columns = {name: _values(rows[name]) for name in RESPONSE_FRAME_SCHEMA.names}
    offsets, topics = columns["ingest_offset"], columns["topic"]
    answered_offsets: list[int] = []
    keys: list[str] = []
    values: list[str] = []
    start, n = 0, len(offsets)
    while start < n:
        end = start + 1
        while end < n and offsets[end] == offsets[start]:
            end += 1
        level = [i for i in range(start, end) if topics[i] is None]
        partitions = ",".join(
            '{"topic":'
            + _literal(topics[i])
            + f',"partitionIndex":{columns["partition"][i]},"errorCode":'
            + f'{columns["error_code"][i]},"errorMessage":'
            + _literal(columns["error_reason"][i])
            + "}"
            for i in range(start, end)
            if topics[i] is not None
        )
        request_id = columns["request_id"][start]
        values.append(
            f'{{"version":{RESPONSE_VERSION},"requestId":{_literal(request_id)},"groupId":'
            + _literal(columns["group_id"][start])
            + ',"api":'
            + _literal(columns["api"][start])
            # The highest code of the request-level rows, 0 at least (as the kernels' path).
            + f',"errorCode":{max([0, *(columns["error_code"][i] for i in level)])}'
            + ',"errorMessage":'
            + _literal(columns["error_reason"][level[0]] if level else None)
            + f',"partitions":[{partitions}]}}'
        )
        answered_offsets.append(offsets[start])
        keys.append(request_id)
        start = end
    return pa.table(
        [
            pa.array(answered_offsets, pa.int64()),
            pa.array(keys, pa.string()).cast(pa.binary()),
            pa.array(values, pa.string()).cast(pa.binary()),
        ],
        schema=MESSAGE_SCHEMA,
    )


def _values(column: pa.ChunkedArray) -> list[Any]:
    """A column as Python values (None for a null string), without a pyarrow scalar each."""
    column = _combined(column)
    if column.null_count and pa.types.is_integer(column.type):
        # Only request-level answers lack a partition, and theirs is never read.
        column = pc.fill_null(column, 0)
    return column.to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return]


def _request_level(
    rows: pa.Table, first_of_request: np.ndarray, n: int
) -> tuple[np.ndarray, pa.Array, dict[str, pa.Array | np.ndarray]]:
    """Per request (``n``, each starting where ``first_of_request``): the highest code among its
    topic-less rows and its first reason; and the partition-level rows' columns, with
    ``request`` their request's index."""
    request = np.cumsum(first_of_request) - 1
    columns = ("topic", "partition", "error_code", "error_reason")
    if rows["topic"].null_count == 0:  # the usual batch: every answer a partition's
        parts: dict[str, pa.Array | np.ndarray] = {c: _combined(rows[c]) for c in columns}
        parts["request"] = request
        return np.zeros(n, np.int64), pa.nulls(n, pa.string()), parts
    has_topic = pc.is_valid(rows["topic"]).to_numpy(zero_copy_only=False)
    codes = rows["error_code"].to_numpy()
    level = np.flatnonzero(~has_topic)
    top_code = np.zeros(n, np.int64)
    np.maximum.at(top_code, request[level], codes[level])
    first_level = np.full(n, len(codes), np.int64)
    np.minimum.at(first_level, request[level], level)
    has_level = first_level < len(codes)
    reason = pa.nulls(n, pa.string())
    if has_level.any():
        picked = rows["error_reason"].take(pa.array(np.where(has_level, first_level, 0)))
        reason = pc.if_else(pa.array(has_level), picked, reason)
    mask = pa.array(has_topic)
    parts = {c: _combined(rows[c]).filter(mask) for c in columns}
    parts["request"] = request[has_topic]
    return top_code, reason, parts


def _dead_letters(rows: pa.Table, ingest_partition: int) -> pa.Table:
    if rows.num_rows == 0:
        return MESSAGE_SCHEMA.empty_table()
    values = pc.binary_join_element_wise(
        f'{{"ingestPartition":{int(ingest_partition)},"ingestOffset":',
        pc.cast(rows["ingest_offset"], pa.string()),
        ',"errorCode":',
        pc.cast(rows["error_code"], pa.string()),
        ',"reason":',
        json_strings(rows["error_reason"]),
        "}",
        "",
    )
    return pa.table(
        [rows["ingest_offset"], pa.nulls(rows.num_rows, pa.binary()), _utf8(values)],
        schema=MESSAGE_SCHEMA,
    )


def _combined(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _utf8(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Strings as their UTF-8 bytes (Arrow strings are UTF-8 already: a zero-copy cast)."""
    return _combined(values).cast(pa.binary())


# --- decoding -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Response:
    """One responses-topic message: the request-level answer, and ``(errorCode, errorMessage)``
    per partition in message order; ``group_id`` and ``api`` None unless strings."""

    request_id: str
    group_id: str | None
    api: str | None
    error_code: int
    error_message: str | None
    partitions: Mapping[TopicPartition, tuple[int, str | None]]


def decode_response(key: bytes, value: bytes | None) -> Response:
    """Decode one responses-topic message (``key`` the request id). ``ValueError`` when it is not
    the format of ``RESPONSE_VERSION``; unknown fields are ignored, missing codes are 0."""
    request_id = key.decode("utf-8")
    if value is None:
        raise ValueError("null response value")
    obj = json.loads(value.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("response is not a JSON object")
    version = obj.get("version")
    if version != RESPONSE_VERSION:
        raise ValueError(f"unsupported response version {version!r}")
    code = obj.get("errorCode", 0)
    if type(code) is not int:
        raise ValueError(f"errorCode is not an integer: {code!r}")
    entries = obj.get("partitions") or []
    if not isinstance(entries, list):
        raise ValueError(f"partitions is not a JSON array: {entries!r}")
    partitions: dict[TopicPartition, tuple[int, str | None]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError(f"malformed partition entry {entry!r}")
        topic = entry.get("topic")
        index = entry.get("partitionIndex")
        entry_code = entry.get("errorCode", 0)
        if type(topic) is not str or type(index) is not int or type(entry_code) is not int:
            raise ValueError(f"malformed partition entry {entry!r}")
        partitions[TopicPartition(topic, index)] = (
            entry_code,
            _optional_str(entry, "errorMessage"),
        )
    return Response(
        request_id=request_id,
        group_id=_optional_str(obj, "groupId"),
        api=_optional_str(obj, "api"),
        error_code=code,
        error_message=_optional_str(obj, "errorMessage"),
        partitions=partitions,
    )


def _optional_str(obj: dict[str, object], name: str) -> str | None:
    """``obj[name]`` when it is a string, else None."""
    value = obj.get(name)
    return value if isinstance(value, str) else None
