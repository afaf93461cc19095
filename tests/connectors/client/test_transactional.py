"""Reading a consumer's group metadata for a TxnOffsetCommit (no broker: confluent-kafka builds
it locally until the consumer joins). The committer itself runs against a real job and Kafka's
coordinator in ``tests/conformance/test_transactional.py``."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import Consumer

from connectors.client.transactional import GroupMetadata, group_metadata


def _metadata_of(**config: str) -> bytes:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9", "log_level": 0, **config})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"group.id": "orders"}, GroupMetadata("orders")),
        (
            {"group.id": "ørders ☃", "group.instance.id": "i-1"},
            GroupMetadata("ørders ☃", -1, "", "i-1"),
        ),
    ],
)
def test_confluent_kafkas_group_metadata_is_read(
    config: dict[str, str], expected: GroupMetadata
) -> None:
    assert group_metadata(_metadata_of(**config)) == expected


def test_a_member_and_its_generation_are_read() -> None:
    # librdkafka's form of a joined member (generation 7): what consumer_group_metadata()
    # returns once the consumer has an assignment.
    joined = b"CGMDv2:" + struct.pack("=i", 7) + b"g\0member-1\0\1"
    assert group_metadata(joined) == GroupMetadata("g", 7, "member-1", None)


def test_a_group_id_or_metadata_is_taken_as_is() -> None:
    assert group_metadata("g") == GroupMetadata("g")
    given = GroupMetadata("g", 3, "m", "i")
    assert group_metadata(given) is given


def test_anything_else_is_refused() -> None:
    with pytest.raises(ValueError, match="consumer group metadata"):
        group_metadata(b"not metadata")
