"""The responses/dead-letter encoder against a plain-Python statement of the wire format, and the
decoder against the encoder (round trip) and against malformed messages."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.coordinator.model import TopicPartition
from state.formats.frames import RESPONSE_FRAME_SCHEMA
from state.formats.response_codec import (
    _FEW_ROWS,
    RESPONSE_VERSION,
    Response,
    decode_response,
    encode_responses,
    json_strings,
)

# Hostile text: quotes, backslashes, control characters, non-ASCII, astral characters.
text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
plain = st.sampled_from(["t", "orders", "a.b-c_d", ""])


@st.composite
def frames(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Response rows of a few messages, each request-level rows and/or partition rows."""
    rows: list[dict[str, Any]] = []
    offsets = draw(st.lists(st.integers(0, 10**12), unique=True, max_size=6))
    for offset in offsets:
        request_id = draw(st.none() | text)
        group_id = draw(st.none() | text)
        api = draw(st.sampled_from(["OffsetCommit", "DeleteGroups", None]))
        # Request-level rows: none, one, or two (the highest code and the first reason win).
        for _ in range(draw(st.integers(1 if request_id is None else 0, 2))):
            rows.append(
                {
                    "ingest_offset": offset,
                    "request_id": request_id,
                    "group_id": group_id,
                    "api": api,
                    "topic": None,
                    "partition": None,
                    "error_code": draw(st.integers(0, 100)),
                    "error_reason": draw(st.none() | text),
                }
            )
        if request_id is None:
            continue
        for _ in range(draw(st.integers(0, 4))):
            rows.append(
                {
                    "ingest_offset": offset,
                    "request_id": request_id,
                    "group_id": group_id,
                    "api": api,
                    "topic": draw(plain | text),
                    "partition": draw(st.integers(-(2**31), 2**31 - 1)),
                    "error_code": draw(st.integers(0, 100)),
                    "error_reason": draw(st.none() | text),
                }
            )
    return draw(st.permutations(rows))


def expected(rows: list[dict[str, Any]], shard: int) -> tuple[list[Any], list[Any]]:
    """What the wire format says, message by message in ingest order."""
    answers: list[Any] = []
    dead: list[Any] = []
    for offset in sorted({r["ingest_offset"] for r in rows}):
        mine = [r for r in rows if r["ingest_offset"] == offset]
        if mine[0]["request_id"] is None:
            dead += [
                {
                    "ingestPartition": shard,
                    "ingestOffset": offset,
                    "errorCode": r["error_code"],
                    "reason": r["error_reason"],
                }
                for r in mine
            ]
            continue
        level = [r for r in mine if r["topic"] is None]
        head = mine[0]
        message = {
            "version": RESPONSE_VERSION,
            "requestId": head["request_id"],
            "groupId": head["group_id"],
            "api": head["api"],
            "errorCode": max((r["error_code"] for r in level), default=0),
            "errorMessage": level[0]["error_reason"] if level else None,
            "partitions": [
                {
                    "topic": r["topic"],
                    "partitionIndex": r["partition"],
                    "errorCode": r["error_code"],
                    "errorMessage": r["error_reason"],
                }
                for r in mine
                if r["topic"] is not None
            ],
        }
        answers.append((head["request_id"].encode("utf-8"), message))
    return answers, dead


@settings(max_examples=300, deadline=None)
@given(frames(), st.integers(0, 49))
def test_encoding_matches_the_wire_format(rows: list[dict[str, Any]], shard: int) -> None:
    table = pa.Table.from_pylist(rows, schema=RESPONSE_FRAME_SCHEMA)
    answers, dead = encode_responses(table, shard)
    want_answers, want_dead = expected(rows, shard)
    got_answers = [
        (k, json.loads(v))
        for k, v in zip(answers["key"].to_pylist(), answers["value"].to_pylist(), strict=True)
    ]
    assert got_answers == want_answers
    assert dead["key"].null_count == dead.num_rows
    assert [json.loads(v) for v in dead["value"].to_pylist()] == want_dead
    # Every message is valid UTF-8 JSON (json.loads above would have failed otherwise).
    assert answers["ingest_offset"].to_pylist() == sorted(
        {r["ingest_offset"] for r in rows if r["request_id"] is not None}
    )


@settings(max_examples=100, deadline=None)
@given(frames(), st.integers(0, 49))
def test_small_and_large_frames_encode_alike(rows: list[dict[str, Any]], shard: int) -> None:
    # A small frame is encoded request by request, a large one by Arrow's kernels: the same bytes.
    small = pa.Table.from_pylist(rows, schema=RESPONSE_FRAME_SCHEMA)
    copies = _FEW_ROWS // max(len(rows), 1) + 1
    shifted = [
        {**row, "ingest_offset": row["ingest_offset"] + copy * 10**13}
        for copy in range(copies)
        for row in rows
    ]
    large = pa.Table.from_pylist(shifted, schema=RESPONSE_FRAME_SCHEMA)
    small_answers, _ = encode_responses(small, shard)
    large_answers, _ = encode_responses(large, shard)
    assert large_answers.slice(0, small_answers.num_rows).equals(small_answers)
    assert large_answers.num_rows == small_answers.num_rows * copies


def test_json_strings_escape_only_what_needs_it() -> None:
    values = pa.array(["plain.topic-1_x", 'q"uote', "back\\slash", "tab\t", "é", "🚀", "", None])
    literals = json_strings(values).to_pylist()
    assert literals[0] == '"plain.topic-1_x"'
    assert literals[-1] == "null"
    assert [json.loads(v) for v in literals[:-1]] == values.to_pylist()[:-1]
    # Many values are encoded once per distinct value: the same literals.
    assert json_strings(pa.concat_arrays([values] * 20)).to_pylist() == literals * 20


def test_empty_frame_encodes_to_nothing() -> None:
    answers, dead = encode_responses(RESPONSE_FRAME_SCHEMA.empty_table(), 0)
    assert answers.num_rows == 0 and dead.num_rows == 0


def test_one_message_per_request_in_request_order() -> None:
    rows = [
        {
            "ingest_offset": 7,
            "request_id": "r",
            "group_id": "g",
            "api": "OffsetCommit",
            "topic": "t",
            "partition": p,
            "error_code": 12 if p == 1 else 0,
            "error_reason": "too large" if p == 1 else None,
        }
        for p in (2, 0, 1)
    ]
    answers, dead = encode_responses(pa.Table.from_pylist(rows, schema=RESPONSE_FRAME_SCHEMA), 3)
    assert dead.num_rows == 0
    (value,) = answers["value"].to_pylist()
    assert json.loads(value) == {
        "version": 1,
        "requestId": "r",
        "groupId": "g",
        "api": "OffsetCommit",
        "errorCode": 0,
        "errorMessage": None,
        "partitions": [
            {"topic": "t", "partitionIndex": 2, "errorCode": 0, "errorMessage": None},
            {"topic": "t", "partitionIndex": 0, "errorCode": 0, "errorMessage": None},
            {"topic": "t", "partitionIndex": 1, "errorCode": 12, "errorMessage": "too large"},
        ],
    }


# --- decoding -------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(frames(), st.integers(0, 49))
def test_decoding_an_encoded_frame_gives_back_each_request_answer(
    rows: list[dict[str, Any]], shard: int
) -> None:
    answers, _ = encode_responses(pa.Table.from_pylist(rows, schema=RESPONSE_FRAME_SCHEMA), shard)
    want, _ = expected(rows, shard)
    got = [
        decode_response(k, v)
        for k, v in zip(answers["key"].to_pylist(), answers["value"].to_pylist(), strict=True)
    ]
    assert len(got) == len(want)
    for response, (key, message) in zip(got, want, strict=True):
        partitions: dict[TopicPartition, tuple[int, str | None]] = {}
        for p in message["partitions"]:
            partitions[TopicPartition(p["topic"], p["partitionIndex"])] = (
                p["errorCode"],
                p["errorMessage"],
            )
        assert response == Response(
            request_id=key.decode("utf-8"),
            group_id=message["groupId"],
            api=message["api"],
            error_code=message["errorCode"],
            error_message=message["errorMessage"],
            partitions=partitions,
        )
        # Partition answers keep the message's order (the request's).
        assert list(response.partitions) == list(partitions)


def test_missing_codes_mean_success_and_unknown_fields_are_ignored() -> None:
    value = json.dumps(
        {"version": 1, "future": True, "partitions": [{"topic": "t", "partitionIndex": 3}]}
    ).encode()
    assert decode_response(b"r", value) == Response(
        "r", None, None, 0, None, {TopicPartition("t", 3): (0, None)}
    )


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (None, "null response value"),
        (b"\xff", "utf-8"),
        (b"{", "Expecting"),
        (b"[]", "not a JSON object"),
        (b'{"version": 2}', "unsupported response version 2"),
        (b'{"errorCode": 0}', "unsupported response version None"),
        (b'{"version": 1, "errorCode": "0"}', "errorCode is not an integer"),
        (b'{"version": 1, "errorCode": true}', "errorCode is not an integer"),
        (b'{"version": 1, "partitions": 5}', "partitions is not a JSON array"),
        (b'{"version": 1, "partitions": ["t"]}', "malformed partition entry"),
        (b'{"version": 1, "partitions": [{"topic": "t"}]}', "malformed partition entry"),
        (
            b'{"version": 1, "partitions": '
            b'[{"topic": "t", "partitionIndex": 0, "errorCode": 1.0}]}',
            "malformed partition entry",
        ),
    ],
)
def test_malformed_responses_raise_value_error(value: bytes | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        decode_response(b"r", value)
