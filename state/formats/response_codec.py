"""The responses-topic and dead-letter wire formats: encoded from a response frame, decoded.

One message per answered request on the responses topic (key = the request id, UTF-8)::

    {"version": 1, "requestId": "r-1", "groupId": "g", "api": "OffsetCommit",
     "errorCode": 0, "errorMessage": null,
     "partitions": [{"topic": "t", "partitionIndex": 0, "errorCode": 0, "errorMessage": null}]}

The top-level code and message answer the request (0/null when answered per partition);
``partitions`` follow request order. Input without a readable request id is a dead letter (null
key)::

    {"ingestPartition": 3, "ingestOffset": 1234, "errorCode": 2, "reason": "..."}

Encoding is vectorized with Arrow; only strings needing escapes go through ``json.dumps`` (ASCII
output, so every message is valid UTF-8). Decoding is one message at a time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

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

# Printable ASCII but '"' and '\': such a string is its own JSON body between quotes.
_PLAIN = r"^[ !#-\[\]-~]*$"


def json_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each string as a JSON string literal (``null`` for null)."""
    values = _combined(values).cast(pa.string())
    if len(values) == 0:
        return pa.array([], pa.string())
    plain = pc.fill_null(pc.match_substring_regex(values, _PLAIN), True)
    literals = pc.binary_join_element_wise('"', values, '"', "")
    if not pc.all(plain).as_py():
        escaped = [
            literal if ok else json.dumps(raw)
            for ok, literal, raw in zip(
                plain.to_pylist(), literals.to_pylist(), values.to_pylist(), strict=True
            )
        ]
        literals = pa.array(escaped, pa.string())
    return pc.fill_null(literals, "null")


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


def _answers(rows: pa.Table) -> pa.Table:
    if rows.num_rows == 0:
        return MESSAGE_SCHEMA.empty_table()
    offsets = rows["ingest_offset"].to_numpy()
    first_of_request = np.r_[True, offsets[1:] != offsets[:-1]]
    starts = np.flatnonzero(first_of_request)
    request = np.cumsum(first_of_request) - 1
    n = len(starts)
    has_topic = pc.is_valid(rows["topic"]).to_numpy(zero_copy_only=False)
    codes = rows["error_code"].to_numpy()

    # Request level: the highest code among a request's topic-less rows and its first reason.
    level = np.flatnonzero(~has_topic)
    top_code = np.zeros(n, np.int64)
    np.maximum.at(top_code, request[level], codes[level])
    first_level = np.full(n, len(offsets), np.int64)
    np.minimum.at(first_level, request[level], level)
    has_level = first_level < len(offsets)
    reason = pa.nulls(n, pa.string())
    if has_level.any():
        picked = rows["error_reason"].take(pa.array(np.where(has_level, first_level, 0)))
        reason = pc.if_else(pa.array(has_level), picked, reason)

    # Partition level: one JSON object per row, joined per request.
    parts = rows.filter(pa.array(has_topic))
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
    counts = np.bincount(request[has_topic], minlength=n)
    lists = pa.ListArray.from_arrays(
        pa.array(np.r_[0, np.cumsum(counts)], pa.int32()), _combined(entries)
    )
    partitions = pc.binary_join(lists, ",")

    heads = rows.take(pa.array(starts))
    values = pc.binary_join_element_wise(
        '{"version":' + str(RESPONSE_VERSION) + ',"requestId":',
        json_strings(heads["request_id"]),
        ',"groupId":',
        json_strings(heads["group_id"]),
        ',"api":',
        json_strings(heads["api"]),
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
        [heads["ingest_offset"], _utf8(heads["request_id"]), _utf8(values)], schema=MESSAGE_SCHEMA
    )


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
