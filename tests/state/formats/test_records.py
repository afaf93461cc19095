"""Byte-exact ``__consumer_offsets`` record codecs.

Expected bytes are built by hand, field by field, from the schemas in apache/kafka
``group-coordinator/src/main/resources/common/message`` (see the tables in
``state.formats.records``),
never with the module under test. When Kafka's own jars and a JDK are available, a further test
compares against Kafka's generated message classes.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
    UnknownKey,
)
from state.formats import records
from state.formats.records import (
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_record,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_keys,
    encode_offset_commit_value,
    encode_offset_commit_values,
    encode_record,
)

# --- hand-written wire primitives (big-endian, as in Kafka's protocol) -----------------------


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def s(text: str | None) -> bytes:
    """Non-flexible string: int16 byte length, UTF-8; null is length -1."""
    if text is None:
        return i16(-1)
    raw = text.encode()
    return i16(len(raw)) + raw


def b32(raw: bytes) -> bytes:
    """Non-flexible bytes: int32 length."""
    return i32(len(raw)) + raw


def uv(n: int) -> bytes:
    """Unsigned varint, 7 bits per byte, least significant group first."""
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def cs(text: str | None) -> bytes:
    """Compact string: varint(length + 1), 0 = null."""
    if text is None:
        return b"\x00"
    raw = text.encode()
    return uv(len(raw) + 1) + raw


def cb(raw: bytes) -> bytes:
    """Compact bytes: varint(length + 1)."""
    return uv(len(raw) + 1) + raw


NO_TAGS = b"\x00"


def test_wire_helpers_match_literal_bytes() -> None:
    # The helpers above are the ground truth for the other tests; pin them to literal bytes.
    assert s("ab") == b"\x00\x02ab"
    assert s(None) == b"\xff\xff"
    assert uv(0) == b"\x00"
    assert uv(127) == b"\x7f"
    assert uv(128) == b"\x80\x01"
    assert uv(300) == b"\xac\x02"
    assert cs("") == b"\x01"
    assert cs(None) == b"\x00"
    assert b32(b"\x01") == b"\x00\x00\x00\x01\x01"


# A ConsumerProtocolSubscription v0 for topics ["t", "u"]: version, topic array, null userData.
SUB_TU = i16(0) + i32(2) + s("t") + s("u") + i32(-1)
# Version 1 of the same with ownedPartitions [t: [0, 1]] after userData (real clients send v1+).
SUB_V1_TU = i16(1) + i32(2) + s("t") + s("u") + i32(-1) + i32(1) + s("t") + i32(2) + i32(0) + i32(1)
ASSIGNMENT = b"\x00\x01\x02"


# --- keys -------------------------------------------------------------------------------------


def test_offset_commit_key_v1_literal_bytes() -> None:
    expected = bytes.fromhex("000100016700017400000003")
    assert encode_offset_commit_key("g", "t", 3) == expected
    assert decode_key(expected) == OffsetCommitKey("g", "t", 3)


def test_offset_commit_key_v0_decodes_and_encodes() -> None:
    data = i16(0) + s("group") + s("topic") + i32(7)
    assert decode_key(data) == OffsetCommitKey("group", "topic", 7)
    assert encode_offset_commit_key("group", "topic", 7, version=0) == data


def test_offset_commit_key_non_ascii_and_extremes() -> None:
    data = i16(1) + s("grüppe-日本") + s("") + i32(-(1 << 31))
    assert decode_key(data) == OffsetCommitKey("grüppe-日本", "", -(1 << 31))
    assert encode_offset_commit_key("grüppe-日本", "", -(1 << 31)) == data


def test_group_metadata_key_v2() -> None:
    data = bytes.fromhex("0002000167")
    assert encode_group_metadata_key("g") == data
    assert decode_key(data) == GroupMetadataKey("g")
    assert decode_key(i16(2) + s("")) == GroupMetadataKey("")


@pytest.mark.parametrize("version", [3, 4, 8, 15, 0x7FFF])
def test_unknown_key_versions(version: int) -> None:
    rest = b"\x00\x05group\x01\x02"
    assert decode_key(i16(version) + rest) == UnknownKey(version, rest)
    assert decode_key(i16(version)) == UnknownKey(version, b"")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"", "version"),
        (b"\x00", "version"),
        (i16(-1) + s("g"), "version"),
        (i16(1) + s("g"), "topic"),  # missing topic and partition
        (i16(1) + s("g") + s("t") + b"\x00\x00\x00", "partition"),  # 3 of 4 bytes
        (i16(1) + s("g") + s("t") + i32(0) + b"x", "trailing"),
        (i16(0) + s("g") + s("t") + i32(0) + b"\x00", "trailing"),
        (i16(2) + s("g") + b"\x00", "trailing"),
        (i16(2) + b"\x00\x05ab", "group"),  # length 5, 2 bytes present
        (i16(2) + i16(-1), "group"),  # null in a non-nullable string
        (i16(2) + i16(-2), "group"),  # negative length
        (i16(1) + i16(-3) + s("t") + i32(0), "group"),
        (i16(1) + s("g") + i16(-1) + i32(0), "topic"),
        (i16(2) + b"\x00\x02\xc3\x28", "group"),  # invalid UTF-8
        (i16(1) + s("g") + b"\x00\x01\xff" + i32(0), "topic"),  # invalid UTF-8
        (i16(1) + b"\x00\x01\x80" + s("t") + i32(0), "group"),
    ],
)
def test_bad_keys_raise_record_format_error(data: bytes, field: str) -> None:
    with pytest.raises(RecordFormatError, match=field):
        decode_key(data)


def test_key_error_messages_name_type_and_version() -> None:
    with pytest.raises(RecordFormatError, match=r"OffsetCommitKey v1: partition"):
        decode_key(i16(1) + s("g") + s("t"))
    with pytest.raises(RecordFormatError, match=r"GroupMetadataKey v2: group"):
        decode_key(i16(2) + i16(-5))


def test_null_key_is_a_format_error_and_non_bytes_a_type_error() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        decode_key("0001")  # type: ignore[arg-type]
    assert decode_key(bytearray(i16(2) + s("g"))) == GroupMetadataKey("g")
    assert decode_key(memoryview(i16(2) + s("g"))) == GroupMetadataKey("g")


# --- OffsetCommitValue ------------------------------------------------------------------------

OFFSET = 0x0102030405060708
COMMIT_TS = 1_700_000_000_123
EXPIRE_TS = 1_700_604_800_123

OFFSET_VALUE_VECTORS = [
    # v0: offset, metadata, commitTimestamp
    (
        i16(0) + i64(OFFSET) + s("meta") + i64(COMMIT_TS),
        OffsetAndMetadata(OFFSET, -1, "meta", COMMIT_TS, None),
    ),
    # v1: offset, metadata, commitTimestamp, expireTimestamp
    (
        i16(1) + i64(OFFSET) + s("meta") + i64(COMMIT_TS) + i64(EXPIRE_TS),
        OffsetAndMetadata(OFFSET, -1, "meta", COMMIT_TS, EXPIRE_TS),
    ),
    # v1 with expireTimestamp -1: no explicit expiry
    (
        i16(1) + i64(5) + s("") + i64(COMMIT_TS) + i64(-1),
        OffsetAndMetadata(5, -1, "", COMMIT_TS, None),
    ),
    # v2: same layout as v0
    (
        i16(2) + i64(OFFSET) + s("m") + i64(COMMIT_TS),
        OffsetAndMetadata(OFFSET, -1, "m", COMMIT_TS, None),
    ),
    # v3: offset, leaderEpoch, metadata, commitTimestamp
    (
        i16(3) + i64(OFFSET) + i32(17) + s("meta") + i64(COMMIT_TS),
        OffsetAndMetadata(OFFSET, 17, "meta", COMMIT_TS, None),
    ),
    # v3 with no leader epoch and non-ASCII metadata
    (
        i16(3) + i64(0) + i32(-1) + s("é😀") + i64(-1),
        OffsetAndMetadata(0, -1, "é😀", -1, None),
    ),
    # v4: flexible: compact metadata, then an empty tagged-field section
    (
        i16(4) + i64(OFFSET) + i32(17) + cs("meta") + i64(COMMIT_TS) + NO_TAGS,
        OffsetAndMetadata(OFFSET, 17, "meta", COMMIT_TS, None),
    ),
    # v4 with empty metadata (compact length byte 0x01)
    (
        i16(4) + i64(1) + i32(2) + b"\x01" + i64(3) + NO_TAGS,
        OffsetAndMetadata(1, 2, "", 3, None),
    ),
]


@pytest.mark.parametrize(("data", "value"), OFFSET_VALUE_VECTORS)
def test_offset_commit_value_vectors(data: bytes, value: OffsetAndMetadata) -> None:
    assert decode_offset_commit_value(data) == value


@pytest.mark.parametrize(("data", "value"), OFFSET_VALUE_VECTORS)
def test_offset_commit_value_encodes_to_the_same_bytes(
    data: bytes, value: OffsetAndMetadata
) -> None:
    version = struct.unpack(">h", data[:2])[0]
    if version == 1 and value.expire_timestamp_ms is None:
        # Re-encoding keeps "no expiry" as -1, the same bytes.
        assert encode_offset_commit_value(value, version=1) == data
    else:
        assert encode_offset_commit_value(value, version=version) == data


def test_offset_commit_value_v3_literal_bytes() -> None:
    # offset 42, leader epoch 5, metadata "meta", commit timestamp 1000 (checked against Kafka).
    expected = bytes.fromhex("0003000000000000002a0000000500046d65746100000000000003e8")
    assert encode_offset_commit_value(OffsetAndMetadata(42, 5, "meta", 1000)) == expected


def test_offset_commit_value_v4_skips_tagged_fields() -> None:
    # Kafka 4.1 writes the topic id as tagged field 0 (a 16-byte UUID) in v4.
    topic_id = bytes(15) + b"\x01"
    data = i16(4) + i64(42) + i32(5) + cs("meta") + i64(1000) + uv(1) + uv(0) + uv(16) + topic_id
    assert decode_offset_commit_value(data) == OffsetAndMetadata(42, 5, "meta", 1000)
    # Several unknown tags, one with a multi-byte size and tag number.
    big = b"z" * 200
    data = i16(4) + i64(1) + i32(0) + cs("") + i64(2) + uv(2) + uv(3) + uv(1) + b"a"
    data += uv(300) + uv(200) + big
    assert decode_offset_commit_value(data) == OffsetAndMetadata(1, 0, "", 2)


def test_offset_commit_value_v4_long_metadata_uses_multibyte_varint() -> None:
    meta = "x" * 200
    data = i16(4) + i64(1) + i32(0) + uv(201) + meta.encode() + i64(2) + NO_TAGS
    assert uv(201) == b"\xc9\x01"
    assert decode_offset_commit_value(data) == OffsetAndMetadata(1, 0, meta, 2)
    assert encode_offset_commit_value(OffsetAndMetadata(1, 0, meta, 2), version=4) == data


def test_kafka_writer_version_choice() -> None:
    plain = encode_offset_commit_value(OffsetAndMetadata(1, 3, "", 10))
    assert plain[:2] == i16(3)
    with_expiry = encode_offset_commit_value(OffsetAndMetadata(1, 3, "", 10, 20))
    # v1 has no leader epoch: Kafka drops it there too.
    assert with_expiry == i16(1) + i64(1) + s("") + i64(10) + i64(20)
    assert decode_offset_commit_value(with_expiry) == OffsetAndMetadata(1, -1, "", 10, 20)
    assert records.offset_commit_value_version(True) == 1
    assert records.offset_commit_value_version(False) == 3


@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_expire_timestamp_needs_v1(version: int) -> None:
    with pytest.raises(ValueError, match="expireTimestamp"):
        encode_offset_commit_value(OffsetAndMetadata(1, -1, "", 10, 20), version=version)


@pytest.mark.parametrize("version", [-1, 5, 100])
def test_encode_offset_commit_value_rejects_unknown_versions(version: int) -> None:
    with pytest.raises(ValueError, match="version"):
        encode_offset_commit_value(OffsetAndMetadata(1), version=version)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (OffsetAndMetadata(1 << 63), "offset"),
        (OffsetAndMetadata(1, leader_epoch=1 << 31), "leaderEpoch"),
        (OffsetAndMetadata(1, metadata="x" * 40_000), "metadata"),
        (OffsetAndMetadata(1, metadata=None), "metadata"),  # type: ignore[arg-type]
        (OffsetAndMetadata(1, metadata="\ud800"), "metadata"),
        (OffsetAndMetadata(1, commit_timestamp_ms=-(1 << 64)), "commitTimestamp"),
        (OffsetAndMetadata(1, expire_timestamp_ms=1 << 63), "expireTimestamp"),
        (OffsetAndMetadata(1.5), "offset"),  # type: ignore[arg-type]
    ],
)
def test_encode_offset_commit_value_names_bad_field(value: OffsetAndMetadata, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        encode_offset_commit_value(value)


def test_v4_rejects_metadata_over_int16_length() -> None:
    with pytest.raises(ValueError, match="metadata"):
        encode_offset_commit_value(OffsetAndMetadata(1, metadata="x" * 0x8000), version=4)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "version"),
        (i16(5) + i64(1) + i32(0) + cs("") + i64(2) + NO_TAGS, "unsupported version 5"),
        (i16(-1) + i64(1), "unsupported version -1"),
        (i16(3) + i64(1) + i32(0) + s("") + i64(2) + b"\x00", "trailing"),
        (i16(0) + i64(1) + s("") + i64(2) + i64(3), "trailing"),  # v1 layout labelled v0
        (i16(1) + i64(1) + s("") + i64(2), "expireTimestamp"),  # v0 layout labelled v1
        (i16(3) + i64(1) + s("") + i64(2), "OffsetCommitValue v3"),  # no leader epoch
        (i16(3) + i64(1) + i32(0) + i16(-1) + i64(2), "metadata"),  # null metadata
        (i16(3) + i64(1) + i32(0) + i16(-7) + i64(2), "metadata"),  # negative length
        (i16(3) + i64(1) + i32(0) + b"\x00\x01\xff" + i64(2), "metadata"),  # bad UTF-8
        (i16(4) + i64(1) + i32(0) + b"\x00" + i64(2) + NO_TAGS, "metadata"),  # compact null
        (i16(4) + i64(1) + i32(0) + cs("") + i64(2), "tagged"),  # tag section missing
        (i16(4) + i64(1) + i32(0) + cs("") + i64(2) + uv(1) + uv(0) + uv(5) + b"ab", "tagged"),
        (i16(4) + i64(1) + i32(0) + b"\xff\xff\xff\xff\xff\x01" + i64(2) + NO_TAGS, "varint"),
        (i16(4) + i64(1) + i32(0) + b"\xff\xff\xff\xff\x0f" + i64(2) + NO_TAGS, "int32"),
        (i16(4) + i64(1) + i32(0) + b"\x80", "metadata"),  # truncated varint
    ],
)
def test_bad_offset_commit_values(data: bytes, match: str) -> None:
    with pytest.raises(RecordFormatError, match=match):
        decode_offset_commit_value(data)


@pytest.mark.parametrize(("data", "value"), OFFSET_VALUE_VECTORS)
def test_every_truncation_of_an_offset_value_is_rejected(
    data: bytes, value: OffsetAndMetadata
) -> None:
    for cut in range(len(data)):
        with pytest.raises(RecordFormatError):
            decode_offset_commit_value(data[:cut])


# --- GroupMetadataValue -----------------------------------------------------------------------


def gm_member(version: int, instance: str | None = None) -> bytes:
    """Member m1: clientId "cid", clientHost "/10.0.0.1", rebalance 300000, session 45000."""
    if version >= 4:
        return (
            cs("m1")
            + cs(instance)
            + cs("cid")
            + cs("/10.0.0.1")
            + i32(300_000)
            + i32(45_000)
            + cb(SUB_TU)
            + cb(ASSIGNMENT)
            + NO_TAGS
        )
    out = s("m1")
    if version >= 3:
        out += s(instance)
    out += s("cid") + s("/10.0.0.1")
    if version >= 1:
        out += i32(300_000)
    return out + i32(45_000) + b32(SUB_TU) + b32(ASSIGNMENT)


def gm_value(version: int, members: list[bytes], protocol: str | None = "range") -> bytes:
    """protocolType "consumer", generation 5, leader "m1", currentStateTimestamp 1234 (v2+)."""
    if version >= 4:
        return (
            i16(4)
            + cs("consumer")
            + i32(5)
            + cs(protocol)
            + cs("m1")
            + i64(1234)
            + uv(len(members) + 1)
            + b"".join(members)
            + NO_TAGS
        )
    out = i16(version) + s("consumer") + i32(5) + s(protocol) + s("m1")
    if version >= 2:
        out += i64(1234)
    return out + i32(len(members)) + b"".join(members)


def expected_member(version: int, instance: str | None = None) -> MemberMetadata:
    return MemberMetadata(
        member_id="m1",
        group_instance_id=instance,
        client_id="cid",
        client_host="/10.0.0.1",
        # v0 has no rebalance timeout: Kafka's loader uses the session timeout.
        rebalance_timeout_ms=300_000 if version >= 1 else 45_000,
        session_timeout_ms=45_000,
        subscribed_topics=("t", "u"),
        assignment=ASSIGNMENT,
    )


def expected_group(
    version: int, members: tuple[MemberMetadata, ...], protocol: str | None = "range"
) -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=5,
        protocol=protocol,
        leader="m1",
        current_state_timestamp_ms=1234 if version >= 2 else -1,
        members=members,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_vectors(version: int) -> None:
    instance = "static-1" if version >= 3 else None
    data = gm_value(version, [gm_member(version, instance)])
    value = expected_group(version, (expected_member(version, instance),))
    assert decode_group_metadata_value(data) == value
    assert encode_group_metadata_value(value, version=version) == data


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_without_members_and_null_protocol(version: int) -> None:
    data = gm_value(version, [], protocol=None)
    value = expected_group(version, (), protocol=None)
    assert decode_group_metadata_value(data) == value
    assert encode_group_metadata_value(value, version=version) == data


@pytest.mark.parametrize("version", [0, 3, 4])
def test_null_and_empty_strings_are_distinct(version: int) -> None:
    empty = gm_value(version, [], protocol="")
    null = gm_value(version, [], protocol=None)
    assert empty != null
    assert decode_group_metadata_value(empty).protocol == ""
    assert decode_group_metadata_value(null).protocol is None


def test_group_metadata_value_v3_null_vs_empty_instance_id() -> None:
    null_member = decode_group_metadata_value(gm_value(3, [gm_member(3, None)])).members[0]
    assert null_member == expected_member(3, None)
    empty_member = decode_group_metadata_value(gm_value(3, [gm_member(3, "")])).members[0]
    assert empty_member.group_instance_id == ""


def test_group_metadata_value_default_writer_is_v3() -> None:
    value = expected_group(3, (expected_member(3, "i"),))
    assert encode_group_metadata_value(value)[:2] == i16(3)
    assert encode_group_metadata_value(value) == gm_value(3, [gm_member(3, "i")])


def test_group_metadata_value_v4_skips_member_and_value_tagged_fields() -> None:
    member = gm_member(4)[:-1] + uv(2) + uv(0) + uv(2) + b"hi" + uv(7) + uv(0)
    data = gm_value(4, [member, gm_member(4)])[:-1] + uv(1) + uv(1) + uv(3) + b"abc"
    value = decode_group_metadata_value(data)
    assert value == expected_group(4, (expected_member(4), expected_member(4)))


def test_member_subscription_decoding() -> None:
    base = gm_member(1)
    sub_at = base.index(b32(SUB_TU))

    def with_subscription(sub: bytes) -> bytes:
        member = base[:sub_at] + b32(sub) + base[sub_at + len(b32(SUB_TU)) :]
        return gm_value(1, [member])

    # Later subscription versions carry more fields after the topics; topics still decode.
    member = decode_group_metadata_value(with_subscription(SUB_V1_TU)).members[0]
    assert member.subscribed_topics == ("t", "u")
    # Undecodable subscriptions (another protocol's metadata, truncation, nothing) give ().
    for sub in (b"", b"\x00", i16(0) + i32(5) + s("t"), i16(-1) + i32(0), b"\xff" * 7):
        member = decode_group_metadata_value(with_subscription(sub)).members[0]
        assert member.subscribed_topics == ()
        assert member.session_timeout_ms == 45_000


def test_subscription_is_encoded_as_consumer_protocol_v0() -> None:
    value = GroupMetadataValue(
        members=(MemberMetadata("m", subscribed_topics=("a", "bb")),), generation=1
    )
    data = encode_group_metadata_value(value)
    sub = i16(0) + i32(2) + s("a") + s("bb") + i32(-1)
    assert b32(sub) in data
    empty = encode_group_metadata_value(GroupMetadataValue(members=(MemberMetadata("m"),)))
    assert b32(i16(0) + i32(0) + i32(-1)) in empty


@pytest.mark.parametrize(
    ("value", "version", "field"),
    [
        (GroupMetadataValue(current_state_timestamp_ms=5), 1, "currentStateTimestamp"),
        (GroupMetadataValue(members=(MemberMetadata("m", "inst"),)), 2, "groupInstanceId"),
        (GroupMetadataValue(members=(MemberMetadata("m"),)), 0, "rebalanceTimeout"),
        (GroupMetadataValue(generation=1 << 31), 3, "generation"),
        (GroupMetadataValue(protocol_type=None), 3, "protocolType"),  # type: ignore[arg-type]
        (GroupMetadataValue(leader="x" * 40_000), 3, "leader"),
        (GroupMetadataValue(leader="x" * 40_000), 4, "leader"),
        (GroupMetadataValue(members=(MemberMetadata(None),)), 3, "memberId"),  # type: ignore[arg-type]
        (GroupMetadataValue(members=(MemberMetadata("m", client_id=3),)), 3, "clientId"),  # type: ignore[arg-type]
        (
            GroupMetadataValue(members=(MemberMetadata("m", session_timeout_ms=True),)),  # type: ignore[arg-type]
            3,
            "sessionTimeout",
        ),
        (
            GroupMetadataValue(members=(MemberMetadata("m", subscribed_topics=("t", None)),)),  # type: ignore[arg-type]
            3,
            r"subscription topics\[1\]",
        ),
        (GroupMetadataValue(members=(MemberMetadata("m", assignment="x"),)), 3, "assignment"),  # type: ignore[arg-type]
        (GroupMetadataValue(), 5, "version"),
    ],
)
def test_encode_group_metadata_value_names_bad_field(
    value: GroupMetadataValue, version: int, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        encode_group_metadata_value(value, version=version)


def test_v0_holds_rebalance_timeout_equal_to_session_timeout() -> None:
    member = MemberMetadata("m", rebalance_timeout_ms=10, session_timeout_ms=10)
    value = GroupMetadataValue(members=(member,))
    assert decode_group_metadata_value(encode_group_metadata_value(value, version=0)) == value


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (i16(5) + cs("consumer"), "unsupported version 5"),
        (gm_value(3, [gm_member(3)]) + b"\x00", "trailing"),
        (gm_value(3, [])[:-4] + i32(-1), "members"),  # null array
        (gm_value(3, [])[:-4] + i32(-2), "members"),
        (gm_value(3, [])[:-4] + i32(1_000_000), "members"),  # count beyond the data
        (gm_value(3, [])[:-4] + i32(1), "members"),
        (i16(3) + i16(-1) + i32(5), "protocolType"),  # non-nullable string is null
        (i16(3) + s("consumer") + i32(5) + i16(-2), "protocol"),  # only -1 means null
        (gm_value(4, [])[:-2] + b"\x00" + NO_TAGS, "members"),  # compact null array
        (gm_value(4, [gm_member(4)])[:-1], "tagged"),
    ],
)
def test_bad_group_metadata_values(data: bytes, match: str) -> None:
    with pytest.raises(RecordFormatError, match=match):
        decode_group_metadata_value(data)


def test_negative_member_bytes_length() -> None:
    member = s("m1") + s("c") + s("h") + i32(1) + i32(2) + i32(-1) + b32(b"")
    with pytest.raises(RecordFormatError, match=r"members\[0\]\.subscription"):
        decode_group_metadata_value(gm_value(1, [member]))
    member = s("m1") + s("c") + s("h") + i32(1) + i32(2) + b32(b"") + i32(-9)
    with pytest.raises(RecordFormatError, match=r"members\[0\]\.assignment"):
        decode_group_metadata_value(gm_value(1, [member]))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_truncation_of_a_group_value_is_rejected(version: int) -> None:
    data = gm_value(version, [gm_member(version), gm_member(version)])
    for cut in range(len(data)):
        with pytest.raises(RecordFormatError):
            decode_group_metadata_value(data[:cut])


# --- records ----------------------------------------------------------------------------------


def test_decode_record_kinds() -> None:
    key = i16(1) + s("g") + s("t") + i32(0)
    value = i16(3) + i64(9) + i32(1) + s("") + i64(2)
    assert decode_record(key, value) == Record(
        OffsetCommitKey("g", "t", 0), OffsetAndMetadata(9, 1, "", 2)
    )
    assert decode_record(key, None) == Record(OffsetCommitKey("g", "t", 0), None)
    gkey = i16(2) + s("g")
    assert decode_record(gkey, None) == Record(GroupMetadataKey("g"), None)
    gvalue = gm_value(3, [])
    assert decode_record(gkey, gvalue) == Record(GroupMetadataKey("g"), expected_group(3, ()))
    # Unknown record types keep their key bytes and no value, whatever the value holds.
    assert decode_record(i16(5) + b"xyz", b"\x00\x01junk") == Record(UnknownKey(5, b"xyz"), None)


def test_decode_record_rejects_empty_value() -> None:
    # A tombstone is a null value; zero bytes are a corrupt value.
    with pytest.raises(RecordFormatError):
        decode_record(i16(2) + s("g"), b"")


@pytest.mark.parametrize(
    "record",
    [
        Record(OffsetCommitKey("g", "t", 1), OffsetAndMetadata(5, 2, "m", 10)),
        Record(OffsetCommitKey("g", "t", 1), OffsetAndMetadata(5, -1, "m", 10, 20)),
        Record(OffsetCommitKey("g", "t", 1), None),
        Record(GroupMetadataKey("g"), expected_group(3, (expected_member(3, "i"),))),
        Record(GroupMetadataKey("g"), None),
        Record(UnknownKey(9, b"\x01\x02"), None),
    ],
)
def test_encode_record_round_trip(record: Record) -> None:
    key, value = encode_record(record)
    assert decode_record(key, value) == record


def test_encode_record_versions() -> None:
    key, value = encode_record(Record(OffsetCommitKey("g", "t", 1), OffsetAndMetadata(5)))
    assert key[:2] == i16(1)
    assert value is not None and value[:2] == i16(3)
    key, value = encode_record(Record(GroupMetadataKey("g"), GroupMetadataValue()))
    assert key == i16(2) + s("g")
    assert value is not None and value[:2] == i16(3)
    assert encode_record(Record(UnknownKey(9, b"ab"), None)) == (i16(9) + b"ab", None)


@pytest.mark.parametrize(
    "record",
    [
        Record(OffsetCommitKey("g", "t", 1), GroupMetadataValue()),
        Record(GroupMetadataKey("g"), OffsetAndMetadata(1)),
        Record(UnknownKey(9, b""), OffsetAndMetadata(1)),
        Record(UnknownKey(1, b""), None),  # 1 is a known key version
        Record(("g", "t"), None),  # type: ignore[arg-type]
    ],
)
def test_encode_record_rejects_mismatches(record: Record) -> None:
    with pytest.raises(ValueError):
        encode_record(record)


# --- encoders: argument checks and batches ----------------------------------------------------


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("g" * 40_000, "t", 0), "group"),
        (("g", "t" * 32_768, 0), "topic"),
        (("g", "t", 1 << 31), "partition"),
        (("g", "t", "0"), "partition"),
        ((None, "t", 0), "group"),
        (("g", b"t", 0), "topic"),
    ],
)
def test_encode_offset_commit_key_names_bad_field(args: tuple, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        encode_offset_commit_key(*args)
    with pytest.raises(ValueError, match=rf"item 1: .*{field}"):
        encode_offset_commit_keys(["g", args[0]], ["t", args[1]], [0, args[2]])


def test_encode_offset_commit_key_max_length_string_is_accepted() -> None:
    group = "g" * 0x7FFF
    assert decode_key(encode_offset_commit_key(group, "t", 0)).group == group


def test_encode_offset_commit_key_rejects_other_versions() -> None:
    with pytest.raises(ValueError, match="version"):
        encode_offset_commit_key("g", "t", 0, version=2)


def test_batch_keys_equal_single_keys() -> None:
    groups = ["g1", "g2", "g1", "é", "g1"]
    topics = ["t", "t", "u", "t", "t"]
    partitions = [0, 1, 2, -1, 0]
    assert encode_offset_commit_keys(groups, topics, partitions) == [
        encode_offset_commit_key(g, t, p)
        for g, t, p in zip(groups, topics, partitions, strict=True)
    ]
    assert encode_offset_commit_keys([], [], []) == []
    with pytest.raises(ValueError, match="length"):
        encode_offset_commit_keys(["g"], [], [0])


def test_batch_values_equal_single_values() -> None:
    offsets = [1, None, 3, 4]
    epochs = [5, 0, -1, 7]
    metas = ["", None, "m", ""]
    commits = [10, 0, 30, 40]
    expires = [None, None, 99, None]
    out = encode_offset_commit_values(offsets, epochs, metas, commits, expires)
    assert out == [
        encode_offset_commit_value(OffsetAndMetadata(1, 5, "", 10)),
        None,  # tombstone
        encode_offset_commit_value(OffsetAndMetadata(3, -1, "m", 30, 99)),
        encode_offset_commit_value(OffsetAndMetadata(4, 7, "", 40)),
    ]
    assert out[2] is not None and out[2][:2] == i16(1)
    with pytest.raises(ValueError, match="length"):
        encode_offset_commit_values([1], [], [""], [0], [None])


@pytest.mark.parametrize(
    ("column", "bad", "field"),
    [
        (0, 1 << 63, "offset"),
        (1, 1 << 31, "leaderEpoch"),
        (2, None, "metadata"),
        (2, "x" * 40_000, "metadata"),
        (3, "now", "commitTimestamp"),
        (4, 1.5, "expireTimestamp"),
    ],
)
def test_batch_values_name_item_and_field(column: int, bad: object, field: str) -> None:
    columns: list[list[object]] = [[1, 2], [0, 0], ["", ""], [5, 5], [None, None]]
    columns[column][1] = bad
    with pytest.raises(ValueError, match=rf"item 1: .*{field}"):
        encode_offset_commit_values(*columns)  # type: ignore[arg-type]


def test_batch_values_reject_out_of_range_epoch_with_expiry() -> None:
    with pytest.raises(ValueError, match="leaderEpoch"):
        encode_offset_commit_values([1], [1 << 40], [""], [0], [5])


# --- properties -------------------------------------------------------------------------------

int32s = st.integers(-(1 << 31), (1 << 31) - 1)
int64s = st.integers(-(1 << 63), (1 << 63) - 1)
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)

offset_values = st.builds(
    OffsetAndMetadata,
    offset=int64s,
    leader_epoch=int32s,
    metadata=texts,
    commit_timestamp_ms=int64s,
    expire_timestamp_ms=st.none() | int64s.filter(lambda x: x != -1),
)


@given(offset_values, st.sampled_from([None, 0, 1, 2, 3, 4]))
def test_offset_value_round_trip(value: OffsetAndMetadata, version: int | None) -> None:
    if value.expire_timestamp_ms is not None and version not in (None, 1):
        with pytest.raises(ValueError, match="expireTimestamp"):
            encode_offset_commit_value(value, version=version)
        return
    decoded = decode_offset_commit_value(encode_offset_commit_value(value, version=version))
    if version is None:
        version = 3 if value.expire_timestamp_ms is None else 1
    expected = (
        value
        if version >= 3
        else OffsetAndMetadata(
            value.offset, -1, value.metadata, value.commit_timestamp_ms, value.expire_timestamp_ms
        )
    )
    assert decoded == expected


members = st.builds(
    MemberMetadata,
    member_id=texts,
    group_instance_id=st.none() | texts,
    client_id=texts,
    client_host=texts,
    rebalance_timeout_ms=int32s,
    session_timeout_ms=int32s,
    subscribed_topics=st.lists(texts, max_size=3).map(tuple),
    assignment=st.binary(max_size=10),
)
group_values = st.builds(
    GroupMetadataValue,
    protocol_type=texts,
    generation=int32s,
    protocol=st.none() | texts,
    leader=st.none() | texts,
    current_state_timestamp_ms=int64s,
    members=st.lists(members, max_size=3).map(tuple),
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(group_values)
def test_group_value_round_trip_v3_v4(value: GroupMetadataValue) -> None:
    for version in (3, 4):
        assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


@given(group_values, st.sampled_from([0, 1, 2]))
def test_group_value_old_versions_round_trip_or_name_the_field(
    value: GroupMetadataValue, version: int
) -> None:
    try:
        data = encode_group_metadata_value(value, version)
    except ValueError as e:
        assert any(
            f in str(e) for f in ("currentStateTimestamp", "groupInstanceId", "rebalanceTimeout")
        )
        return
    assert decode_group_metadata_value(data) == value


def _mutations(data: bytes) -> st.SearchStrategy[bytes]:
    positions = st.integers(0, max(len(data) - 1, 0))
    return st.one_of(
        positions.map(lambda i: data[:i]),
        st.tuples(positions, st.integers(0, 255)).map(
            lambda t: data[: t[0]] + bytes([t[1]]) + data[t[0] + 1 :]
        ),
        st.tuples(positions, st.binary(min_size=1, max_size=4)).map(
            lambda t: data[: t[0]] + t[1] + data[t[0] :]
        ),
    )


SAMPLES = [gm_value(v, [gm_member(v, "i" if v >= 3 else None), gm_member(v)]) for v in range(5)] + [
    data for data, _ in OFFSET_VALUE_VECTORS
]


@given(st.one_of(st.binary(max_size=64), st.sampled_from(SAMPLES).flatmap(_mutations)))
def test_decoders_raise_only_record_format_error(data: bytes) -> None:
    # Any other exception type fails the test.
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        with contextlib.suppress(RecordFormatError):
            decode(data)
    for key in (i16(1) + s("g") + s("t") + i32(0), i16(2) + s("g"), data):
        with contextlib.suppress(RecordFormatError):
            decode_record(key, data)


# --- cross-check against Kafka's generated classes --------------------------------------------

KAFKA_JARS = Path(__file__).resolve().parents[3] / ".runtime" / "jars" / "kafka"

KAFKA_HARNESS = r"""
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.group.generated.*;

/** Reads "<type> <version> <json>" lines; prints the bytes Kafka's generated classes write. */
public class KafkaRecords {
    public static void main(String[] args) throws Exception {
        ObjectMapper om = new ObjectMapper();
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(args[0]))) {
            String[] p = line.split(" ", 3);
            short v = Short.parseShort(p[1]);
            JsonNode n = om.readTree(p[2]);
            byte[] b;
            switch (p[0]) {
                case "LegacyOffsetCommitKey":
                    b = MessageUtil.toCoordinatorTypePrefixedBytes(
                        LegacyOffsetCommitKeyJsonConverter.read(n, v));
                    break;
                case "OffsetCommitKey":
                    b = MessageUtil.toCoordinatorTypePrefixedBytes(
                        OffsetCommitKeyJsonConverter.read(n, v));
                    break;
                case "GroupMetadataKey":
                    b = MessageUtil.toCoordinatorTypePrefixedBytes(
                        GroupMetadataKeyJsonConverter.read(n, v));
                    break;
                case "OffsetCommitValue":
                    b = MessageUtil.toVersionPrefixedBytes(
                        v, OffsetCommitValueJsonConverter.read(n, v));
                    break;
                case "GroupMetadataValue":
                    for (JsonNode m : n.get("members")) {
                        // The consumer's own serializer builds the subscription.
                        List<String> topics = new ArrayList<>();
                        m.get("subscribedTopics").forEach(t -> topics.add(t.asText()));
                        short sv = (short) m.get("subscriptionVersion").asInt();
                        List<TopicPartition> owned = new ArrayList<>();
                        for (String t : topics) owned.add(new TopicPartition(t, 0));
                        Subscription sub = sv == 0 ? new Subscription(topics)
                            : new Subscription(topics, null, owned, 7, Optional.of("rack"));
                        ByteBuffer buf = ConsumerProtocol.serializeSubscription(sub, sv);
                        byte[] raw = new byte[buf.remaining()];
                        buf.get(raw);
                        ((ObjectNode) m).put(
                            "subscription", Base64.getEncoder().encodeToString(raw));
                    }
                    b = MessageUtil.toVersionPrefixedBytes(
                        v, GroupMetadataValueJsonConverter.read(n, v));
                    break;
                default:
                    throw new IllegalArgumentException(p[0]);
            }
            StringBuilder hex = new StringBuilder();
            for (byte x : b) hex.append(String.format("%02x", x));
            out.append(hex).append('\n');
        }
        System.out.print(out);
    }
}
"""


def _kafka_offset_json(v: OffsetAndMetadata) -> dict[str, object]:
    return {
        "offset": v.offset,
        "leaderEpoch": v.leader_epoch,
        "metadata": v.metadata,
        "commitTimestamp": v.commit_timestamp_ms,
        "expireTimestamp": -1 if v.expire_timestamp_ms is None else v.expire_timestamp_ms,
    }


def _kafka_group_json(v: GroupMetadataValue, subscription_version: int) -> dict[str, object]:
    return {
        "protocolType": v.protocol_type,
        "generation": v.generation,
        "protocol": v.protocol,
        "leader": v.leader,
        "currentStateTimestamp": v.current_state_timestamp_ms,
        "members": [
            {
                "memberId": m.member_id,
                "groupInstanceId": m.group_instance_id,
                "clientId": m.client_id,
                "clientHost": m.client_host,
                "rebalanceTimeout": m.rebalance_timeout_ms,
                "sessionTimeout": m.session_timeout_ms,
                "subscribedTopics": list(m.subscribed_topics),
                "subscriptionVersion": subscription_version,
                "assignment": base64.b64encode(m.assignment).decode(),
            }
            for m in v.members
        ],
    }


# Starting a JVM takes seconds: kept out of the fast unit-test run, still run in CI.
@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("javac") is None
    or not (KAFKA_JARS / "kafka-group-coordinator-4.1.1.jar").exists(),
    reason="needs a JDK and Kafka's jars (resolved by the project's setup into .runtime/jars)",
)
def test_matches_kafka_generated_classes(tmp_path: Path) -> None:
    long_meta = "é" * 100  # 200 bytes: multi-byte compact length
    offsets = [
        (0, OffsetAndMetadata(42, -1, "", 1000)),
        (1, OffsetAndMetadata(42, -1, "m", 1000, 2000)),
        (1, OffsetAndMetadata(42, -1, "m", 1000)),
        (2, OffsetAndMetadata(-1, -1, long_meta, -1)),
        (3, OffsetAndMetadata(1 << 62, 7, "😀meta", 1_700_000_000_000)),
        (4, OffsetAndMetadata(1 << 62, 7, "😀meta", 1_700_000_000_000)),
        (4, OffsetAndMetadata(3, -1, long_meta, 5)),
    ]
    member = MemberMetadata("m1", "inst", "cid", "/1.2.3.4", 300_000, 45_000, ("t", "ü"), b"\x01")
    groups = []
    for version in range(5):
        m = member
        if version < 3:
            m = MemberMetadata("m1", None, "cid", "host", 45_000, 45_000, ("t",), b"")
        ts = 1234 if version >= 2 else -1
        groups.append((version, GroupMetadataValue("consumer", 9, "range", "m1", ts, (m, m))))
        groups.append((version, GroupMetadataValue("", 0, None, None, ts, ())))
    groups.append((4, GroupMetadataValue("consumer", 1, "r", "m1", 5, (member,) * 3)))

    lines = [
        'OffsetCommitKey 0 {"group":"g😀","topic":"t","partition":3}',
        'LegacyOffsetCommitKey 0 {"group":"g","topic":"","partition":-1}',
        'GroupMetadataKey 0 {"group":"grüppe"}',
    ]
    expected = [
        encode_offset_commit_key("g😀", "t", 3),
        encode_offset_commit_key("g", "", -1, version=0),
        encode_group_metadata_key("grüppe"),
    ]
    for version, ov in offsets:
        lines.append(f"OffsetCommitValue {version} {json.dumps(_kafka_offset_json(ov))}")
        expected.append(encode_offset_commit_value(ov, version=version))
    for version, gv in groups:
        lines.append(f"GroupMetadataValue {version} {json.dumps(_kafka_group_json(gv, 0))}")
        expected.append(encode_group_metadata_value(gv, version=version))
    # Decode-only: a v4 offset with Kafka 4.1's topicId tag; members with v3 subscriptions.
    topic_id_json = dict(_kafka_offset_json(OffsetAndMetadata(5, 1, "x", 6)))
    topic_id_json["topicId"] = "AAAAAAAAAAAAAAAAAAAAAQ"
    lines.append(f"OffsetCommitValue 4 {json.dumps(topic_id_json)}")
    lines.append(f"GroupMetadataValue 3 {json.dumps(_kafka_group_json(groups[6][1], 3))}")

    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "KafkaRecords.java").write_text(KAFKA_HARNESS, encoding="utf-8")
    classpath = f"{KAFKA_JARS}/*"
    subprocess.run(
        ["javac", "-cp", classpath, "KafkaRecords.java"], cwd=tmp_path, check=True, timeout=120
    )
    result = subprocess.run(
        ["java", "-cp", f"{classpath}:{tmp_path}", "KafkaRecords", str(tmp_path / "in.txt")],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    kafka = [bytes.fromhex(x) for x in result.stdout.split()]
    assert len(kafka) == len(expected) + 2
    for i, (ours, theirs) in enumerate(zip(expected, kafka, strict=False)):
        assert ours == theirs, lines[i]
    assert decode_offset_commit_value(kafka[-2]) == OffsetAndMetadata(5, 1, "x", 6)
    assert decode_group_metadata_value(kafka[-1]) == groups[6][1]
