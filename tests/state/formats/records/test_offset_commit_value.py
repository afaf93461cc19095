"""OffsetCommitValue v0-v4: vectors, version choice, field checks, batches, round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from state.coordinator.model import OffsetAndMetadata
from state.formats.records import RecordFormatError, decode_offset_commit_value
from tests.state.formats.records.offset_encoders import (
    encode_offset_commit_value,
    offset_commit_value_version,
)
from tests.state.formats.records.vectors import (
    NO_TAGS,
    OFFSET_VALUE_VECTORS,
    cs,
    i16,
    i32,
    i64,
    int32s,
    int64s,
    s,
    texts,
    uv,
)


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
    assert offset_commit_value_version(True) == 1
    assert offset_commit_value_version(False) == 3


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


# --- properties -------------------------------------------------------------------------------


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
