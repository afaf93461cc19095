"""The ingest request format: versioned JSON in; a request or a DecodeError out, never a raise."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.coordinator.errors import ErrorCode
from state.coordinator.model import MemberMetadata, TopicPartition
from state.coordinator.requests import (
    REQUEST_VERSION,
    DecodeError,
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
)
from state.formats.request_codec import (
    decode_members,
    decode_request,
    encode_members,
    encode_request,
)

CORRUPT = ErrorCode.CORRUPT_MESSAGE
INVALID = ErrorCode.INVALID_REQUEST
UNSUPPORTED = ErrorCode.UNSUPPORTED_VERSION

COMMIT = OffsetCommitRequest(
    request_id="r-1",
    group_id="group-é",
    partitions=(
        PartitionCommit("t", 0, 42),
        PartitionCommit("t", 1, 1 << 62, 5, "meta😀"),
        PartitionCommit("u", 0, -1, -1, ""),
        # The same topic again after another: order is kept exactly.
        PartitionCommit("t", 2, 0),
    ),
    generation_id=7,
    member_id="m1",
    group_instance_id="static-1",
    retention_time_ms=86_400_000,
)
DELETE = OffsetDeleteRequest(
    "r-2", "g", (TopicPartition("t", 0), TopicPartition("t", 3), TopicPartition("v", 1))
)
DELETE_GROUPS = DeleteGroupsRequest("r-3", "g")
MEMBERS = (
    MemberMetadata("m1", None, "client-1", "/10.0.0.1", 300_000, 45_000, ("t", "u")),
    MemberMetadata("m2", "static-2", "", "", 60_000, 10_000, ()),
)
GROUP = GroupMetadataRequest("r-4", "g", 3, "consumer", "range", "m1", MEMBERS)


@pytest.mark.parametrize(
    "request_",
    [
        COMMIT,
        OffsetCommitRequest("r", "g", ()),
        DELETE,
        OffsetDeleteRequest("r", "", ()),
        DELETE_GROUPS,
        GROUP,
        GroupMetadataRequest("r", "g", -1, "", None, None, ()),
    ],
)
def test_round_trip(request_: Any) -> None:
    data = encode_request(request_)
    assert isinstance(data, bytes)
    assert decode_request(data) == request_


def test_encoded_commit_uses_kafka_field_names() -> None:
    doc = json.loads(encode_request(COMMIT))
    assert doc["version"] == REQUEST_VERSION == 1
    assert doc["api"] == "OffsetCommit"
    assert doc["requestId"] == "r-1"
    assert doc["groupId"] == "group-é"
    assert doc["generationId"] == 7
    assert doc["memberId"] == "m1"
    assert doc["groupInstanceId"] == "static-1"
    assert doc["retentionTimeMs"] == 86_400_000
    assert [t["name"] for t in doc["topics"]] == ["t", "u", "t"]
    assert doc["topics"][0]["partitions"][1] == {
        "partitionIndex": 1,
        "committedOffset": 1 << 62,
        "committedLeaderEpoch": 5,
        "committedMetadata": "meta😀",
    }


def test_encoded_group_metadata_uses_kafka_field_names() -> None:
    doc = json.loads(encode_request(GROUP))
    assert doc["api"] == "GroupMetadata"
    assert doc["protocolType"] == "consumer"
    assert doc["protocolName"] == "range"
    assert doc["leader"] == "m1"
    assert doc["members"][0] == {
        "memberId": "m1",
        "groupInstanceId": None,
        "clientId": "client-1",
        "clientHost": "/10.0.0.1",
        "rebalanceTimeoutMs": 300_000,
        "sessionTimeoutMs": 45_000,
        "subscribedTopics": ["t", "u"],
    }


def test_minimal_documents_take_defaults() -> None:
    commit = {
        "version": 1,
        "api": "OffsetCommit",
        "requestId": "r",
        "groupId": "g",
        "topics": [{"name": "t", "partitions": [{"partitionIndex": 3, "committedOffset": 9}]}],
    }
    assert decode_request(json.dumps(commit).encode()) == OffsetCommitRequest(
        "r", "g", (PartitionCommit("t", 3, 9, -1, ""),), -1, "", None, -1
    )
    group = {"version": 1, "api": "GroupMetadata", "requestId": "r", "groupId": "g",
             "generationId": 2, "members": [{"memberId": "m"}]}  # fmt: skip
    assert decode_request(json.dumps(group).encode()) == GroupMetadataRequest(
        "r", "g", 2, "consumer", None, None, (MemberMetadata("m"),)
    )


def test_null_metadata_is_empty_and_unknown_fields_are_ignored() -> None:
    doc = {
        "version": 1,
        "api": "OffsetCommit",
        "requestId": "r",
        "groupId": "g",
        "futureField": {"anything": [1, 2]},
        "topics": [
            {
                "name": "t",
                "topicId": "ignored",
                "partitions": [
                    {"partitionIndex": 0, "committedOffset": 1, "committedMetadata": None, "x": 1}
                ],
            }
        ],
    }
    result = decode_request(json.dumps(doc).encode())
    assert isinstance(result, OffsetCommitRequest)
    assert result.partitions == (PartitionCommit("t", 0, 1, -1, ""),)


def test_accepts_bytearray_and_memoryview() -> None:
    data = encode_request(DELETE_GROUPS)
    assert decode_request(bytearray(data)) == DELETE_GROUPS
    assert decode_request(memoryview(data)) == DELETE_GROUPS


def test_semantic_checks_are_not_the_decoders_job() -> None:
    odd = OffsetCommitRequest("r", "", (PartitionCommit("", -5, -7, -9, "x" * 10_000),))
    assert decode_request(encode_request(odd)) == odd


# --- malformed input ----------------------------------------------------------------------------


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


# --- members_json -------------------------------------------------------------------------------


def test_members_round_trip() -> None:
    assert decode_members(encode_members(MEMBERS)) == MEMBERS
    assert decode_members(encode_members([])) == ()
    assert decode_members("[]") == ()


def test_encode_members_drops_assignment() -> None:
    member = MemberMetadata("m", assignment=b"\x01")
    assert decode_members(encode_members([member])) == (MemberMetadata("m"),)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{}", "members: expected an array, got object"),
        ("not json", "members: not valid JSON"),
        ('[{"memberId": 1}]', "members[0].memberId: expected a string, got integer"),
        ('[{"memberId": "a"}, {}]', "members[1].memberId: missing"),
        ('[{"memberId": "a", "rebalanceTimeoutMs": 1e3}]', "members[0].rebalanceTimeoutMs"),
        ('[{"memberId": "a", "subscribedTopics": "t"}]', "members[0].subscribedTopics"),
        ('[{"memberId": "a", "memberId": "b"}]', "members[0]: duplicate key 'memberId'"),
        ("[3]", "members[0]: expected an object, got integer"),
    ],
)
def test_decode_members_errors_name_the_field(text: str, field: str) -> None:
    with pytest.raises(ValueError) as info:
        decode_members(text)
    assert field in str(info.value)


# --- never raises -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def _assert_result(result: object) -> None:
    if isinstance(result, DecodeError):
        assert result.error_code in (CORRUPT, INVALID, UNSUPPORTED)
        assert result.reason
        assert "unexpected decoder failure" not in result.reason
    else:
        assert isinstance(
            result,
            OffsetCommitRequest | OffsetDeleteRequest | DeleteGroupsRequest | GroupMetadataRequest,
        )


@given(st.binary(max_size=200))
def test_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    _assert_result(decode_request(data))


@given(json_values)
def test_never_raises_on_arbitrary_json(value: Any) -> None:
    _assert_result(decode_request(json.dumps(value).encode()))


TEMPLATES = [
    json.loads(encode_request(COMMIT)),
    json.loads(encode_request(DELETE)),
    json.loads(encode_request(DELETE_GROUPS)),
    json.loads(encode_request(GROUP)),
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON document (object keys and array indexes)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_requests(draw: st.DrawFn) -> bytes:
    """A valid request with one element replaced by an arbitrary JSON value, or removed."""
    doc = copy.deepcopy(draw(st.sampled_from(TEMPLATES)))
    path = draw(st.sampled_from(_paths(doc)))
    target = doc
    for step in path[:-1]:
        target = target[step]
    if draw(st.booleans()) and isinstance(target, dict):
        del target[path[-1]]
    else:
        target[path[-1]] = draw(json_values)
    return json.dumps(doc).encode()


@settings(max_examples=200)
@given(mutated_requests())
def test_never_raises_on_mutated_requests(data: bytes) -> None:
    result = decode_request(data)
    _assert_result(result)
    if isinstance(result, DecodeError) and result.error_code != CORRUPT:
        # A mutated request still names itself unless its own identifiers were the mutation.
        doc = json.loads(data)
        if isinstance(doc.get("requestId"), str):
            assert result.request_id == doc["requestId"]


@given(st.text(max_size=50))
def test_decode_members_raises_only_value_error(text: str) -> None:
    # Any other exception type fails the test.
    with contextlib.suppress(ValueError):
        decode_members(text)
