"""Every record type a Kafka 4.1.1 broker writes to ``__consumer_offsets`` (its
``CoordinatorRecordType``), by the key's int16 type id. Types past the classic 0-2 are classified
by type and group id (every key starts with it), never an error. Ids 9 and 18 are retired.
"""

from __future__ import annotations

from typing import NamedTuple

from state.formats.records.wire import INT16, RecordFormatError

#: Record type id → Kafka's name for it.
RECORD_TYPES: dict[int, str] = {
    0: "LegacyOffsetCommit",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}


class RecordType(NamedTuple):
    """A record's type id, Kafka's name for it and its group (None if the key holds none)."""

    type_id: int
    name: str
    group_id: str | None


def record_type_name(type_id: int) -> str:
    """Kafka's name for record type ``type_id``, or ``Unknown(type_id)``."""
    return RECORD_TYPES.get(type_id, f"Unknown({type_id})")


def classify_key(key: bytes) -> RecordType:
    """The type and group of a record key; ``RecordFormatError`` only under two bytes."""
    if len(key) < 2:
        raise RecordFormatError(f"record key: {len(key)} byte(s), no type id")
    (type_id,) = INT16.unpack_from(key, 0)
    group_id = None
    if len(key) >= 4:
        (length,) = INT16.unpack_from(key, 2)
        if 0 <= length <= len(key) - 4:
            try:
                group_id = bytes(key[4 : 4 + length]).decode("utf-8")
            except UnicodeDecodeError:
                group_id = None
    return RecordType(type_id, record_type_name(type_id), group_id)
