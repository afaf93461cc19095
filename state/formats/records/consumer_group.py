"""The two consumer-protocol (KIP-848) group records a reader of ``__consumer_offsets`` needs to
list a group as Kafka's ``ListGroups``/``DescribeGroups`` would: its epoch and its members.

- ``ConsumerGroupMetadata`` (type 3): key ``GroupId``; value v0 ``Epoch`` (int32), then tagged
  fields (``MetadataHash`` in 4.1). The group epoch plays the classic generation's part; a
  tombstone means the group was deleted.
- ``ConsumerGroupMemberMetadata`` (type 5): key ``GroupId``, ``MemberId``; one record per member
  (the value's client id, host, subscriptions… are not needed here); a tombstone means the member
  left.

Layouts from Kafka 4.1.1's generated ``ConsumerGroupMetadataValue`` and
``ConsumerGroupMemberMetadataKey`` (keys are non-flexible, values flexible).
"""

from __future__ import annotations

from state.formats.records.wire import Reader, read_version

#: Record type ids (Kafka's ``CoordinatorRecordType``).
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_MEMBER_METADATA = 5


def decode_consumer_group_epoch(value: bytes) -> int:
    """The group epoch of a ``ConsumerGroupMetadataValue`` (any version: ``Epoch`` is its first
    field in all of them). Raises ``RecordFormatError``."""
    buf, version = read_version(value, "ConsumerGroupMetadataValue")
    reader = Reader(buf, 2, f"ConsumerGroupMetadataValue v{version}")
    if version < 0:
        reader.fail("version", f"negative ({version})")
    return reader.int32("epoch")


def decode_consumer_group_member_key(key: bytes) -> tuple[str, str]:
    """``(group_id, member_id)`` of a ``ConsumerGroupMemberMetadataKey`` (type 5). Raises
    ``RecordFormatError`` for another type or broken bytes."""
    buf, type_id = read_version(key, "ConsumerGroupMemberMetadataKey")
    reader = Reader(buf, 2, "ConsumerGroupMemberMetadataKey")
    if type_id != CONSUMER_GROUP_MEMBER_METADATA:
        reader.fail("type", f"expected {CONSUMER_GROUP_MEMBER_METADATA}, got {type_id}")
    group_id = reader.string("group_id")
    member_id = reader.string("member_id")
    reader.finish()
    return group_id, member_id
