"""Hypothesis strategies: request sequences over a small world of groups, topics and members, so
that requests collide on the same keys (rewinds, deletes of committed offsets, member checks)."""

from __future__ import annotations

from hypothesis import strategies as st

from state.coordinator.model import MemberMetadata, TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from state.coordinator.rules import MAX_PARTITIONS_PER_TOPIC

PARTITIONS = 50


def _same_shard_groups(count: int) -> tuple[int, list[str], str]:
    """``count`` group ids of one shard, that shard, and a group id of another shard. The shard
    is the empty group id's, so that "" (a group OffsetCommit and DeleteGroups take) meets the
    others."""
    shard = partition_for("", PARTITIONS)
    same = [g for g in (f"g{i}" for i in range(10_000)) if partition_for(g, PARTITIONS) == shard]
    other = next(g for g in (f"x{i}" for i in range(1000)) if partition_for(g, PARTITIONS) != shard)
    return shard, same[:count], other


SHARD, GROUPS, OTHER_SHARD_GROUP = _same_shard_groups(3)
TOPICS = ["t", "u"]
BAD_TOPICS = ["", "..", "bad topic"]
MEMBER_IDS = ["m1", "m2"]

group_ids = st.sampled_from(GROUPS) | st.sampled_from(["", OTHER_SHARD_GROUP])
good_groups = st.sampled_from(GROUPS)
topics = st.sampled_from(TOPICS) | st.sampled_from(BAD_TOPICS)
#: Small indexes, and the edges of the job's cap on partition indexes (and of int32).
partitions = st.integers(-1, 2) | st.sampled_from(
    [MAX_PARTITIONS_PER_TOPIC - 1, MAX_PARTITIONS_PER_TOPIC, 2**31 - 1]
)
metadata = st.sampled_from(["", "meta", "x" * 20, "é" * 5])
#: Requests' own timeouts (None: the coordinator's default), against message ages
#: (``MESSAGE_AGES``) below, at and past them.
timeouts = st.sampled_from([None, None, None, 0, 30, 100_000])
#: How long before its batch a request's message was appended: the test draws one per request.
MESSAGE_AGES = [0, 0, 0, 20, 30, 50, 70_000]


@st.composite
def commits(draw: st.DrawFn, simple: bool = False) -> OffsetCommitRequest:
    parts = draw(
        st.lists(
            st.builds(
                PartitionCommit,
                topic=st.sampled_from(TOPICS) if simple else topics,
                partition=st.integers(0, 2) if simple else partitions,
                offset=st.integers(-1, 100),
                leader_epoch=st.integers(-1, 3),
                metadata=metadata,
            ),
            max_size=3,
        )
    )
    return OffsetCommitRequest(
        request_id=f"c{draw(st.integers(0, 10**6))}",
        group_id=draw(good_groups if simple else group_ids),
        partitions=tuple(parts),
        generation_id=draw(st.sampled_from([-1, -1, 0, 1, 2])),
        member_id=draw(st.sampled_from(["", *MEMBER_IDS])),
        group_instance_id=draw(st.sampled_from([None, None, "i1"])),
        retention_time_ms=draw(st.sampled_from([-1, -1, 0, -5, 40, 150])),
        timeout_ms=draw(timeouts),
    )


@st.composite
def txn_commits(draw: st.DrawFn, simple: bool = False) -> TxnOffsetCommitRequest:
    """A commit's fields in a TxnOffsetCommit (its retention dropped: it has none)."""
    c = draw(commits(simple))
    return TxnOffsetCommitRequest(
        request_id=f"x{c.request_id}",
        group_id=c.group_id,
        transactional_id=draw(st.sampled_from(["tx-1", "tx-2"])),
        producer_id=draw(st.integers(0, 2**63 - 1)),
        producer_epoch=draw(st.integers(0, 2**15 - 1)),
        partitions=c.partitions,
        generation_id=c.generation_id,
        member_id=c.member_id,
        group_instance_id=c.group_instance_id,
    )


@st.composite
def offset_deletes(draw: st.DrawFn) -> OffsetDeleteRequest:
    tps = draw(st.lists(st.builds(TopicPartition, topics, partitions), max_size=3))
    return OffsetDeleteRequest(
        f"d{draw(st.integers(0, 10**6))}", draw(group_ids), tuple(tps), draw(timeouts)
    )


@st.composite
def group_deletes(draw: st.DrawFn) -> DeleteGroupsRequest:
    return DeleteGroupsRequest(f"x{draw(st.integers(0, 10**6))}", draw(group_ids), draw(timeouts))


members = st.builds(
    MemberMetadata,
    member_id=st.sampled_from(MEMBER_IDS),
    group_instance_id=st.sampled_from([None, "i1"]),
    subscribed_topics=st.sampled_from([(), ("t",), ("t", "u")]),
)


@st.composite
def group_metadata(draw: st.DrawFn) -> GroupMetadataRequest:
    ms = draw(st.lists(members, max_size=2, unique_by=lambda m: m.member_id))
    return GroupMetadataRequest(
        request_id=f"m{draw(st.integers(0, 10**6))}",
        group_id=draw(group_ids),
        generation_id=draw(st.integers(0, 2)),
        protocol_type=draw(st.sampled_from(["consumer", "consumer", "connect"])),
        protocol=draw(st.sampled_from([None, "range"])),
        leader=ms[0].member_id if ms else None,
        members=tuple(ms),
        timeout_ms=draw(timeouts),
    )


requests = st.one_of(
    commits(),
    commits(),
    commits(simple=True),
    txn_commits(),
    txn_commits(simple=True),
    offset_deletes(),
    group_deletes(),
    group_metadata(),
)
# Batches that are commit-only for groups without members exercise the vectorized path.
commit_batches = st.lists(commits(simple=True) | txn_commits(simple=True), min_size=1, max_size=12)
mixed_batches = st.lists(requests, max_size=12)
batches = st.lists(
    st.tuples(st.sampled_from([0, 0, 10, 60, 200]), commit_batches | mixed_batches), max_size=8
)
