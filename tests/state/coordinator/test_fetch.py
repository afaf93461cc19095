"""OffsetFetch semantics."""

from __future__ import annotations

from state.coordinator.errors import ErrorCode
from state.coordinator.fetch import PartitionData, fetch
from state.coordinator.model import OffsetAndMetadata, TopicPartition

COMMITTED = {
    TopicPartition("t", 1): OffsetAndMetadata(10, 3, "m", 100, None),
    TopicPartition("a", 0): OffsetAndMetadata(7, -1, "", 90, 500),
}


def test_whole_group_sorted() -> None:
    assert fetch(COMMITTED, None) == [
        PartitionData("a", 0, 7, -1, "", ErrorCode.NONE),
        PartitionData("t", 1, 10, 3, "m", ErrorCode.NONE),
    ]


def test_unknown_group_has_no_partitions() -> None:
    assert fetch({}, None) == []


def test_listed_partitions_in_order_missing_ones_as_minus_one() -> None:
    got = fetch(COMMITTED, [TopicPartition("t", 1), ("t", 2), TopicPartition("t", 1)])
    assert got == [
        PartitionData("t", 1, 10, 3, "m", 0),
        PartitionData("t", 2, -1, -1, "", 0),
        PartitionData("t", 1, 10, 3, "m", 0),
    ]


def test_listed_partitions_of_unknown_group() -> None:
    assert fetch({}, [TopicPartition("x", 0)]) == [PartitionData("x", 0, -1, -1, "", 0)]
