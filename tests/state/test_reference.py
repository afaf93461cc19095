"""The reference coordinator's own contract (its Kafka rules are tested with the shard's in
test_shard.py) and the rule functions it is built from."""

from __future__ import annotations

import pytest

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
    TopicPartition,
    UnknownKey,
)
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.coordinator.rules import (
    empty_group_deadline,
    is_valid_group_id,
    is_valid_topic,
    metadata_too_large,
    offset_deadline,
    subscribed_topics,
    validate_commit_group,
)
from tests.state.reference import ReferenceCoordinator
from tests.state.strategies import GROUPS, SHARD

CONFIG = CoordinatorConfig(offsets_retention_ms=100)
G = GROUPS[0]


def test_replay_last_write_wins_and_tombstones_remove_groups() -> None:
    ref = ReferenceCoordinator(SHARD, CONFIG)
    key = OffsetCommitKey(G, "t", 0)
    ref.replay(Record(key, OffsetAndMetadata(5)))
    ref.replay(Record(key, OffsetAndMetadata(3)))
    assert ref.groups[G].offsets == {TopicPartition("t", 0): OffsetAndMetadata(3)}
    ref.replay(Record(GroupMetadataKey(G), GroupMetadataValue()))
    ref.replay(Record(key, None))
    assert G in ref.groups  # metadata remains
    ref.replay(Record(GroupMetadataKey(G), None))
    assert ref.groups == {}
    ref.replay(Record(UnknownKey(5, b"x"), None))
    ref.replay(Record(key, None))  # tombstone of an absent key
    assert ref.groups == {}


def test_handle_replays_its_records() -> None:
    ref = ReferenceCoordinator(SHARD, CONFIG)
    result = ref.handle(OffsetCommitRequest("r", G, (PartitionCommit("t", 0, 9),)), 50)
    assert result.records == [
        Record(OffsetCommitKey(G, "t", 0), OffsetAndMetadata(9, -1, "", 50, None))
    ]
    assert ref.groups[G].offsets[TopicPartition("t", 0)].offset == 9


def test_expire_orders_tombstones_by_group_offsets_first() -> None:
    ref = ReferenceCoordinator(SHARD, CONFIG)
    ref.replay(Record(GroupMetadataKey(G), GroupMetadataValue(current_state_timestamp_ms=0)))
    for p in (1, 0):
        ref.replay(Record(OffsetCommitKey(G, "t", p), OffsetAndMetadata(1, commit_timestamp_ms=0)))
    assert ref.next_expiry_ms() == 100
    assert ref.expire(99) == []
    assert ref.expire(100) == [
        Record(OffsetCommitKey(G, "t", 0), None),
        Record(OffsetCommitKey(G, "t", 1), None),
        Record(GroupMetadataKey(G), None),
    ]
    assert ref.groups == {} and ref.next_expiry_ms() is None


def test_snapshot_is_a_copy() -> None:
    ref = ReferenceCoordinator(SHARD, CONFIG)
    ref.replay(Record(OffsetCommitKey(G, "t", 0), OffsetAndMetadata(1)))
    snap = ref.snapshot()
    ref.replay(Record(OffsetCommitKey(G, "t", 0), None))
    assert snap[G].offsets


@pytest.mark.parametrize(
    ("topic", "valid"),
    [
        ("t", True),
        ("a.b-c_D9", True),
        ("x" * 249, True),
        ("x" * 250, False),
        ("", False),
        (".", False),
        ("..", False),
        ("...", True),
        ("a b", False),
        ("ü", False),
        (None, False),
    ],
)
def test_topic_names(topic: str | None, valid: bool) -> None:
    assert is_valid_topic(topic) is valid


def test_group_ids() -> None:
    assert is_valid_group_id("g") and not is_valid_group_id("") and not is_valid_group_id(None)
    assert is_valid_group_id("", empty_allowed=True)
    assert not is_valid_group_id(None, empty_allowed=True)
    assert not is_valid_group_id("x" * 40000)


def test_metadata_size_counts_utf16_code_units_as_kafka_does() -> None:
    config = CoordinatorConfig(offset_metadata_max_bytes=4)
    assert not metadata_too_large("abcd", config)
    assert not metadata_too_large("éééé", config)  # 4 code units, 8 bytes of UTF-8
    assert metadata_too_large("ééééé", config)
    assert not metadata_too_large("😀😀", config)  # astral: 2 code units each
    assert metadata_too_large("😀😀a", config)
    assert not metadata_too_large(None, config)


def test_subscription_known_only_for_consumer_groups_naming_topics() -> None:
    m = MemberMetadata("m", subscribed_topics=("a",))
    assert subscribed_topics(GroupMetadataValue(members=(m,))) == {"a"}
    assert subscribed_topics(GroupMetadataValue(protocol_type="connect", members=(m,))) is None
    assert subscribed_topics(GroupMetadataValue(members=(m, MemberMetadata("n")))) is None
    assert subscribed_topics(GroupMetadataValue()) is None


def test_validate_commit_group() -> None:
    gm = GroupMetadataValue(generation=2, members=(MemberMetadata("m", group_instance_id="i"),))
    assert validate_commit_group(None, False, 0, "m", None) == ErrorCode.ILLEGAL_GENERATION
    assert validate_commit_group(None, False, -1, "m", "i") == ErrorCode.NONE
    assert validate_commit_group(gm, True, 2, "m", None) == ErrorCode.NONE
    assert validate_commit_group(gm, True, 2, "m", "i") == ErrorCode.NONE
    assert validate_commit_group(gm, True, 2, "x", "i") == ErrorCode.FENCED_INSTANCE_ID
    assert validate_commit_group(gm, True, 1, "m", None) == ErrorCode.ILLEGAL_GENERATION
    assert validate_commit_group(gm, True, -1, "", None) == ErrorCode.UNKNOWN_MEMBER_ID
    # A TxnOffsetCommit naming no member nor generation is taken; any other check is the same.
    assert validate_commit_group(gm, True, -1, "", None, transactional=True) == ErrorCode.NONE
    illegal = ErrorCode.ILLEGAL_GENERATION
    assert validate_commit_group(gm, True, 1, "m", None, transactional=True) == illegal
    assert validate_commit_group(None, False, 0, "", None, transactional=True) == illegal


def test_deadlines() -> None:
    o = OffsetAndMetadata(1, commit_timestamp_ms=10)
    assert offset_deadline(o, "t", None, CONFIG) == 110
    empty = GroupMetadataValue(current_state_timestamp_ms=50)
    assert offset_deadline(o, "t", empty, CONFIG) == 150
    assert offset_deadline(OffsetAndMetadata(1, commit_timestamp_ms=90), "t", empty, CONFIG) == 190
    explicit = OffsetAndMetadata(1, commit_timestamp_ms=10, expire_timestamp_ms=20)
    assert offset_deadline(explicit, "t", empty, CONFIG) == 20
    stable = GroupMetadataValue(members=(MemberMetadata("m", subscribed_topics=("t",)),))
    assert offset_deadline(explicit, "t", stable, CONFIG) is None
    assert offset_deadline(o, "u", stable, CONFIG) == 110
    assert empty_group_deadline(empty, has_offsets=False) == 50
    assert empty_group_deadline(empty, has_offsets=True) is None
    assert empty_group_deadline(stable, has_offsets=False) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"offsets_topic_partitions": 0},
        {"offsets_retention_ms": 0},
        {"offset_metadata_max_bytes": -1},
        {"offset_metadata_max_bytes": 10923},
        {"offsets_topic_partitions": True},
    ],
)
def test_config_validation(kwargs: dict) -> None:
    with pytest.raises((ValueError, TypeError)):
        CoordinatorConfig(**kwargs)
