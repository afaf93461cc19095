"""Malformed ingest requests: each is answered with the error code and a reason naming the JSON
path of the first field at fault, and with the ids the request still carries."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from state.coordinator.errors import ErrorCode
from state.coordinator.requests import DecodeError
from state.formats.request_codec import decode_request, encode_request
from tests.state.formats.request_examples import (
    COMMIT,
    CORRUPT,
    GROUP,
    INVALID,
    TXN_COMMIT,
    UNSUPPORTED,
)


def commit_doc() -> dict[str, Any]:
    return {
        "version": 1,
        "api": "OffsetCommit",
        "requestId": "r-9",
        "groupId": "g-9",
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partitionIndex": 0, "committedOffset": 1},
                    {"partitionIndex": 1, "committedOffset": 2},
                    {"partitionIndex": 2, "committedOffset": 3},
                ],
            }
        ],
    }


def txn_doc() -> dict[str, Any]:
    return json.loads(encode_request(TXN_COMMIT))


TXN_IDS = ("r-5", "g", "TxnOffsetCommit")


def group_doc() -> dict[str, Any]:
    return json.loads(encode_request(GROUP))


def edit(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> bytes:
    """Set (or, for value DELETE, remove) the element at ``path`` and serialize."""
    doc = copy.deepcopy(doc)
    target = doc
    for step in path[:-1]:
        target = target[step]
    if value is DELETE_FIELD:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(doc).encode()


DELETE_FIELD = object()
P2 = ("topics", 0, "partitions", 2)
IDS = ("r-9", "g-9", "OffsetCommit")
NO_IDS = (None, None, None)

MALFORMED: list[tuple[str, bytes | None, ErrorCode, str, tuple[str | None, ...]]] = [
    ("null value", None, CORRUPT, "request", NO_IDS),
    ("empty value", b"", CORRUPT, "empty", NO_IDS),
    ("not UTF-8", b'{"version": 1, "api": "\xff"}', CORRUPT, "UTF-8", NO_IDS),
    ("not JSON", b"{version: 1}", CORRUPT, "JSON", NO_IDS),
    ("truncated JSON", encode_request(COMMIT)[:-1], CORRUPT, "JSON", NO_IDS),
    ("NaN", b'{"version": NaN}', CORRUPT, "NaN", NO_IDS),
    ("array", b"[1, 2]", CORRUPT, "got array", NO_IDS),
    ("string", b'"OffsetCommit"', CORRUPT, "got string", NO_IDS),
    ("UTF-16", '{"version": 1}'.encode("utf-16"), CORRUPT, "UTF-8", NO_IDS),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, CORRUPT, "nested", NO_IDS),
    ("version missing", edit(commit_doc(), ("version",), DELETE_FIELD), INVALID, "version", IDS),
    ("version string", edit(commit_doc(), ("version",), "1"), INVALID, "version", IDS),
    ("version bool", edit(commit_doc(), ("version",), True), INVALID, "version", IDS),
    ("version float", edit(commit_doc(), ("version",), 1.0), INVALID, "version", IDS),
    ("version too new", edit(commit_doc(), ("version",), 2), UNSUPPORTED, "version", IDS),
    ("version zero", edit(commit_doc(), ("version",), 0), UNSUPPORTED, "version", IDS),
    ("version negative", edit(commit_doc(), ("version",), -1), UNSUPPORTED, "version", IDS),
    ("version huge", edit(commit_doc(), ("version",), 10**40), UNSUPPORTED, "version", IDS),
    (
        "api missing",
        edit(commit_doc(), ("api",), DELETE_FIELD),
        INVALID,
        "api",
        ("r-9", "g-9", None),
    ),
    (
        "api unknown",
        edit(commit_doc(), ("api",), "OffsetFetch"),
        INVALID,
        "api",
        ("r-9", "g-9", "OffsetFetch"),
    ),
    (
        "api number",
        edit(commit_doc(), ("api",), 8),
        INVALID,
        "api: expected a string",
        ("r-9", "g-9", None),
    ),
    (
        "requestId missing",
        edit(commit_doc(), ("requestId",), DELETE_FIELD),
        INVALID,
        "requestId: missing",
        (None, "g-9", "OffsetCommit"),
    ),
    (
        "requestId null",
        edit(commit_doc(), ("requestId",), None),
        INVALID,
        "requestId",
        (None, "g-9", "OffsetCommit"),
    ),
    (
        "groupId number",
        edit(commit_doc(), ("groupId",), 5),
        INVALID,
        "groupId: expected a string, got integer",
        ("r-9", None, "OffsetCommit"),
    ),
    (
        "topics missing",
        edit(commit_doc(), ("topics",), DELETE_FIELD),
        INVALID,
        "topics: missing",
        IDS,
    ),
    (
        "topics object",
        edit(commit_doc(), ("topics",), {}),
        INVALID,
        "topics: expected an array, got object",
        IDS,
    ),
    (
        "topic not object",
        edit(commit_doc(), ("topics", 0), "t"),
        INVALID,
        "topics[0]: expected an object, got string",
        IDS,
    ),
    (
        "topic name missing",
        edit(commit_doc(), ("topics", 0, "name"), DELETE_FIELD),
        INVALID,
        "topics[0].name: missing",
        IDS,
    ),
    (
        "topic name null",
        edit(commit_doc(), ("topics", 0, "name"), None),
        INVALID,
        "topics[0].name: expected a string, got null",
        IDS,
    ),
    (
        "partitions null",
        edit(commit_doc(), ("topics", 0, "partitions"), None),
        INVALID,
        "topics[0].partitions: expected an array, got null",
        IDS,
    ),
    (
        "offset string",
        edit(commit_doc(), (*P2, "committedOffset"), "3"),
        INVALID,
        "topics[0].partitions[2].committedOffset: expected an integer, got string",
        IDS,
    ),
    (
        "offset float",
        edit(commit_doc(), (*P2, "committedOffset"), 3.5),
        INVALID,
        "topics[0].partitions[2].committedOffset: expected an integer, got number",
        IDS,
    ),
    (
        "offset missing",
        edit(commit_doc(), (*P2, "committedOffset"), DELETE_FIELD),
        INVALID,
        "topics[0].partitions[2].committedOffset: missing",
        IDS,
    ),
    (
        "offset over int64",
        edit(commit_doc(), (*P2, "committedOffset"), 1 << 63),
        INVALID,
        "topics[0].partitions[2].committedOffset: 9223372036854775808 is out of range for int64",
        IDS,
    ),
    (
        "offset 30 digits",
        edit(commit_doc(), (*P2, "committedOffset"), 10**30),
        INVALID,
        "topics[0].partitions[2].committedOffset: 1000000000000000000000000000000 "
        "is out of range for int64",
        IDS,
    ),
    (
        "partition not object",
        edit(commit_doc(), ("topics", 0, "partitions", 1), 7),
        INVALID,
        "topics[0].partitions[1]: expected an object, got integer",
        IDS,
    ),
    (
        "lone surrogate metadata",
        encode_request(COMMIT).replace(b'"meta\xf0\x9f\x98\x80"', b'"\\udc00"'),
        INVALID,
        "topics[0].partitions[1].committedMetadata: string contains an unpaired surrogate",
        ("r-1", "group-é", "OffsetCommit"),
    ),
    (
        "partition bool",
        edit(commit_doc(), (*P2, "partitionIndex"), False),
        INVALID,
        "topics[0].partitions[2].partitionIndex: expected an integer, got boolean",
        IDS,
    ),
    (
        "partition over int32",
        edit(commit_doc(), (*P2, "partitionIndex"), 1 << 31),
        INVALID,
        "topics[0].partitions[2].partitionIndex: 2147483648 is out of range for int32",
        IDS,
    ),
    (
        "epoch under int32",
        edit(commit_doc(), (*P2, "committedLeaderEpoch"), -(1 << 31) - 1),
        INVALID,
        "topics[0].partitions[2].committedLeaderEpoch",
        IDS,
    ),
    (
        "metadata number",
        edit(commit_doc(), (*P2, "committedMetadata"), 7),
        INVALID,
        "topics[0].partitions[2].committedMetadata: expected a string or null, got integer",
        IDS,
    ),
    ("generation string", edit(commit_doc(), ("generationId",), "3"), INVALID, "generationId", IDS),
    (
        "generation null",
        edit(commit_doc(), ("generationId",), None),
        INVALID,
        "generationId: expected an integer, got null",
        IDS,
    ),
    ("memberId null", edit(commit_doc(), ("memberId",), None), INVALID, "memberId", IDS),
    (
        "instance id number",
        edit(commit_doc(), ("groupInstanceId",), 1),
        INVALID,
        "groupInstanceId",
        IDS,
    ),
    (
        "retention over int64",
        edit(commit_doc(), ("retentionTimeMs",), 1 << 64),
        INVALID,
        "retentionTimeMs",
        IDS,
    ),
    (
        "retention array",
        edit(commit_doc(), ("retentionTimeMs",), [1]),
        INVALID,
        "retentionTimeMs: expected an integer, got array",
        IDS,
    ),
    (
        "duplicate top-level key",
        b'{"version":1,"api":"DeleteGroups","requestId":"a","requestId":"b","groupId":"g"}',
        INVALID,
        "duplicate key 'requestId'",
        (None, "g", "DeleteGroups"),
    ),
    (
        "duplicate nested key",
        encode_request(COMMIT).replace(
            b'"committedOffset":42', b'"committedOffset":42,"committedOffset":43'
        ),
        INVALID,
        "topics[0].partitions[0]: duplicate key 'committedOffset'",
        ("r-1", "group-é", "OffsetCommit"),
    ),
    (
        "lone surrogate group",
        b'{"version":1,"api":"DeleteGroups","requestId":"r","groupId":"\\ud800"}',
        INVALID,
        "groupId: string contains an unpaired surrogate",
        ("r", None, "DeleteGroups"),
    ),
    (
        "delete partition missing",
        b'{"version":1,"api":"OffsetDelete","requestId":"r","groupId":"g","topics":[{"name":"t","partitions":[{}]}]}',
        INVALID,
        "topics[0].partitions[0].partitionIndex: missing",
        ("r", "g", "OffsetDelete"),
    ),
    (
        "transactionalId missing",
        edit(txn_doc(), ("transactionalId",), DELETE_FIELD),
        INVALID,
        "transactionalId: missing",
        TXN_IDS,
    ),
    (
        "transactionalId empty",
        edit(txn_doc(), ("transactionalId",), ""),
        INVALID,
        "transactionalId: empty",
        TXN_IDS,
    ),
    (
        "transactionalId null",
        edit(txn_doc(), ("transactionalId",), None),
        INVALID,
        "transactionalId: expected a string, got null",
        TXN_IDS,
    ),
    (
        "producerId missing",
        edit(txn_doc(), ("producerId",), DELETE_FIELD),
        INVALID,
        "producerId: missing",
        TXN_IDS,
    ),
    (
        "producerId string",
        edit(txn_doc(), ("producerId",), "12"),
        INVALID,
        "producerId: expected an integer, got string",
        TXN_IDS,
    ),
    (
        "producerId over int64",
        edit(txn_doc(), ("producerId",), 1 << 63),
        INVALID,
        "producerId: 9223372036854775808 is out of range for int64",
        TXN_IDS,
    ),
    (
        "producerEpoch missing",
        edit(txn_doc(), ("producerEpoch",), DELETE_FIELD),
        INVALID,
        "producerEpoch: missing",
        TXN_IDS,
    ),
    (
        "producerEpoch over int16",
        edit(txn_doc(), ("producerEpoch",), 1 << 15),
        INVALID,
        "producerEpoch: 32768 is out of range for int16",
        TXN_IDS,
    ),
    (
        "producerEpoch float",
        edit(txn_doc(), ("producerEpoch",), 1.0),
        INVALID,
        "producerEpoch: expected an integer, got number",
        TXN_IDS,
    ),
    (
        "txn generation bool",
        edit(txn_doc(), ("generationId",), True),
        INVALID,
        "generationId: expected an integer, got boolean",
        TXN_IDS,
    ),
    (
        "txn offset missing",
        edit(txn_doc(), ("topics", 1, "partitions", 0, "committedOffset"), DELETE_FIELD),
        INVALID,
        "topics[1].partitions[0].committedOffset: missing",
        TXN_IDS,
    ),
    (
        "group generation missing",
        edit(group_doc(), ("generationId",), DELETE_FIELD),
        INVALID,
        "generationId: missing",
        ("r-4", "g", "GroupMetadata"),
    ),
    (
        "group protocol number",
        edit(group_doc(), ("protocolName",), 1),
        INVALID,
        "protocolName",
        ("r-4", "g", "GroupMetadata"),
    ),
    (
        "group members object",
        edit(group_doc(), ("members",), {}),
        INVALID,
        "members: expected an array, got object",
        ("r-4", "g", "GroupMetadata"),
    ),
    (
        "member id missing",
        edit(group_doc(), ("members", 1, "memberId"), DELETE_FIELD),
        INVALID,
        "members[1].memberId: missing",
        ("r-4", "g", "GroupMetadata"),
    ),
    (
        "member session string",
        edit(group_doc(), ("members", 1, "sessionTimeoutMs"), "10s"),
        INVALID,
        "members[1].sessionTimeoutMs: expected an integer, got string",
        ("r-4", "g", "GroupMetadata"),
    ),
    (
        "member topic number",
        edit(group_doc(), ("members", 0, "subscribedTopics", 1), 5),
        INVALID,
        "members[0].subscribedTopics[1]: expected a string, got integer",
        ("r-4", "g", "GroupMetadata"),
    ),
]


@pytest.mark.parametrize(
    ("data", "code", "reason", "ids"),
    [pytest.param(*case[1:], id=case[0]) for case in MALFORMED],
)
def test_malformed_input(
    data: bytes | None, code: ErrorCode, reason: str, ids: tuple[str | None, ...]
) -> None:
    result = decode_request(data)
    assert isinstance(result, DecodeError)
    assert result.error_code == code
    assert reason in result.reason
    assert (result.request_id, result.group_id, result.api) == ids


def test_malformed_table_is_large_enough() -> None:
    assert len(MALFORMED) >= 30
    assert {case[2] for case in MALFORMED} == {CORRUPT, INVALID, UNSUPPORTED}


def test_non_bytes_input_is_corrupt_not_an_exception() -> None:
    result = decode_request('{"version": 1}')  # type: ignore[arg-type]
    assert isinstance(result, DecodeError)
    assert result.error_code == CORRUPT


def test_first_failing_field_is_reported() -> None:
    doc = commit_doc()
    doc["topics"][0]["partitions"][0]["committedOffset"] = "x"
    doc["topics"][0]["partitions"][2]["committedOffset"] = "y"
    result = decode_request(json.dumps(doc).encode())
    assert isinstance(result, DecodeError)
    assert result.reason.startswith("topics[0].partitions[0].committedOffset:")
