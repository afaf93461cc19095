"""Every record type a Kafka 4.1 broker writes to ``__consumer_offsets``, by its key's type id.

A record key starts with an int16 type id (Kafka's ``CoordinatorRecordType``; before KIP-848 it
was called the key version). This project decodes the classic types (0-2); the others — the
consumer-protocol (KIP-848), share-group (KIP-932) and streams-group (KIP-1071) records — are
classified by their type and group id and counted, never an error. Every one of their keys is
a non-flexible struct whose first field is the group id. Ids 9 and 18 are retired.

Table from Kafka 4.1.1's generated ``CoordinatorRecordType``.
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
    """A record's type id, Kafka's name for it (``"Unknown(N)"`` for an id Kafka 4.1 does not
    write) and the group it belongs to (None when the key is too short to hold one)."""

    type_id: int
    name: str
    group_id: str | None


def record_type_name(type_id: int) -> str:
    """Kafka's name for record type ``type_id``, or ``Unknown(type_id)``."""
    return RECORD_TYPES.get(type_id, f"Unknown({type_id})")


def classify_key(key: bytes) -> RecordType:
    """The type and group of a record key of any type. Raises ``RecordFormatError`` only for a
    key without a type id (shorter than two bytes)."""
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
