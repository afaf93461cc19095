"""Record keys: OffsetCommitKey (versions 0, 1), GroupMetadataKey (2) and unknown key versions."""

from __future__ import annotations

import pytest

from state.coordinator.model import GroupMetadataKey, OffsetCommitKey, UnknownKey
from state.formats.records import (
    RecordFormatError,
    decode_key,
    encode_group_metadata_key,
)
from tests.state.formats.records.offset_encoders import encode_offset_commit_key
from tests.state.formats.records.vectors import i16, i32, s


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


# --- encoders: argument checks ----------------------------------------------------


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


def test_encode_offset_commit_key_max_length_string_is_accepted() -> None:
    group = "g" * 0x7FFF
    assert decode_key(encode_offset_commit_key(group, "t", 0)).group == group


def test_encode_offset_commit_key_rejects_other_versions() -> None:
    with pytest.raises(ValueError, match="version"):
        encode_offset_commit_key("g", "t", 0, version=2)
