"""TxnOffsetCommit (KIP-98, KIP-447) on the shard and the reference coordinator alike: validated
as an OffsetCommit but for Kafka's ``validateTransactionalOffsetCommit`` differences (the empty
group id refused; a commit naming no member nor generation taken by a group with members), no
retention, answered under its own api, stored as plain OffsetCommit records."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from state.coordinator.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourceType,
)
from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.model import MemberMetadata, OffsetAndMetadata, TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    GroupMetadataRequest,
    OffsetCommitRequest,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from state.formats.request_codec import encode_request
from state.shard import (
    ShardRules,
    apply_batch,
    decode_request_messages,
    empty_shard,
    frame_from_requests,
    handle_messages,
    snapshot,
)
from tests.state.coordinators import Coordinator, ReferenceAdapter, ShardCoordinator
from tests.state.harness import Run
from tests.state.strategies import GROUPS, OTHER_SHARD_GROUP, SHARD

RETENTION = 1000
CONFIG = CoordinatorConfig(offsets_retention_ms=RETENTION, offset_metadata_max_bytes=8)
G = GROUPS[0]
T0 = 10_000
P0 = PartitionCommit("t", 0, 5, 2, "m")


@pytest.fixture(params=[ShardCoordinator, ReferenceAdapter], ids=lambda c: c.name)
def coord(request: pytest.FixtureRequest) -> Coordinator:
    return request.param(SHARD, CONFIG)


def txn(group: str = G, *parts: PartitionCommit, **kw: object) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest("x", group, "tx-1", 4000, 0, parts or (P0,), **kw)  # type: ignore[arg-type]


def plain(request: TxnOffsetCommitRequest) -> OffsetCommitRequest:
    """The OffsetCommit with ``request``'s fields."""
    return OffsetCommitRequest(
        "c",
        request.group_id,
        request.partitions,
        request.generation_id,
        request.member_id,
        request.group_instance_id,
    )


def codes(answer: list[tuple]) -> list[int]:
    return [row[2] for row in answer]


#: A Stable group of generation 2: m1 (static "i1") and m2.
MEMBERS = GroupMetadataRequest(
    "gm", G, 2, members=(MemberMetadata("m1", "i1"), MemberMetadata("m2"))
)


def test_stored_as_an_offset_commit_record_and_answered_as_its_own_api() -> None:
    request = txn(G, P0, PartitionCommit("u", 1, 9))
    got = apply_batch(empty_shard(SHARD, CONFIG), frame_from_requests([request], 0, T0), T0, CONFIG)
    want = apply_batch(
        empty_shard(SHARD, CONFIG), frame_from_requests([plain(request)], 0, T0), T0, CONFIG
    )
    assert got.records.equals(want.records)  # the same key and value bytes
    assert got.responses["api"].to_pylist() == ["TxnOffsetCommit"] * 2
    assert got.responses["error_code"].to_pylist() == [0, 0]
    assert got.responses.drop_columns(["api", "request_id"]).equals(
        want.responses.drop_columns(["api", "request_id"])
    )


def test_empty_group_id_is_refused_though_an_offset_commit_takes_it(coord: Coordinator) -> None:
    """Kafka's ``commitTransactionalOffsets`` checks ``isGroupIdNotEmpty``; ``commitOffsets``
    takes "" for backward compatibility."""
    assert partition_for("") == SHARD
    request = txn("", P0, PartitionCommit("u", 0, 1))
    answers = coord.run([request, plain(request)], T0)
    assert [codes(a) for a in answers] == [[ErrorCode.INVALID_GROUP_ID] * 2, [0, 0]]
    assert set(coord.offsets("")) == {TopicPartition("t", 0), TopicPartition("u", 0)}
    assert coord.offsets("")[TopicPartition("t", 0)].commit_timestamp_ms == T0


@pytest.mark.parametrize(
    ("generation", "member", "instance", "code"),
    [
        (-1, "", None, ErrorCode.NONE),
        (-1, "m1", "i1", ErrorCode.NONE),
        (0, "", None, ErrorCode.ILLEGAL_GENERATION),
        (3, "m1", None, ErrorCode.ILLEGAL_GENERATION),
    ],
)
def test_a_group_that_does_not_exist_takes_a_negative_generation_only(
    coord: Coordinator, generation: int, member: str, instance: str | None, code: ErrorCode
) -> None:
    (answer,) = coord.run(
        [txn(G, generation_id=generation, member_id=member, group_instance_id=instance)], T0
    )
    assert codes(answer) == [code]
    assert coord.groups() == ({G} if code == ErrorCode.NONE else set())


@pytest.mark.parametrize(
    ("generation", "member", "instance", "plain_code", "txn_code"),
    [
        # The one difference: no member, generation or instance id. Kafka: "This does not apply
        # to transactional offset commits, since the older versions of this protocol do not
        # require member id and generation id."
        (-1, "", None, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.NONE),
        (2, "m2", None, ErrorCode.NONE, ErrorCode.NONE),
        (2, "m1", "i1", ErrorCode.NONE, ErrorCode.NONE),
        (1, "m2", None, ErrorCode.ILLEGAL_GENERATION, ErrorCode.ILLEGAL_GENERATION),
        (-1, "m2", None, ErrorCode.ILLEGAL_GENERATION, ErrorCode.ILLEGAL_GENERATION),
        (2, "zz", None, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID),
        (2, "zz", "i1", ErrorCode.FENCED_INSTANCE_ID, ErrorCode.FENCED_INSTANCE_ID),
        (-1, "", "i1", ErrorCode.FENCED_INSTANCE_ID, ErrorCode.FENCED_INSTANCE_ID),
        (2, "m2", "i9", ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID),
    ],
)
def test_a_group_with_members_checks_member_and_generation_unless_neither_is_named(
    coord: Coordinator,
    generation: int,
    member: str,
    instance: str | None,
    plain_code: ErrorCode,
    txn_code: ErrorCode,
) -> None:
    """The exact path (a group with members) answers as Kafka's ``ClassicGroup``, never
    REBALANCE_IN_PROGRESS."""
    request = txn(G, generation_id=generation, member_id=member, group_instance_id=instance)
    answers = coord.run([MEMBERS, plain(request), request], T0)
    assert [codes(a) for a in answers[1:]] == [[plain_code], [txn_code]]
    committed = coord.offsets(G)
    assert (TopicPartition("t", 0) in committed) == (ErrorCode.NONE in (plain_code, txn_code))


def test_a_group_without_members_answers_as_an_offset_commit(coord: Coordinator) -> None:
    """The fast path (no members): a negative generation writes; any other is UNKNOWN_MEMBER_ID
    once the group exists (here from the batch's first commit), ILLEGAL_GENERATION before."""
    answers = coord.run(
        [
            txn(G, generation_id=0, member_id="m"),
            txn(G, generation_id=-1, member_id="m"),
            txn(G, PartitionCommit("t", 1, 3), generation_id=0),
            txn(G, PartitionCommit("t", 1, 4)),
        ],
        T0,
    )
    assert [codes(a) for a in answers] == [
        [ErrorCode.ILLEGAL_GENERATION],
        [ErrorCode.NONE],
        [ErrorCode.UNKNOWN_MEMBER_ID],
        [ErrorCode.NONE],
    ]
    assert {tp: o.offset for tp, o in coord.offsets(G).items()} == {
        TopicPartition("t", 0): 5,
        TopicPartition("t", 1): 4,
    }


def test_no_retention_offsets_expire_after_the_configured_one(coord: Coordinator) -> None:
    coord.run([txn(G)], T0)
    assert coord.offsets(G) == {TopicPartition("t", 0): OffsetAndMetadata(5, 2, "m", T0, None)}
    assert coord.next_expiry_ms() == T0 + RETENTION
    coord.expire(T0 + RETENTION - 1)
    assert coord.offsets(G)
    coord.expire(T0 + RETENTION)
    assert coord.groups() == set()


def test_a_retention_in_a_txn_frame_row_is_ignored() -> None:
    """A frame built elsewhere may carry one; Kafka's TxnOffsetCommit has none."""
    frame = frame_from_requests([txn(G)], 0, T0)
    frame = frame.set_column(
        frame.schema.get_field_index("retention_time_ms"),
        "retention_time_ms",
        pa.array([5], pa.int64()),
    )
    result = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG)
    assert result.records["expire_timestamp_ms"].to_pylist() == [None]
    assert result.records["leader_epoch"].to_pylist() == [2]


@pytest.mark.parametrize("with_members", [False, True], ids=["fast", "exact"])
def test_partition_faults_as_an_offset_commit(coord: Coordinator, with_members: bool) -> None:
    request = txn(
        G,
        PartitionCommit("bad topic", 0, 1),
        PartitionCommit("t", -1, 1),
        PartitionCommit("t", 1, 1, -1, "x" * 9),  # over offset_metadata_max_bytes
        PartitionCommit("t", 2, 1),
    )
    answers = coord.run([MEMBERS, request] if with_members else [request], T0)
    assert codes(answers[-1]) == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.OFFSET_METADATA_TOO_LARGE,
        ErrorCode.NONE,
    ]
    assert set(coord.offsets(G)) == {TopicPartition("t", 2)}


def test_another_shards_group_is_not_coordinator(coord: Coordinator) -> None:
    answers = coord.run([txn(OTHER_SHARD_GROUP)], T0)
    assert [codes(a) for a in answers] == [[ErrorCode.NOT_COORDINATOR]]
    assert coord.groups() == set()


def test_no_deadline_refuses_a_transactions_commit_however_late() -> None:
    """Read only once its transaction committed, a TxnOffsetCommit is applied however long after
    its message's timestamp; an OffsetCommit of the same age is refused."""
    run = Run(SHARD, CONFIG)
    late = 10 * CONFIG.request_timeout_ms
    other = PartitionCommit("t", 1, 7)
    run.batch([txn(G), plain(txn(G, other))], T0 + late, ages_ms=[late, late])
    assert set(run.ref.groups[G].offsets) == {TopicPartition("t", 0)}


def test_mixed_with_other_apis_the_shard_answers_as_the_reference() -> None:
    run = Run(SHARD, CONFIG)
    run.batch([txn(G), MEMBERS, txn(G, generation_id=-1), plain(txn(G))], T0)
    run.batch([txn(G, generation_id=2, member_id="m2"), txn(G, generation_id=1)], T0 + 5)


# --- ACLs: WRITE on the transactional id, then READ on the group, then on each topic ----------


def _acl(
    resource: ResourceType, name: str, operation: AclOperation = AclOperation.READ
) -> AclBinding:
    return AclBinding(resource, PatternType.LITERAL, name, operation, AclPermissionType.ALLOW)


def test_acls_write_on_the_transactional_id_then_read_on_the_group_then_on_each_topic() -> None:
    request = txn(G, P0, PartitionCommit("u", 1, 6))
    frame = frame_from_requests([request], 0, T0)
    txn_id = _acl(ResourceType.TRANSACTIONAL_ID, "tx-1", AclOperation.WRITE)
    group_and_topics = [_acl(ResourceType.GROUP, G), _acl(ResourceType.TOPIC, "*")]
    # Kafka asks for the transactional id first: refused, the group is not even looked at.
    no_txn = Authorizer.of([_acl(ResourceType.TOPIC, "*")])
    refused = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG, authorizer=no_txn)
    assert refused.responses["error_code"].to_pylist() == [53, 53]
    assert refused.records.num_rows == 0
    without_txn = Authorizer.of(group_and_topics)
    refused = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG, authorizer=without_txn)
    assert refused.responses["error_code"].to_pylist() == [53, 53]
    topics_only = Authorizer.of([txn_id, _acl(ResourceType.TOPIC, "*")])
    refused = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG, authorizer=topics_only)
    assert refused.responses["error_code"].to_pylist() == [30, 30]
    assert refused.records.num_rows == 0
    group_and_t = Authorizer.of(
        [txn_id, _acl(ResourceType.GROUP, G), _acl(ResourceType.TOPIC, "t")]
    )
    partial = apply_batch(empty_shard(SHARD, CONFIG), frame, T0, CONFIG, authorizer=group_and_t)
    assert partial.responses["error_code"].to_pylist() == [0, 29]
    assert set(snapshot(partial.state)[G].offsets) == {TopicPartition("t", 0)}


def test_a_txn_offset_commit_naming_no_transactional_id_is_refused_not_given_txn_rules() -> None:
    """A frame's TxnOffsetCommit rows without a transactional id (the decoder already refuses
    such a message): INVALID_REQUEST on each partition, nothing applied, with or without ACLs."""
    frame = frame_from_requests([txn(G, P0, PartitionCommit("u", 1, 6))], 0, T0)
    for missing in (pa.nulls(2, pa.string()), pa.array(["", ""])):
        at = frame.schema.get_field_index("transactional_id")
        bare = frame.set_column(at, "transactional_id", missing)
        for authorizer in (
            None,
            Authorizer.of([_acl(ResourceType.TRANSACTIONAL_ID, "*", AclOperation.WRITE)]),
        ):
            result = apply_batch(
                empty_shard(SHARD, CONFIG), bare, T0, CONFIG, authorizer=authorizer
            )
            assert result.responses["error_code"].to_pylist() == [42, 42]
            assert "transactionalId: missing" in result.responses["error_reason"][0].as_py()
            assert result.records.num_rows == 0


# --- ingest messages to counters ---------------------------------------------------------------


def test_messages_are_decoded_applied_and_counted_as_commits() -> None:
    request = txn(G, P0, PartitionCommit("u", 0, 1))
    values = [encode_request(request), encode_request(plain(request))]
    frame = decode_request_messages([(i, T0, v) for i, v in enumerate(values)])
    assert frame["api"].to_pylist() == ["TxnOffsetCommit"] * 2 + ["OffsetCommit"] * 2
    assert pc.all(pc.equal(frame["retention_time_ms"], -1)).as_py()
    messages = pd.DataFrame({"ingest_offset": [0, 1], "timestamp_ms": [T0, T0], "value": values})
    out = handle_messages(SHARD, None, messages, T0, ShardRules(CONFIG))
    assert out.group_commits.to_pylist() == [{"group_id": G, "commits_applied": 4}]
    assert out.stats["commits_applied"] == 4
    assert out.stats["rejected"] == 0
    assert out.answers.num_rows == 2  # one answer per request
