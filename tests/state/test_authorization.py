"""Tenants' ACLs: Kafka's ``StandardAuthorizer`` decisions (``state.coordinator.acls``) and the
shard's answers to a tenant's requests (``state.engine.apply.authorization``): a TxnOffsetCommit's
transactional id first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then the group
(GROUP_AUTHORIZATION_FAILED, nothing applied), then each topic (TOPIC_AUTHORIZATION_FAILED for
those partitions only), the rest applied as if the refused parts had never been sent."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.coordinator.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourceType,
    authorized_txn_partitions,
)
from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.requests import (
    DeleteGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    Request,
    TxnOffsetCommitRequest,
)
from state.shard import apply_batch, empty_shard, frame_from_requests, snapshot
from tests.state.strategies import (
    GROUPS,
    SHARD,
    TOPICS,
    commits,
    group_deletes,
    offset_deletes,
    txn_commits,
)

GROUP, TOPIC, TXN_ID = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID
READ, DELETE, DESCRIBE = AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE
WRITE = AclOperation.WRITE
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
CONFIG = CoordinatorConfig()
T0 = 1_700_000_000_000
G, H = GROUPS[0], GROUPS[1]


def acl(
    resource: ResourceType,
    pattern: PatternType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
) -> AclBinding:
    return AclBinding(resource, pattern, name, operation, permission)


# --- Kafka's decisions -------------------------------------------------------------------------


def test_no_binding_denies() -> None:
    assert not Authorizer().authorize(GROUP, "g", READ)


def test_literal_prefixed_and_wildcard_patterns_match_as_in_kafka() -> None:
    auth = Authorizer.of(
        [
            acl(GROUP, LITERAL, "payments", READ),
            acl(GROUP, PREFIXED, "team-a.", READ),
            acl(TOPIC, LITERAL, "*", READ),
        ]
    )
    assert auth.authorize(GROUP, "payments", READ)
    assert not auth.authorize(GROUP, "payments-2", READ)  # LITERAL is the exact name
    assert auth.authorize(GROUP, "team-a.orders", READ)
    assert auth.authorize(GROUP, "team-a.", READ)  # a prefix matches itself
    assert not auth.authorize(GROUP, "team-b.orders", READ)
    assert auth.authorize(TOPIC, "anything", READ)  # "*" as a LITERAL name: every name
    assert not auth.authorize(GROUP, "*", DELETE)


def test_deny_wins_over_allow() -> None:
    auth = Authorizer.of(
        [
            acl(GROUP, PREFIXED, "team-a.", AclOperation.ALL),
            acl(GROUP, LITERAL, "team-a.billing", READ, DENY),
        ]
    )
    assert auth.authorize(GROUP, "team-a.orders", READ)
    assert not auth.authorize(GROUP, "team-a.billing", READ)
    # A DENY of READ denies READ only: DELETE stays allowed by the ALL.
    assert auth.authorize(GROUP, "team-a.billing", DELETE)


def test_describe_is_implied_by_allowed_read_and_delete_but_not_denied_by_them() -> None:
    auth = Authorizer.of([acl(GROUP, LITERAL, "g", READ), acl(GROUP, LITERAL, "h", DELETE)])
    assert auth.authorize(GROUP, "g", DESCRIBE) and auth.authorize(GROUP, "h", DESCRIBE)
    assert not auth.authorize(GROUP, "g", DELETE)
    deny_read = Authorizer.of(
        [acl(GROUP, LITERAL, "g", AclOperation.ALL), acl(GROUP, LITERAL, "g", READ, DENY)]
    )
    assert deny_read.authorize(GROUP, "g", DESCRIBE)
    deny_all = Authorizer.of(
        [acl(GROUP, LITERAL, "g", READ), acl(GROUP, PREFIXED, "g", AclOperation.ALL, DENY)]
    )
    assert not deny_all.authorize(GROUP, "g", DESCRIBE)


def test_bindings_parse_from_configuration_naming_the_bad_field() -> None:
    binding = AclBinding.parse(
        {
            "resource_type": "group",
            "pattern_type": "PREFIXED",
            "resource_name": "team-a.",
            "operation": "read",
            "permission_type": "ALLOW",
        }
    )
    assert binding == acl(GROUP, PREFIXED, "team-a.", READ)
    assert AclBinding.parse(binding.as_dict()) == binding
    good = binding.as_dict()
    with pytest.raises(ValueError, match=r"tenants\[0\].acls\[1\]: operation: 'WRTE' is not one"):
        AclBinding.parse(good | {"operation": "WRTE"}, "tenants[0].acls[1]: ")
    with pytest.raises(ValueError, match="missing permission_type"):
        AclBinding.parse({k: v for k, v in good.items() if k != "permission_type"})
    with pytest.raises(ValueError, match="unknown keys \\['principal'\\]"):
        AclBinding.parse(good | {"principal": "User:a"})
    with pytest.raises(ValueError, match="resource_name"):
        AclBinding.parse(good | {"resource_name": ""})
    with pytest.raises(ValueError, match="wildcard only with pattern_type LITERAL"):
        AclBinding.parse(good | {"resource_name": "*"})


def test_transactional_ids_match_literal_prefixed_and_deny_as_in_kafka() -> None:
    auth = Authorizer.of(
        [
            acl(TXN_ID, PREFIXED, "team-a.", WRITE),
            acl(TXN_ID, LITERAL, "team-a.payments", WRITE, DENY),
            acl(TXN_ID, LITERAL, "shared-txn", WRITE),
            acl(GROUP, LITERAL, "*", READ),  # another resource type: no transactional id
        ]
    )
    assert auth.authorize(TXN_ID, "team-a.orders", WRITE)
    assert auth.authorize(TXN_ID, "team-a.orders", DESCRIBE)  # WRITE implies DESCRIBE
    assert not auth.authorize(TXN_ID, "team-a.payments", WRITE)  # DENY wins
    assert auth.authorize(TXN_ID, "shared-txn", WRITE)
    assert not auth.authorize(TXN_ID, "shared-txn-2", WRITE)
    assert not auth.authorize(TXN_ID, "team-b.orders", WRITE)
    assert not auth.authorize(TXN_ID, "team-a.orders", READ)
    assert Authorizer.of([acl(TXN_ID, LITERAL, "*", WRITE)]).authorize(TXN_ID, "any", WRITE)


def test_a_transactional_id_binding_parses_and_refuses_an_operation_no_api_asks_for() -> None:
    table = {
        "resource_type": "transactional_id",
        "pattern_type": "PREFIXED",
        "resource_name": "team-a.",
        "operation": "WRITE",
        "permission_type": "ALLOW",
    }
    assert AclBinding.parse(table) == acl(TXN_ID, PREFIXED, "team-a.", WRITE)
    with pytest.raises(
        ValueError, match=r"tenants\[1\]\.acls\[0\]: operation: READ is not an operation on TRANS"
    ):
        AclBinding.parse(table | {"operation": "read"}, "tenants[1].acls[0]: ")


# --- the shard's answers -----------------------------------------------------------------------


def _apply(requests: list[Request], authorizer: Authorizer | None):  # type: ignore[no-untyped-def]
    frame = frame_from_requests(requests, 0, T0)
    return apply_batch(empty_shard(SHARD), frame, T0, CONFIG, authorizer=authorizer)


def _codes(result) -> list[tuple[int, str | None, int | None, int]]:  # type: ignore[no-untyped-def]
    return [
        (r["ingest_offset"], r["topic"], r["partition"], r["error_code"])
        for r in result.responses.to_pylist()
    ]


def test_a_commit_to_a_group_outside_the_rules_gets_30_on_every_partition_and_writes_nothing() -> (
    None
):
    auth = Authorizer.of([acl(GROUP, LITERAL, H, READ), acl(TOPIC, LITERAL, "*", READ)])
    request = OffsetCommitRequest("r", G, (PartitionCommit("t", 0, 5), PartitionCommit("u", 1, 6)))
    result = _apply([request], auth)
    assert _codes(result) == [(0, "t", 0, 30), (0, "u", 1, 30)]
    assert result.records.num_rows == 0 and snapshot(result.state).get(G) is None


def test_a_topic_the_tenant_may_not_read_gets_29_for_those_partitions_only() -> None:
    auth = Authorizer.of([acl(GROUP, LITERAL, G, READ), acl(TOPIC, PREFIXED, "t", READ)])
    request = OffsetCommitRequest("r", G, (PartitionCommit("t", 0, 5), PartitionCommit("u", 1, 6)))
    result = _apply([request], auth)
    assert _codes(result) == [(0, "t", 0, 0), (0, "u", 1, 29)]
    committed = snapshot(result.state)[G].offsets
    assert set(committed) == {TopicPartition("t", 0)}


def test_offset_delete_and_delete_groups_need_delete_on_the_group() -> None:
    read_only = Authorizer.of([acl(GROUP, LITERAL, G, READ), acl(TOPIC, LITERAL, "*", READ)])
    setup = OffsetCommitRequest("c", G, (PartitionCommit("t", 0, 5),))
    deletes: list[Request] = [
        setup,
        OffsetDeleteRequest("d", G, (TopicPartition("t", 0),)),
        DeleteGroupsRequest("dg", G),
    ]
    result = _apply(deletes, read_only)
    assert _codes(result) == [(0, "t", 0, 0), (1, None, None, 30), (2, None, None, 30)]
    assert TopicPartition("t", 0) in snapshot(result.state)[G].offsets
    allowed = Authorizer.of([*read_only.bindings, acl(GROUP, LITERAL, G, DELETE)])
    result = _apply(deletes[:2], allowed)
    assert [c for *_, c in _codes(result)] == [0, 0]
    assert snapshot(result.state).get(G) is None  # its only offset deleted
    result = _apply([setup, deletes[2]], allowed)
    assert [c for *_, c in _codes(result)] == [0, 0]
    assert snapshot(result.state).get(G) is None


def _txn(group: str, transactional_id: str, *parts: PartitionCommit) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest("x", group, transactional_id, 7, 0, parts)


def test_a_txn_offset_commit_needs_write_on_its_transactional_id_before_anything_else() -> None:
    """53 on every partition of a refused request, before the group and topics are looked at
    (the group here is refused too); an allowed one goes on to the group and topic checks."""
    t0, u1 = PartitionCommit("t", 0, 5), PartitionCommit("u", 1, 6)
    auth = Authorizer.of(
        [
            acl(TXN_ID, PREFIXED, "app-", WRITE),
            acl(TXN_ID, LITERAL, "app-denied", WRITE, DENY),
            acl(GROUP, LITERAL, G, READ),
            acl(TOPIC, LITERAL, "t", READ),
        ]
    )
    requests: list[Request] = [
        _txn(G, "other", t0, u1),
        _txn(H, "app-denied", t0),  # H refused too: 53 comes first
        _txn(G, "app-1", t0, u1),
        _txn(H, "app-2", t0),
    ]
    result = _apply(requests, auth)
    assert _codes(result) == [
        (0, "t", 0, 53),
        (0, "u", 1, 53),
        (1, "t", 0, 53),
        (2, "t", 0, 0),
        (2, "u", 1, 29),
        (3, "t", 0, 30),
    ]
    assert set(snapshot(result.state)[G].offsets) == {TopicPartition("t", 0)}
    assert snapshot(result.state).get(H) is None
    # A plain OffsetCommit asks nothing of a transactional id.
    plain = OffsetCommitRequest("p", G, (t0,))
    assert _codes(_apply([plain], Authorizer.of(auth.bindings[2:]))) == [(0, "t", 0, 0)]


def test_authorized_txn_partitions_are_what_kafka_lets_a_txn_offset_commit_commit() -> None:
    """The rule open-transaction reads use (``authorized_txn_partitions``), by hand."""
    t0, t1, u1 = PartitionCommit("t", 0, 5), PartitionCommit("t", 1, 5), PartitionCommit("u", 1, 6)
    request = _txn(G, "app-1", t0, t1, u1)
    every = {TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 1)}
    assert authorized_txn_partitions(None, request) == every  # the operators': no rules
    rules = [acl(TXN_ID, PREFIXED, "app-", WRITE), acl(GROUP, LITERAL, G, READ)]
    assert authorized_txn_partitions(Authorizer.of(rules), request) == frozenset()  # no topic
    with_t = Authorizer.of([*rules, acl(TOPIC, LITERAL, "t", READ)])
    assert authorized_txn_partitions(with_t, request) == every - {TopicPartition("u", 1)}
    assert authorized_txn_partitions(with_t, _txn(H, "app-1", t0)) == frozenset()  # group
    assert authorized_txn_partitions(with_t, _txn(G, "other", t0)) == frozenset()  # txn id


def test_without_an_authorizer_nothing_is_checked() -> None:
    request = OffsetCommitRequest("r", G, (PartitionCommit("t", 0, 5),))
    assert _codes(_apply([request], None)) == [(0, "t", 0, 0)]
    assert _codes(_apply([request], Authorizer())) == [(0, "t", 0, 30)]


# --- a property: a tenant's batch is the batch of what its ACLs allow --------------------------

bindings = (
    st.builds(
        AclBinding,
        resource_type=st.sampled_from([GROUP, TOPIC]),
        pattern_type=st.just(LITERAL),
        resource_name=st.sampled_from([*GROUPS, *TOPICS, "*"]),
        operation=st.sampled_from([READ, DELETE, AclOperation.ALL, DESCRIBE]),
        permission_type=st.sampled_from([ALLOW, ALLOW, DENY]),
    )
    | st.builds(
        AclBinding,
        resource_type=st.just(TXN_ID),
        pattern_type=st.sampled_from([LITERAL, PREFIXED]),
        resource_name=st.sampled_from(["tx-1", "tx-2", "tx-"]),
        operation=st.sampled_from([WRITE, AclOperation.ALL, DESCRIBE]),
        permission_type=st.sampled_from([ALLOW, ALLOW, DENY]),
    )
    | st.builds(
        AclBinding,
        resource_type=st.sampled_from([GROUP, TOPIC]),
        pattern_type=st.just(PREFIXED),
        resource_name=st.sampled_from(["g", "t", "u", GROUPS[0][:2]]),
        operation=st.sampled_from([READ, DELETE, AclOperation.ALL]),
        permission_type=st.sampled_from([ALLOW, ALLOW, DENY]),
    )
)


def _allowed_part(request: Request, auth: Authorizer) -> Request | None:
    """What Kafka hands its coordinator of ``request`` under ``auth`` (None: nothing)."""
    if isinstance(request, TxnOffsetCommitRequest) and not auth.authorize(
        TXN_ID, request.transactional_id, WRITE
    ):
        return None
    if isinstance(request, OffsetCommitRequest | TxnOffsetCommitRequest):
        if not auth.authorize(GROUP, request.group_id, READ):
            return None
        parts = tuple(p for p in request.partitions if auth.authorize(TOPIC, p.topic, READ))
        return (
            None
            if request.partitions and not parts
            else dataclasses.replace(request, partitions=parts)
        )
    if isinstance(request, OffsetDeleteRequest):
        if not auth.authorize(GROUP, request.group_id, DELETE):
            return None
        tps = tuple(tp for tp in request.partitions if auth.authorize(TOPIC, tp.topic, READ))
        return (
            None
            if request.partitions and not tps
            else OffsetDeleteRequest(request.request_id, request.group_id, tps)
        )
    assert isinstance(request, DeleteGroupsRequest)
    return request if auth.authorize(GROUP, request.group_id, DELETE) else None


@settings(max_examples=150, deadline=None)
@given(
    requests=st.lists(
        commits(simple=True) | txn_commits(simple=True) | offset_deletes() | group_deletes(),
        min_size=1,
        max_size=12,
    ),
    rules=st.lists(bindings, max_size=6),
)
def test_a_tenant_batch_applies_exactly_what_its_acls_allow(
    requests: list[Request], rules: list[AclBinding]
) -> None:
    auth = Authorizer.of(rules)
    checked = _apply(requests, auth)
    allowed = [r for r in (_allowed_part(r, auth) for r in requests) if r is not None]
    plain = _apply(allowed, None)
    assert snapshot(checked.state) == snapshot(plain.state)
    assert checked.records.to_pylist() == plain.records.to_pylist()
    for row in checked.responses.to_pylist():
        request = requests[row["ingest_offset"]]
        if row["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            assert isinstance(request, TxnOffsetCommitRequest)
            assert not auth.authorize(TXN_ID, request.transactional_id, WRITE)
        elif row["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            assert _allowed_part(request, auth) is None
        elif row["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            assert not auth.authorize(TOPIC, row["topic"], READ)
    # The rule open-transaction reads use agrees: a TxnOffsetCommit's partitions that pass the
    # ACLs are exactly ``authorized_txn_partitions``.
    refusals = {53, 30, 29}
    for i, request in enumerate(requests):
        if isinstance(request, TxnOffsetCommitRequest) and request.partitions:
            passed = {
                TopicPartition(row["topic"], row["partition"])
                for row in checked.responses.to_pylist()
                if row["ingest_offset"] == i and row["error_code"] not in refusals
            }
            assert passed == authorized_txn_partitions(auth, request)
