"""Whole records (decode_record/encode_record), and decoders that fail only with
RecordFormatError whatever the bytes."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
    UnknownKey,
)
from state.formats.records import (
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_record,
)
from tests.state.formats.records.offset_encoders import encode_record
from tests.state.formats.records.vectors import (
    OFFSET_VALUE_VECTORS,
    expected_group,
    expected_member,
    gm_member,
    gm_value,
    i16,
    i32,
    i64,
    s,
)


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
