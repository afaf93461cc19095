"""The ingest request format: versioned JSON in; a request or a DecodeError out, never a raise."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.coordinator.model import MemberMetadata
from state.coordinator.requests import (
    REQUEST_VERSION,
    DecodeError,
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from state.formats.request_codec import (
    decode_members,
    decode_request,
    encode_members,
    encode_request,
)
from tests.state.formats.request_examples import (
    COMMIT,
    CORRUPT,
    DELETE,
    DELETE_GROUPS,
    GROUP,
    INVALID,
    MEMBERS,
    TXN_COMMIT,
    UNSUPPORTED,
)


@pytest.mark.parametrize(
    "request_",
    [
        COMMIT,
        OffsetCommitRequest("r", "g", ()),
        TXN_COMMIT,
        TxnOffsetCommitRequest("r", "", "t", 0, 0, ()),
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


def test_encoded_txn_commit_uses_kafka_field_names() -> None:
    doc = json.loads(encode_request(TXN_COMMIT))
    assert doc["api"] == "TxnOffsetCommit"
    assert (doc["transactionalId"], doc["producerId"], doc["producerEpoch"]) == (
        "tx-é",
        2**63 - 1,
        -(2**15),
    )
    assert (doc["generationId"], doc["memberId"], doc["groupInstanceId"]) == (4, "m1", "static-1")
    assert "timeoutMs" not in doc and "retentionTimeMs" not in doc
    assert doc["topics"][1] == {
        "name": "u",
        "partitions": [
            {
                "partitionIndex": 1,
                "committedOffset": 7,
                "committedLeaderEpoch": 3,
                "committedMetadata": "m",
            }
        ],
    }


def test_minimal_txn_commit_takes_defaults_and_ignores_retention() -> None:
    doc = {
        "version": 1,
        "api": "TxnOffsetCommit",
        "requestId": "r",
        "groupId": "g",
        "transactionalId": "tx",
        "producerId": 12,
        "producerEpoch": 3,
        # Kafka's TxnOffsetCommit has no retention: an unknown field, ignored.
        "retentionTimeMs": 5,
        "topics": [{"name": "t", "partitions": [{"partitionIndex": 3, "committedOffset": 9}]}],
    }
    assert decode_request(json.dumps(doc).encode()) == TxnOffsetCommitRequest(
        "r", "g", "tx", 12, 3, (PartitionCommit("t", 3, 9, -1, ""),), -1, "", None
    )


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
            OffsetCommitRequest
            | TxnOffsetCommitRequest
            | OffsetDeleteRequest
            | DeleteGroupsRequest
            | GroupMetadataRequest,
        )


@given(st.binary(max_size=200))
def test_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    _assert_result(decode_request(data))


@given(json_values)
def test_never_raises_on_arbitrary_json(value: Any) -> None:
    _assert_result(decode_request(json.dumps(value).encode()))


TEMPLATES = [
    json.loads(encode_request(COMMIT)),
    json.loads(encode_request(TXN_COMMIT)),
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


# --- timeoutMs ---------------------------------------------------------------------------------


def _with(doc: dict[str, Any], **fields: Any) -> bytes:
    return json.dumps(doc | fields).encode()


@pytest.mark.parametrize(
    "template", [t for t in TEMPLATES if t["api"] != "TxnOffsetCommit"], ids=lambda t: t["api"]
)
def test_timeout_is_optional_and_read_for_every_api_but_txn(template: dict[str, Any]) -> None:
    base = {k: v for k, v in template.items() if k != "timeoutMs"}
    absent = decode_request(json.dumps(base).encode())
    assert not isinstance(absent, DecodeError) and absent.timeout_ms is None
    null = decode_request(_with(base, timeoutMs=None))
    assert null == absent
    for value in (0, 1, 60_000, 2**31 - 1):
        decoded = decode_request(_with(base, timeoutMs=value))
        assert not isinstance(decoded, DecodeError) and decoded.timeout_ms == value


def test_a_txn_offset_commit_has_no_timeout() -> None:
    """Read once its transaction committed, it has no deadline: ``timeoutMs`` is ignored, as
    any field its API lacks, and never encoded."""
    (template,) = [t for t in TEMPLATES if t["api"] == "TxnOffsetCommit"]
    base = {k: v for k, v in template.items() if k != "timeoutMs"}
    plain = decode_request(json.dumps(base).encode())
    assert isinstance(plain, TxnOffsetCommitRequest)
    for value in (0, 5_000, -1, "soon"):
        assert decode_request(_with(base, timeoutMs=value)) == plain
    assert b"timeoutMs" not in encode_request(plain)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-1, "timeoutMs: -1 is negative"),
        (2**31, "timeoutMs: 2147483648 is out of range for int32"),
        (10**30, "timeoutMs: 1000000000000000000000000000000 is out of range for int32"),
        ("5000", "timeoutMs: expected an integer, got string"),
        (True, "timeoutMs: expected an integer, got boolean"),
        (1.5, "timeoutMs: expected an integer, got number"),
    ],
)
def test_invalid_timeout_is_refused_naming_the_field(value: Any, reason: str) -> None:
    doc = json.loads(encode_request(DELETE_GROUPS))
    result = decode_request(_with(doc, timeoutMs=value))
    assert result == DecodeError(INVALID, reason, "r-3", "g", "DeleteGroups")


def test_a_request_without_timeout_is_encoded_as_before() -> None:
    """Producers that predate ``timeoutMs`` and this encoder agree byte for byte."""
    assert b"timeoutMs" not in encode_request(COMMIT)
    assert json.loads(encode_request(DELETE))["timeoutMs"] == 30_000
