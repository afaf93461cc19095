"""The consumer-protocol (KIP-848) records that list a group as ``DescribeGroups`` would (Kafka
4.1.1's layouts): ``ConsumerGroupMetadata`` (type 3; value starts with the int32 ``Epoch``) and
``ConsumerGroupMemberMetadata`` (type 5; key ``GroupId``, ``MemberId``). Tombstones delete.
"""

from __future__ import annotations

from state.formats.records.wire import Reader, read_version

#: Record type ids (Kafka's ``CoordinatorRecordType``).
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_MEMBER_METADATA = 5


def decode_consumer_group_epoch(value: bytes) -> int:
    """The group epoch of a ``ConsumerGroupMetadataValue`` of any version."""
    buf, version = read_version(value, "ConsumerGroupMetadataValue")
    reader = Reader(buf, 2, f"ConsumerGroupMetadataValue v{version}")
    if version < 0:
        reader.fail("version", f"negative ({version})")
    return reader.int32("epoch")


def decode_consumer_group_member_key(key: bytes) -> tuple[str, str]:
    """``(group_id, member_id)`` of a ``ConsumerGroupMemberMetadataKey``."""
    buf, type_id = read_version(key, "ConsumerGroupMemberMetadataKey")
    reader = Reader(buf, 2, "ConsumerGroupMemberMetadataKey")
    if type_id != CONSUMER_GROUP_MEMBER_METADATA:
        reader.fail("type", f"expected {CONSUMER_GROUP_MEMBER_METADATA}, got {type_id}")
    group_id = reader.string("group_id")
    member_id = reader.string("member_id")
    reader.finish()
    return group_id, member_id
