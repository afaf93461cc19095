"""Expected bytes built by hand, field by field, from the schemas in apache/kafka
``group-coordinator/src/main/resources/common/message`` (see the tables in the modules of
``state.formats.records``), never with the module under test; and the decoded values they hold."""

from __future__ import annotations

import struct

from hypothesis import strategies as st

from state.coordinator.model import GroupMetadataValue, MemberMetadata, OffsetAndMetadata

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


# A ConsumerProtocolSubscription v0 for topics ["t", "u"]: version, topic array, null userData.
SUB_TU = i16(0) + i32(2) + s("t") + s("u") + i32(-1)
# Version 1 of the same with ownedPartitions [t: [0, 1]] after userData (real clients send v1+).
SUB_V1_TU = i16(1) + i32(2) + s("t") + s("u") + i32(-1) + i32(1) + s("t") + i32(2) + i32(0) + i32(1)
ASSIGNMENT = b"\x00\x01\x02"


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


# Hypothesis strategies for the fields' Kafka types.
int32s = st.integers(-(1 << 31), (1 << 31) - 1)
int64s = st.integers(-(1 << 63), (1 << 63) - 1)
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
