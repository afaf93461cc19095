"""Consumer-protocol (KIP-848) group records read the way the mirror reads them: epochs as group
rows in log order, members as changes, broken records reported and skipped."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from state.engine.consumer_groups import consumer_group_records
from state.formats.records import RecordFormatError
from state.formats.records.consumer_group import (
    decode_consumer_group_epoch,
    decode_consumer_group_member_key,
)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def group_key(group: str) -> bytes:
    return struct.pack(">h", 3) + _string(group)


def epoch_value(epoch: int, version: int = 0) -> bytes:
    # Epoch, then an empty tagged-field section (Kafka 4.1 adds MetadataHash as a tag).
    return struct.pack(">hi", version, epoch) + b"\x00"


def member_key(group: str, member: str) -> bytes:
    return struct.pack(">h", 5) + _string(group) + _string(member)


def test_epoch_and_member_key_decode() -> None:
    assert decode_consumer_group_epoch(epoch_value(7)) == 7
    assert decode_consumer_group_epoch(epoch_value(-1, version=1)) == -1
    assert decode_consumer_group_member_key(member_key("g", "m-1")) == ("g", "m-1")
    with pytest.raises(RecordFormatError, match="epoch: truncated"):
        decode_consumer_group_epoch(b"\x00\x00\x00")
    with pytest.raises(RecordFormatError, match="type: expected 5, got 3"):
        decode_consumer_group_member_key(group_key("g"))
    with pytest.raises(RecordFormatError, match="trailing"):
        decode_consumer_group_member_key(member_key("g", "m") + b"x")


def test_records_in_log_order_with_tombstones_and_broken_ones_reported() -> None:
    offset_commit_key = struct.pack(">h", 1) + _string("g") + _string("t") + struct.pack(">i", 0)
    keys = pa.array(
        [
            group_key("g"),
            member_key("g", "m-1"),
            offset_commit_key,  # another type: left out
            member_key("g", "m-2"),
            member_key("g", "m-1"),
            group_key("g"),
            group_key("h"),
            b"\x00\x05\x00",  # a broken member key
        ],
        pa.binary(),
    )
    values = pa.array(
        [epoch_value(1), b"v", b"v", b"v", None, epoch_value(2), None, b"v"], pa.binary()
    )
    broken: list[RecordFormatError] = []

    read = consumer_group_records(keys, values, broken.append)

    assert read.groups.select(["group_id", "generation", "members"]).to_pylist() == [
        {"group_id": "g", "generation": 1, "members": None},
        {"group_id": "g", "generation": 2, "members": None},
        {"group_id": "h", "generation": None, "members": None},
    ]
    assert read.groups["value"].is_null().to_pylist() == [False, False, True]  # h deleted
    assert read.positions.tolist() == [0, 5, 6]
    assert read.members.to_pylist() == [
        {"group_id": "g", "member_id": "m-1", "alive": True},
        {"group_id": "g", "member_id": "m-2", "alive": True},
        {"group_id": "g", "member_id": "m-1", "alive": False},
    ]
    assert read.readable == 6
    assert len(broken) == 1 and "ConsumerGroupMemberMetadataKey" in str(broken[0])
