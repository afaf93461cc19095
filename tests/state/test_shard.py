"""The shard state machine: Kafka's rules (checked on the shard and the reference alike), batch
handling, expiry with a fake clock, and property tests against the reference model."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.model import MemberMetadata, OffsetAndMetadata, TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    DecodeError,
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
)
from state.coordinator.rules import MAX_PARTITIONS_PER_TOPIC
from state.formats.records import decode_key, decode_offset_commit_value
from state.formats.request_codec import decode_request, encode_request
from state.shard import (
    RECORD_FRAME_SCHEMA,
    RESPONSE_FRAME_SCHEMA,
    ShardState,
    apply_batch,
    cleanup_group_metadata,
    decode_request_messages,
    empty_shard,
    expire,
    fetch_offsets,
    frame_from_requests,
    replay_log,
    replay_records,
    snapshot,
    snapshot_record_chunks,
    snapshot_records,
)
from tests.state.coordinators import Coordinator, ReferenceAdapter, ShardCoordinator
from tests.state.harness import Run, shard_groups
from tests.state.strategies import (
    GROUPS,
    MESSAGE_AGES,
    OTHER_SHARD_GROUP,
    SHARD,
    batches,
    commits,
)

RETENTION = 1000
CONFIG = CoordinatorConfig(offsets_retention_ms=RETENTION, offset_metadata_max_bytes=8)
G, H = GROUPS[0], GROUPS[1]
T0 = 10_000


@pytest.fixture(params=[ShardCoordinator, ReferenceAdapter], ids=lambda c: c.name)
def coord(request: pytest.FixtureRequest) -> Coordinator:
    return request.param(SHARD, CONFIG)


def commit(
    group: str = G, *parts: PartitionCommit, rid: str = "c", **kw: object
) -> OffsetCommitRequest:
    return OffsetCommitRequest(rid, group, parts or (PartitionCommit("t", 0, 1),), **kw)  # type: ignore[arg-type]


def members_of(*ids: str, topics: tuple[str, ...] = ("t",)) -> tuple[MemberMetadata, ...]:
    return tuple(MemberMetadata(m, subscribed_topics=topics) for m in ids)


def codes(answer: list[tuple]) -> list[int]:
    return [row[2] for row in answer]


# --- OffsetCommit validation ---------------------------------------------------------------


def test_commit_is_stored_and_answered(coord: Coordinator) -> None:
    (answer,) = coord.run([commit(G, PartitionCommit("t", 0, 5, 2, "m"))], T0)
    assert answer == [("t", 0, 0, None)]
    assert coord.offsets(G) == {TopicPartition("t", 0): OffsetAndMetadata(5, 2, "m", T0, None)}


@pytest.mark.parametrize("group", [None, "x" * 40_000])
def test_invalid_group_id_for_every_partition(coord: Coordinator, group: str | None) -> None:
    req = OffsetCommitRequest("c", group, (PartitionCommit("t", 0, 1), PartitionCommit("u", 1, 1)))  # type: ignore[arg-type]
    (answer,) = coord.run([req], T0)
    assert codes(answer) == [ErrorCode.INVALID_GROUP_ID] * 2
    assert coord.groups() == set()


def test_empty_group_id_commits_and_is_deleted_but_takes_no_offset_delete(
    coord: Coordinator,
) -> None:
    """As Kafka 4.1: "" is a group for OffsetCommit and DeleteGroups, INVALID_GROUP_ID for
    OffsetDelete and JoinGroup (GroupMetadata here)."""
    assert partition_for("") == SHARD
    answers = coord.run(
        [
            commit("", PartitionCommit("t", 0, 1)),
            OffsetDeleteRequest("od", "", (TopicPartition("t", 0),)),
            GroupMetadataRequest("gm", "", 1, members=(MemberMetadata("m"),)),
        ],
        T0,
    )
    assert [codes(a) for a in answers] == [
        [ErrorCode.NONE],
        [ErrorCode.INVALID_GROUP_ID],
        [ErrorCode.INVALID_GROUP_ID],
    ]
    assert coord.offsets("") == {TopicPartition("t", 0): OffsetAndMetadata(1, -1, "", T0, None)}
    (answer,) = coord.run([DeleteGroupsRequest("dg", "")], T0 + 1)
    assert codes(answer) == [ErrorCode.NONE]
    assert coord.groups() == set()


def test_group_of_another_shard_is_not_coordinated_here(coord: Coordinator) -> None:
    assert partition_for(OTHER_SHARD_GROUP) != SHARD
    (answer,) = coord.run(
        [commit(OTHER_SHARD_GROUP, PartitionCommit("t", 0, 1), PartitionCommit("t", 1, 1))], T0
    )
    assert codes(answer) == [ErrorCode.NOT_COORDINATOR] * 2
    (answer,) = coord.run([DeleteGroupsRequest("d", OTHER_SHARD_GROUP)], T0)
    assert answer == [
        (None, None, ErrorCode.NOT_COORDINATOR, "group belongs to another offsets-topic partition")
    ]


@pytest.mark.parametrize("topic", ["", ".", "..", "a b", "x" * 250, "tópico"])
def test_invalid_topic_fails_only_its_partition(coord: Coordinator, topic: str) -> None:
    (answer,) = coord.run([commit(G, PartitionCommit(topic, 0, 1), PartitionCommit("t", 0, 1))], T0)
    assert codes(answer) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NONE]
    assert set(coord.offsets(G)) == {TopicPartition("t", 0)}


def test_valid_topic_names(coord: Coordinator) -> None:
    (answer,) = coord.run(
        [commit(G, PartitionCommit("x" * 249, 0, 1), PartitionCommit("a.B_c-9", 0, 1))], T0
    )
    assert codes(answer) == [0, 0]


def test_negative_partition_fails_only_its_partition(coord: Coordinator) -> None:
    (answer,) = coord.run([commit(G, PartitionCommit("t", -1, 1), PartitionCommit("t", 0, 1))], T0)
    assert codes(answer) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NONE]


def test_partition_index_past_the_cap_fails_only_its_partition(coord: Coordinator) -> None:
    """The job's cap (``MAX_PARTITIONS_PER_TOPIC``, a documented difference from Kafka) in
    OffsetCommit and OffsetDelete; the request's other partitions go through."""
    cap, int32_max = MAX_PARTITIONS_PER_TOPIC, 2**31 - 1
    parts = [PartitionCommit("t", p, 1) for p in (0, cap - 1, cap, int32_max, 1)]
    (answer,) = coord.run([commit(G, *parts)], T0)
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert codes(answer) == [ErrorCode.NONE, ErrorCode.NONE, unknown, unknown, ErrorCode.NONE]
    assert set(coord.offsets(G)) == {TopicPartition("t", p) for p in (0, cap - 1, 1)}
    named = (TopicPartition("t", cap - 1), TopicPartition("t", cap), TopicPartition("t", int32_max))
    (answer,) = coord.run([OffsetDeleteRequest("d", G, named)], T0)
    assert codes(answer) == [ErrorCode.NONE, unknown, unknown]
    assert set(coord.offsets(G)) == {TopicPartition("t", 0), TopicPartition("t", 1)}


def test_unknown_topics_are_answered_before_group_errors(coord: Coordinator) -> None:
    too_long = "x" * 40_000
    (answer,) = coord.run(
        [commit(too_long, PartitionCommit("..", 0, 1), PartitionCommit("t", 0, 1))], T0
    )
    assert codes(answer) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_GROUP_ID]


def test_metadata_too_large_fails_only_its_partition(coord: Coordinator) -> None:
    # 8 allowed, counted as Kafka counts (UTF-16 code units): 8 "é" are 16 bytes of UTF-8 and
    # pass; 5 astral characters are 10 code units and do not.
    parts = (
        PartitionCommit("t", 0, 1, metadata="12345678"),
        PartitionCommit("t", 1, 1, metadata="é" * 8),
        PartitionCommit("t", 2, 1, metadata="😀" * 5),
        PartitionCommit("t", 3, 1, metadata="123456789"),
    )
    (answer,) = coord.run([commit(G, *parts)], T0)
    assert codes(answer) == [
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.OFFSET_METADATA_TOO_LARGE,
        ErrorCode.OFFSET_METADATA_TOO_LARGE,
    ]
    assert set(coord.offsets(G)) == {TopicPartition("t", 0), TopicPartition("t", 1)}


def test_negative_offsets_are_accepted_as_in_kafka(coord: Coordinator) -> None:
    (answer,) = coord.run([commit(G, PartitionCommit("t", 0, -1))], T0)
    assert codes(answer) == [0]
    assert coord.offsets(G)[TopicPartition("t", 0)].offset == -1


def test_commit_without_partitions_is_answered_without_checks(coord: Coordinator) -> None:
    (answer,) = coord.run([OffsetCommitRequest("c", "", ())], T0)
    assert answer == [(None, None, 0, None)]


def test_generation_on_missing_group_is_illegal(coord: Coordinator) -> None:
    (answer,) = coord.run([commit(G, generation_id=1, member_id="m1")], T0)
    assert codes(answer) == [ErrorCode.ILLEGAL_GENERATION]
    assert coord.groups() == set()


def test_generation_on_simple_group_is_unknown_member(coord: Coordinator) -> None:
    first, second, third = coord.run(
        [commit(G), commit(G, generation_id=0, member_id="m1"), commit(G, member_id="m1")], T0
    )
    assert codes(first) == [0]
    assert codes(second) == [ErrorCode.UNKNOWN_MEMBER_ID]
    # A negative generation to an Empty group is an admin commit, whatever the member id.
    assert codes(third) == [0]


def test_group_exists_for_later_requests_of_the_same_batch(coord: Coordinator) -> None:
    answers = coord.run(
        [
            commit(G, generation_id=1),
            commit(G, PartitionCommit("t", 0, 1, metadata="x" * 9)),  # writes nothing
            commit(G, generation_id=1),
            commit(G),
            commit(G, generation_id=1),
        ],
        T0,
    )
    assert [codes(a) for a in answers] == [
        [ErrorCode.ILLEGAL_GENERATION],
        [ErrorCode.OFFSET_METADATA_TOO_LARGE],
        [ErrorCode.ILLEGAL_GENERATION],
        [0],
        [ErrorCode.UNKNOWN_MEMBER_ID],
    ]


def test_member_and_generation_checks(coord: Coordinator) -> None:
    gm = GroupMetadataRequest("gm", G, 3, members=members_of("m1", "m2"), leader="m1")
    answers = coord.run(
        [
            gm,
            commit(G, generation_id=3, member_id="m1"),
            commit(G, generation_id=2, member_id="m1"),
            commit(G, generation_id=3, member_id="zz"),
            commit(G, generation_id=-1, member_id=""),  # legacy commit to a non-empty group
            commit(G, generation_id=-1, member_id="m2"),  # generation -1 is not the group's
        ],
        T0,
    )
    assert [codes(a) for a in answers] == [
        [0],
        [0],
        [ErrorCode.ILLEGAL_GENERATION],
        [ErrorCode.UNKNOWN_MEMBER_ID],
        [ErrorCode.UNKNOWN_MEMBER_ID],
        [ErrorCode.ILLEGAL_GENERATION],
    ]


def test_static_member_checks(coord: Coordinator) -> None:
    member = MemberMetadata("m1", group_instance_id="i1", subscribed_topics=("t",))
    answers = coord.run(
        [
            GroupMetadataRequest("gm", G, 1, members=(member,)),
            commit(G, generation_id=1, member_id="m1", group_instance_id="i1"),
            commit(G, generation_id=1, member_id="old", group_instance_id="i1"),
            commit(G, generation_id=1, member_id="m1", group_instance_id="i9"),
        ],
        T0,
    )
    assert [codes(a) for a in answers] == [
        [0],
        [0],
        [ErrorCode.FENCED_INSTANCE_ID],
        [ErrorCode.UNKNOWN_MEMBER_ID],
    ]


def test_empty_group_accepts_admin_commits_only(coord: Coordinator) -> None:
    answers = coord.run(
        [
            GroupMetadataRequest("gm", G, 4, members=()),
            commit(G, generation_id=4, member_id="m1"),
            commit(G, member_id="admin"),
        ],
        T0,
    )
    assert [codes(a) for a in answers] == [[0], [ErrorCode.UNKNOWN_MEMBER_ID], [0]]


# --- rewinds, retention, expiry --------------------------------------------------------------


def test_lower_offset_replaces_higher_in_log_order(coord: Coordinator) -> None:
    coord.run([commit(G, PartitionCommit("t", 0, 100)), commit(G, PartitionCommit("t", 0, 7))], T0)
    assert coord.offsets(G)[TopicPartition("t", 0)].offset == 7
    coord.run([commit(G, PartitionCommit("t", 0, 3), PartitionCommit("t", 0, 9))], T0 + 1)
    assert coord.offsets(G)[TopicPartition("t", 0)].offset == 9


def test_offsets_expire_retention_after_commit(coord: Coordinator) -> None:
    coord.run([commit(G, PartitionCommit("t", 0, 1)), commit(H, PartitionCommit("t", 0, 1))], T0)
    coord.run([commit(H, PartitionCommit("t", 0, 2))], T0 + 500)
    assert coord.next_expiry_ms() == T0 + RETENTION
    coord.expire(T0 + RETENTION - 1)
    assert coord.groups() == {G, H}
    coord.expire(T0 + RETENTION)
    assert coord.groups() == {H}
    assert coord.next_expiry_ms() == T0 + 500 + RETENTION
    coord.expire(T0 + 500 + RETENTION)
    assert coord.groups() == set()
    assert coord.next_expiry_ms() is None


def test_explicit_retention_sets_expire_timestamp(coord: Coordinator) -> None:
    coord.run([commit(G, PartitionCommit("t", 0, 1, leader_epoch=5), retention_time_ms=50)], T0)
    value = coord.offsets(G)[TopicPartition("t", 0)]
    # Written as OffsetCommitValue v1, which has no leader epoch.
    assert value == OffsetAndMetadata(1, -1, "", T0, T0 + 50)
    assert coord.next_expiry_ms() == T0 + 50
    coord.expire(T0 + 49)
    assert coord.offsets(G)
    coord.expire(T0 + 50)
    assert coord.groups() == set()


def test_retention_minus_one_uses_broker_retention(coord: Coordinator) -> None:
    coord.run([commit(G, retention_time_ms=-1)], T0)
    assert coord.offsets(G)[TopicPartition("t", 0)].expire_timestamp_ms is None
    assert coord.next_expiry_ms() == T0 + RETENTION


@pytest.mark.parametrize("retention", [0, -5])
def test_any_other_retention_is_explicit_as_in_kafka(coord: Coordinator, retention: int) -> None:
    """Kafka treats every retention but -1 as explicit: 0 or less expires at the next check."""
    coord.run([commit(G, retention_time_ms=retention)], T0)
    assert coord.offsets(G)[TopicPartition("t", 0)].expire_timestamp_ms == T0 + retention
    assert coord.next_expiry_ms() == T0 + retention
    coord.expire(T0)
    assert coord.groups() == set()


def test_retention_past_int64_saturates_instead_of_wrapping(coord: Coordinator) -> None:
    coord.run([commit(G, retention_time_ms=2**63 - 1)], T0)
    assert coord.offsets(G)[TopicPartition("t", 0)].expire_timestamp_ms == 2**63 - 1
    coord.expire(2**62)
    assert coord.offsets(G)


def test_group_with_members_keeps_subscribed_offsets(coord: Coordinator) -> None:
    coord.run(
        [
            GroupMetadataRequest("gm", G, 1, members=members_of("m1", topics=("t",))),
            commit(
                G,
                PartitionCommit("t", 0, 1),
                PartitionCommit("u", 0, 1),
                generation_id=1,
                member_id="m1",
            ),
        ],
        T0,
    )
    # KIP-496: a Stable consumer group's offsets of topics nobody subscribes to still expire.
    assert coord.next_expiry_ms() == T0 + RETENTION
    coord.expire(T0 + 10 * RETENTION)
    assert set(coord.offsets(G)) == {TopicPartition("t", 0)}
    assert coord.next_expiry_ms() is None


def test_group_with_unknown_subscription_keeps_everything(coord: Coordinator) -> None:
    coord.run(
        [
            GroupMetadataRequest("gm", G, 1, members=members_of("m1", topics=())),
            commit(
                G, PartitionCommit("u", 0, 1), generation_id=1, member_id="m1", retention_time_ms=5
            ),
        ],
        T0,
    )
    coord.expire(T0 + 10 * RETENTION)
    assert set(coord.offsets(G)) == {TopicPartition("u", 0)}
    assert coord.next_expiry_ms() is None


def test_emptied_group_expires_from_when_it_became_empty(coord: Coordinator) -> None:
    coord.run(
        [
            GroupMetadataRequest("gm", G, 1, members=members_of("m1")),
            commit(G, PartitionCommit("t", 0, 1), generation_id=1, member_id="m1"),
        ],
        T0,
    )
    coord.run([GroupMetadataRequest("gm2", G, 2, members=())], T0 + 300)
    assert coord.next_expiry_ms() == T0 + 300 + RETENTION
    coord.expire(T0 + 300 + RETENTION - 1)
    assert coord.offsets(G)
    coord.expire(T0 + 300 + RETENTION)
    # The last offset gone, the Empty group's metadata goes too.
    assert coord.groups() == set()


def test_empty_group_without_offsets_is_deleted_by_next_expiry(coord: Coordinator) -> None:
    coord.run([GroupMetadataRequest("gm", G, 1, members=())], T0)
    assert coord.metadata(G) is not None
    assert coord.next_expiry_ms() == T0
    coord.expire(T0 - 1)
    assert coord.groups() == {G}
    coord.expire(T0)
    assert coord.groups() == set()


# --- OffsetDelete and DeleteGroups ----------------------------------------------------------


def test_offset_delete(coord: Coordinator) -> None:
    coord.run([commit(G, PartitionCommit("t", 0, 1), PartitionCommit("t", 1, 1))], T0)
    (missing_group, deleted) = coord.run(
        [
            OffsetDeleteRequest("d0", H, (TopicPartition("t", 0),)),
            OffsetDeleteRequest(
                "d1", G, (TopicPartition("t", 0), TopicPartition("t", 9), TopicPartition("..", 0))
            ),
        ],
        T0,
    )
    assert missing_group == [(None, None, ErrorCode.GROUP_ID_NOT_FOUND, "group does not exist")]
    assert codes(deleted) == [0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert set(coord.offsets(G)) == {TopicPartition("t", 1)}


def test_offset_delete_protects_subscribed_topics(coord: Coordinator) -> None:
    (_, _, answer) = coord.run(
        [
            GroupMetadataRequest("gm", G, 1, members=members_of("m1", topics=("t",))),
            commit(
                G,
                PartitionCommit("t", 0, 1),
                PartitionCommit("u", 0, 1),
                generation_id=1,
                member_id="m1",
            ),
            OffsetDeleteRequest("d", G, (TopicPartition("t", 0), TopicPartition("u", 0))),
        ],
        T0,
    )
    assert codes(answer) == [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, 0]
    assert set(coord.offsets(G)) == {TopicPartition("t", 0)}


def test_offset_delete_of_non_consumer_group_with_members(coord: Coordinator) -> None:
    (_, answer) = coord.run(
        [
            GroupMetadataRequest("gm", G, 1, protocol_type="connect", members=members_of("m1")),
            OffsetDeleteRequest("d", G, (TopicPartition("t", 0),)),
        ],
        T0,
    )
    assert codes(answer) == [ErrorCode.NON_EMPTY_GROUP]


def test_delete_groups(coord: Coordinator) -> None:
    answers = coord.run(
        [
            DeleteGroupsRequest("x0", G),
            commit(G, PartitionCommit("t", 0, 1), PartitionCommit("u", 2, 1)),
            GroupMetadataRequest("gm", H, 1, members=members_of("m1")),
            DeleteGroupsRequest("x1", H),
            DeleteGroupsRequest("x2", G),
        ],
        T0,
    )
    assert [codes(a) for a in answers] == [
        [ErrorCode.GROUP_ID_NOT_FOUND],
        [0, 0],
        [0],
        [ErrorCode.NON_EMPTY_GROUP],
        [0],
    ]
    assert coord.groups() == {H}


# --- shard specifics ---------------------------------------------------------------------------


def test_records_and_responses_follow_the_schemas() -> None:
    frame = frame_from_requests(
        [commit(G, PartitionCommit("t", 0, 5)), DeleteGroupsRequest("x", H)], 0, T0
    )
    result = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG)
    assert result.records.schema == RECORD_FRAME_SCHEMA
    assert result.responses.schema == RESPONSE_FRAME_SCHEMA
    (record,) = result.records.to_pylist()
    assert decode_key(record["key"]) == (G, "t", 0)
    assert decode_offset_commit_value(record["value"]) == OffsetAndMetadata(5, -1, "", T0, None)


def test_only_the_last_record_per_key_is_emitted() -> None:
    reqs = [commit(G, PartitionCommit("t", 0, i)) for i in range(5)]
    result = apply_batch(empty_shard(SHARD, CONFIG), frame_from_requests(reqs, 0, T0), T0, CONFIG)
    assert result.records["offset"].to_pylist() == [4]
    assert len(result.responses) == 5


def test_rows_arrive_in_any_order() -> None:
    reqs = [
        commit(G, PartitionCommit("t", 0, i), PartitionCommit("t", 1, 10 - i)) for i in range(6)
    ]
    frame = frame_from_requests(reqs, 0, T0)
    order = list(range(frame.num_rows))
    random.Random(1).shuffle(order)
    result = apply_batch(empty_shard(SHARD, CONFIG), frame.take(pa.array(order)), T0, CONFIG)
    offsets = {tp.partition: v.offset for tp, v in snapshot(result.state)[G].offsets.items()}
    assert offsets == {0: 5, 1: 5}
    assert result.responses["ingest_offset"].to_pylist() == sorted(
        result.responses["ingest_offset"].to_pylist()
    )


def test_decoder_rejections_and_dead_letters() -> None:
    reqs = [
        DecodeError(ErrorCode.INVALID_REQUEST, "topics[0]: bad", "r1", G, "OffsetCommit"),
        DecodeError(ErrorCode.CORRUPT_MESSAGE, "request: not valid JSON"),
    ]
    frame = frame_from_requests(reqs, 0, T0)
    result = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG)
    rows = result.responses.to_pylist()
    assert [(r["request_id"], r["error_code"], r["error_reason"]) for r in rows] == [
        ("r1", ErrorCode.INVALID_REQUEST, "topics[0]: bad"),
        (None, ErrorCode.CORRUPT_MESSAGE, "request: not valid JSON"),
    ]
    assert result.records.num_rows == 0


def test_malformed_rows_are_answered() -> None:
    frame = frame_from_requests([commit(G), DeleteGroupsRequest("x", G)], 0, T0)
    frame = frame.set_column(
        frame.schema.get_field_index("api"), "api", pa.array(["Nope", "DeleteGroups"])
    )
    frame = frame.set_column(
        frame.schema.get_field_index("request_id"), "request_id", pa.array(["c", None])
    )
    result = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG)
    rows = result.responses.to_pylist()
    assert [(r["request_id"], r["error_code"]) for r in rows] == [("c", 42), (None, 42)]
    assert "unknown api 'Nope'" in rows[0]["error_reason"]
    assert rows[1]["error_reason"] == "request has no request_id"


def test_invalid_members_json_is_rejected() -> None:
    frame = frame_from_requests([GroupMetadataRequest("gm", G, 1)], 0, T0)
    frame = frame.set_column(
        frame.schema.get_field_index("members_json"), "members_json", pa.array(["{"])
    )
    result = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG)
    (row,) = result.responses.to_pylist()
    assert row["error_code"] == ErrorCode.INVALID_REQUEST and row["error_reason"].startswith(
        "members_json"
    )


def test_pandas_frame_without_group_metadata_columns() -> None:
    frame = frame_from_requests([commit(G, PartitionCommit("t", 3, 9))], 0, T0).to_pandas()
    frame = frame.drop(columns=["protocol_type", "protocol", "leader"]).iloc[::-1]
    result = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG)
    assert result.responses["error_code"].to_pylist() == [0]


def test_expiry_tombstones_come_first_in_the_data_call() -> None:
    state = apply_batch(
        empty_shard(SHARD, CONFIG), frame_from_requests([commit(G)], 0, T0), T0, CONFIG
    ).state
    later = T0 + RETENTION
    result = apply_batch(state, frame_from_requests([commit(H)], 1, later), later, CONFIG)
    rows = result.records.to_pylist()
    assert [(r["group_id"], r["value"] is None) for r in rows] == [(G, True), (H, False)]


def test_expire_is_pure_and_reports_next_expiry() -> None:
    state = apply_batch(
        empty_shard(SHARD, CONFIG),
        frame_from_requests(
            [commit(G, PartitionCommit("t", 0, 1)), commit(G, PartitionCommit("t", 1, 1))],
            0,
            [T0, T0 + 5],
        ),
        T0 + 5,
        CONFIG,
    ).state
    early = expire(state, T0 + RETENTION - 1, CONFIG)
    assert early.records.num_rows == 0 and early.next_expiry_ms == T0 + RETENTION
    due = expire(state, T0 + RETENTION, CONFIG)
    assert [(r["topic"], r["partition"], r["value"]) for r in due.records.to_pylist()] == [
        ("t", 0, None)
    ]
    assert due.next_expiry_ms == T0 + 5 + RETENTION
    # The input state is untouched.
    assert len(snapshot(state)[G].offsets) == 2


def test_fetch_offsets() -> None:
    frame = frame_from_requests(
        [commit(G, PartitionCommit("t", 1, 5), PartitionCommit("a", 0, 2))], 0, T0
    )
    state = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG).state
    assert [tp for tp, _ in fetch_offsets(state, G, None)] == [("a", 0), ("t", 1)]
    assert fetch_offsets(state, G, [TopicPartition("t", 1), TopicPartition("t", 2)]) == [
        (("t", 1), OffsetAndMetadata(5, -1, "", T0, None)),
        (("t", 2), None),
    ]
    assert fetch_offsets(state, "nobody", None) == []


def test_changed_retention_recomputes_deadlines() -> None:
    state = apply_batch(
        empty_shard(SHARD, CONFIG), frame_from_requests([commit(G)], 0, T0), T0, CONFIG
    ).state
    longer = CoordinatorConfig(offsets_retention_ms=5 * RETENTION, offset_metadata_max_bytes=8)
    assert expire(state, T0 + RETENTION, longer).records.num_rows == 0
    assert expire(state, T0 + RETENTION, CONFIG).records.num_rows == 1


def test_large_shard_compacts_and_keeps_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Enough writes to merge the delta into the base several times, with overwrites and deletes."""
    import state.engine.offset_table

    monkeypatch.setattr(state.engine.offset_table, "COMPACT_MIN_ROWS", 1000)
    state = empty_shard(SHARD, CONFIG)
    compactions = 0
    rng = np.random.default_rng(3)
    expected: dict[tuple[str, int], int] = {}
    offset = 0
    for batch in range(5):
        reqs = []
        for _ in range(1500):
            g = GROUPS[int(rng.integers(0, 3))]
            p = int(rng.integers(0, 4000))
            reqs.append(commit(g, PartitionCommit("t", p, offset)))
            expected[(g, p)] = offset
            offset += 1
        deletes = [(g, p) for (g, p) in list(expected)[::50]]
        for g, p in deletes:
            reqs.append(OffsetDeleteRequest("d", g, (TopicPartition("t", p),)))
            del expected[(g, p)]
        start = batch * 10_000
        result = apply_batch(state, frame_from_requests(reqs, start, T0), T0, CONFIG)
        compactions += result.state.offsets.base is not state.offsets.base
        state = result.state
    assert compactions >= 2
    got = {
        (g, tp.partition): v.offset
        for g, s in snapshot(state).items()
        for tp, v in s.offsets.items()
    }
    assert got == expected
    assert state.num_offsets == len(expected)


# --- what the streaming job calls ---------------------------------------------------------------


def busy_shard() -> ShardState:
    """A shard with a consumer group (metadata and offsets), a simple group and a deletion."""
    members = members_of("m1")
    frame = frame_from_requests(
        [
            GroupMetadataRequest("gm", G, 1, members=members),
            commit(G, PartitionCommit("t", 0, 3), generation_id=1, member_id="m1"),
            commit(H, PartitionCommit("t", 1, 4), PartitionCommit("u", 0, 5)),
            OffsetDeleteRequest("d", H, (TopicPartition("u", 0),)),
        ],
        0,
        T0,
    )
    return apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG).state


def test_replay_log_rebuilds_the_shard_and_skips_unreadable_records() -> None:
    state = busy_shard()
    records = snapshot_records(state)
    log = list(zip(records["key"].to_pylist(), records["value"].to_pylist(), strict=True))
    # A key type this code does not know is read and ignored, as Kafka's loader does; a record
    # that does not decode (a truncated OffsetCommitKey) is skipped and reported.
    log.insert(1, (b"\x7f\x7f of a newer Kafka", b"value"))
    log.insert(2, (b"\x00\x01\x00", b""))
    unreadable: list[Exception] = []
    loaded = replay_log(SHARD, log, on_unreadable=unreadable.append)
    assert loaded.records_read == records.num_rows + 1
    assert len(unreadable) == 1
    assert shard_groups(loaded.state) == shard_groups(state)
    # Without a callback the unreadable record is skipped all the same.
    assert shard_groups(replay_log(SHARD, log).state) == shard_groups(state)


def test_snapshot_records_are_what_compaction_would_leave() -> None:
    state = busy_shard()
    records = snapshot_records(state)
    assert records.schema == RECORD_FRAME_SCHEMA
    assert [
        (r["kind"], r["group_id"], r["topic"], r["partition"]) for r in records.to_pylist()
    ] == [
        ("group", G, None, -1),
        ("offset", G, "t", 0),
        ("offset", H, "t", 1),
    ]
    rebuilt = replay_records(empty_shard(SHARD, CONFIG), records)
    assert shard_groups(rebuilt) == shard_groups(state)
    assert snapshot_records(empty_shard(SHARD)).num_rows == 0


def test_snapshot_pieces_hold_whole_groups_in_the_snapshots_order() -> None:
    members = members_of("m1")
    requests: list[object] = [GroupMetadataRequest("gm", GROUPS[0], 1, members=members)]
    requests += [
        commit(group, *(PartitionCommit("t", p, 10 * i + p) for p in range(i % 3 + 1)))
        for i, group in enumerate(GROUPS[1:], start=1)
    ]
    frame = frame_from_requests(requests, 0, T0)  # type: ignore[arg-type]
    state = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG).state
    whole = snapshot_records(state)
    for chunk_rows in (1, 2, 5, 10_000):
        pieces = list(snapshot_record_chunks(state, chunk_rows))
        assert pa.concat_tables(pieces).to_pylist() == whole.to_pylist()
        groups = [set(piece["group_id"].to_pylist()) for piece in pieces]
        assert sum(map(len, groups)) == len(set().union(*groups))  # no group split
        if chunk_rows < whole["kind"].to_pylist().count("offset"):
            assert len(pieces) > 1
    assert list(snapshot_record_chunks(empty_shard(SHARD))) == []


def test_decode_request_messages_answers_what_does_not_decode() -> None:
    request = commit(G, PartitionCommit("t", 0, 7), PartitionCommit("t", 1, 8))
    raw = encode_request(request)
    frame = decode_request_messages(
        [(10, T0, raw), (11, T0 + 1, None), (12, T0 + 2, b""), (13, T0 + 3, bytearray(b"{"))]
    )
    want = frame_from_requests(
        [request, decode_request(None), decode_request(None), decode_request(b"{")],
        10,
        [T0, T0 + 1, T0 + 2, T0 + 3],
    )
    assert frame.equals(want)
    assert decode_request_messages([]).schema == want.schema


def test_cleanup_group_metadata_is_a_batch_without_requests() -> None:
    state = busy_shard()
    later = T0 + RETENTION
    empty = frame_from_requests([], 0, later)
    timer = cleanup_group_metadata(state, later, CONFIG)
    batch = apply_batch(state, empty, later, CONFIG)
    assert timer.records.num_rows > 0
    assert timer.records.equals(batch.records)
    assert timer.responses.schema == RESPONSE_FRAME_SCHEMA and timer.responses.num_rows == 0
    assert timer.next_expiry_ms == batch.next_expiry_ms
    assert shard_groups(timer.state) == shard_groups(batch.state)


# --- properties --------------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(PROPERTY_SETTINGS, max_examples=50)
@given(batches, st.randoms(use_true_random=False))
def test_batches_match_the_reference_one_request_at_a_time(
    batch_list: list, rnd: random.Random
) -> None:
    """(1) The shard applying random batches (rows shuffled, messages of random ages against
    random request timeouts) gives the reference's responses, state and next expiry; (2)
    replaying its records from empty rebuilds its state."""
    run = Run(SHARD, CONFIG)
    now = T0 + max(MESSAGE_AGES)
    for jump, requests in batch_list:
        now += jump * 10
        # Split into random sub-batches at the same clock: expiry runs at each batch start.
        cut = sorted(rnd.sample(range(len(requests) + 1), k=min(2, len(requests) + 1)))
        for part in (requests[: cut[0]], requests[cut[0] : cut[-1]], requests[cut[-1] :]):
            ages = [rnd.choice(MESSAGE_AGES) for _ in part]
            run.batch(part, now, shuffle_seed=rnd.randrange(1000), ages_ms=ages)
    assert shard_groups(run.replayed()) == shard_groups(run.state)


@PROPERTY_SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.lists(
                commits(simple=True)
                | st.builds(
                    OffsetDeleteRequest,
                    st.just("d"),
                    st.sampled_from(GROUPS),
                    st.lists(
                        st.builds(TopicPartition, st.sampled_from(["t", "u"]), st.integers(0, 2)),
                        max_size=2,
                    ).map(tuple),
                )
                | st.builds(DeleteGroupsRequest, st.just("x"), st.sampled_from(GROUPS)),
                max_size=10,
            ),
        ),
        max_size=8,
    )
)
def test_state_is_last_valid_commit_minus_deletes_and_expiries(batch_list: list) -> None:
    """(3) Without group metadata, the shard holds the last valid commit per key, minus deleted
    keys and groups and the keys whose retention passed."""
    state = empty_shard(SHARD, CONFIG)
    model: dict[tuple[str, str, int], tuple[int, int, int | None]] = {}  # -> (offset, ts, expire)
    now, offset = T0, 0
    for jump, requests in batch_list:
        now += jump * 400
        model = {
            k: v for k, v in model.items() if now < (v[2] if v[2] is not None else v[1] + RETENTION)
        }
        for r in requests:
            if r.timeout_ms == 0:
                continue  # the message's timestamp is the batch's: a 0 timeout has passed
            if isinstance(r, OffsetCommitRequest):
                groups_with_offsets = {k[0] for k in model}
                if r.generation_id >= 0:
                    continue  # a group without members accepts no generation
                for p in r.partitions:
                    if len(p.metadata.encode("utf-16-le")) // 2 <= CONFIG.offset_metadata_max_bytes:
                        expire_at = now + r.retention_time_ms if r.retention_time_ms != -1 else None
                        model[(r.group_id, p.topic, p.partition)] = (p.offset, now, expire_at)
                del groups_with_offsets
            elif isinstance(r, OffsetDeleteRequest):
                for tp in r.partitions:
                    model.pop((r.group_id, tp.topic, tp.partition), None)
            else:
                model = {k: v for k, v in model.items() if k[0] != r.group_id}
        result = apply_batch(state, frame_from_requests(requests, offset, now), now, CONFIG)
        state, offset = result.state, offset + len(requests)
        got = {
            (g, tp.topic, tp.partition): (v.offset, v.commit_timestamp_ms, v.expire_timestamp_ms)
            for g, s in snapshot(state).items()
            for tp, v in s.offsets.items()
        }
        assert got == model
    assert shard_groups(replay_records(empty_shard(SHARD, CONFIG), [])) == {}
