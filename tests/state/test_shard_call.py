"""One call of a shard (``state.shard.handle_messages``), without Spark: ingest messages in, the
new state, records, answers, positions and counters out."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    OffsetCommitRequest,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from state.formats.request_codec import encode_request
from state.formats.response_codec import decode_response
from state.shard import (
    EXPIRY_TICK,
    LOAD_MARKER,
    OPERATOR,
    Authorizer,
    LoadedShard,
    ShardOutput,
    ShardRules,
    ShardState,
    apply_batch,
    empty_shard,
    frame_from_requests,
    handle_messages,
    snapshot,
)

RETENTION_MS = 1_000
T0 = 1_700_000_000_000
GROUP = "team-a.orders"
SHARD = partition_for(GROUP)
RULES = ShardRules(CoordinatorConfig(offsets_retention_ms=RETENTION_MS))
TENANT_RULES = ShardRules(
    RULES.coordinator, tenant_topics=("team-a.commits",), tenant_authorizers=(Authorizer(),)
)


def commit(request_id: str, offset: int, group: str = GROUP) -> bytes:
    return encode_request(
        OffsetCommitRequest(request_id, group, (PartitionCommit("orders", 0, offset),))
    )


def messages(*values: bytes, partition: int = SHARD, tenant: int | None = None) -> pd.DataFrame:
    """Ingest messages of one partition, at offsets 0, 1, ... appended at ``T0``."""
    columns: dict[str, list[object]] = {
        "ingest_partition": [partition] * len(values),
        "ingest_offset": list(range(len(values))),
        "timestamp_ms": [T0] * len(values),
        "value": list(values),
    }
    if tenant is not None:
        columns["tenant"] = [tenant] * len(values)
    return pd.DataFrame(columns)


def offsets(state: ShardState) -> dict[TopicPartition, int]:
    group = snapshot(state).get(GROUP)
    return {tp: o.offset for tp, o in group.offsets.items()} if group else {}


def answers(out: ShardOutput) -> dict[str, int]:
    """Each answered request's partition error code (request-level when it has none)."""
    decoded = [
        decode_response(key, value)
        for key, value in zip(
            out.answers["key"].to_pylist(), out.answers["value"].to_pylist(), strict=True
        )
    ]
    return {
        r.request_id: next(iter(r.partitions.values()))[0] if r.partitions else r.error_code
        for r in decoded
    }


def test_commits_are_applied_answered_and_counted() -> None:
    out = handle_messages(
        SHARD, None, messages(commit("a", 5), commit("b", 7), LOAD_MARKER), T0, RULES
    )
    assert out.changed
    assert offsets(out.state) == {TopicPartition("orders", 0): 7}
    assert answers(out) == {"a": 0, "b": 0}
    assert out.records["offset"].to_pylist() == [7]  # the last record per key, as compaction
    assert out.group_commits.to_pylist() == [{"group_id": GROUP, "commits_applied": 2}]
    assert out.stats["input_rows"] == 2  # the marker is no request
    assert out.stats["commits_applied"] == 2
    assert out.stats["rejected"] == 0
    assert out.stats["state_keys"] == 1
    assert out.stats["loaded_records"] is None
    assert out.loaded.num_rows == 0


def test_a_call_that_changes_nothing_keeps_the_state_it_was_given() -> None:
    state = handle_messages(SHARD, None, messages(commit("a", 5)), T0, RULES).state
    out = handle_messages(SHARD, state, messages(LOAD_MARKER), T0, RULES)
    assert not out.changed
    assert out.state is state
    assert out.records.num_rows == 0


def test_messages_are_applied_in_log_order() -> None:
    shuffled = messages(commit("a", 5), commit("b", 7)).iloc[::-1].reset_index(drop=True)
    out = handle_messages(SHARD, None, shuffled, T0, RULES)
    assert offsets(out.state) == {TopicPartition("orders", 0): 7}


def test_a_shard_without_state_is_loaded_once_and_given_to_the_sinks() -> None:
    seeded = apply_batch(
        empty_shard(SHARD),
        frame_from_requests(
            [OffsetCommitRequest("s", GROUP, (PartitionCommit("orders", 1, 3),))], timestamps=T0
        ),
        T0,
        RULES.coordinator,
    ).state
    loads: list[int] = []

    def load(shard: int) -> LoadedShard:
        loads.append(shard)
        return LoadedShard(seeded, 42)

    out = handle_messages(SHARD, None, messages(commit("a", 5)), T0, RULES, load)
    assert loads == [SHARD]
    assert out.stats["loaded_records"] == 42
    assert out.loaded["offset"].to_pylist() == [3]  # what was loaded, before the call
    assert offsets(out.state) == {TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 3}

    again = handle_messages(SHARD, out.state, messages(commit("b", 6)), T0, RULES, load)
    assert loads == [SHARD]
    assert again.loaded.num_rows == 0

    # Given a writer, the loaded records go to it in pieces, not in the output.
    pieces: list[pa.Table] = []
    written = handle_messages(SHARD, None, messages(commit("a", 5)), T0, RULES, load, pieces.append)
    assert pa.concat_tables(pieces).to_pylist() == out.loaded.to_pylist()
    assert written.loaded.num_rows == 0 and written.stats["loaded_records"] == 42
    assert offsets(written.state) == offsets(out.state)


def test_expiry_ticks_expire_only_from_the_jobs_own_topic() -> None:
    state = handle_messages(SHARD, None, messages(commit("a", 5)), T0, RULES).state
    later = T0 + RETENTION_MS + 1

    from_tenant = handle_messages(
        SHARD, state, messages(EXPIRY_TICK, tenant=0), later, TENANT_RULES
    )
    assert offsets(from_tenant.state) == {TopicPartition("orders", 0): 5}
    (dead,) = from_tenant.dead_letters["value"].to_pylist()
    assert b"unknown api 'ExpireOffsets'" in dead
    assert from_tenant.stats["rejected"] == 1

    from_job = handle_messages(
        SHARD, state, messages(EXPIRY_TICK, tenant=OPERATOR), later, TENANT_RULES
    )
    assert offsets(from_job.state) == {}
    assert from_job.stats["tombstones"] == from_job.records.num_rows > 0
    assert from_job.stats["input_rows"] == 0


def test_without_a_tick_nothing_expires() -> None:
    state = handle_messages(SHARD, None, messages(commit("a", 5)), T0, RULES).state
    out = handle_messages(SHARD, state, messages(LOAD_MARKER), T0 + 10 * RETENTION_MS, RULES)
    assert offsets(out.state) == {TopicPartition("orders", 0): 5}


def test_the_jobs_topic_is_applied_before_a_tenants_under_its_acls() -> None:
    both = pd.concat(
        [messages(commit("t", 9), tenant=0), messages(commit("j", 4), tenant=OPERATOR)],
        ignore_index=True,
    )
    out = handle_messages(SHARD, None, both, T0, TENANT_RULES)
    # The tenant may do nothing (no ACLs): its commit is refused, the job's applied.
    assert answers(out) == {"j": 0, "t": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    assert out.answers["tenant"].to_pylist() == [None, 0]
    assert offsets(out.state) == {TopicPartition("orders", 0): 4}
    assert out.stats["commits_applied"] == 1
    assert out.stats["rejected"] == 1


def test_a_message_on_another_ingest_partition_is_answered_not_coordinator() -> None:
    rules = ShardRules(RULES.coordinator, ingest_partitions=(10,))
    own, other = SHARD % 10, (SHARD + 1) % 10
    mixed = pd.concat(
        [messages(commit("mine", 5), partition=own), messages(commit("stray", 8), partition=other)],
        ignore_index=True,
    )
    mixed["ingest_offset"] = [0, 0]
    out = handle_messages(SHARD, None, mixed, T0, rules)
    assert answers(out) == {"mine": 0, "stray": ErrorCode.NOT_COORDINATOR}
    assert offsets(out.state) == {TopicPartition("orders", 0): 5}


def test_records_of_a_state_of_several_partitions_carry_their_partition() -> None:
    config = CoordinatorConfig(offsets_topic_partitions=50, state_shards=10)
    shard = config.state_shard_for(GROUP)
    out = handle_messages(shard, None, messages(commit("a", 5)), T0, ShardRules(config))
    assert out.record_partitions is not None
    assert set(out.record_partitions.to_pylist()) == {partition_for(GROUP)}
    assert out.record_partitions.type == pa.int32()


def test_a_txn_offset_commit_keyed_otherwise_than_by_its_group_is_a_dead_letter_naming_both() -> (
    None
):
    """As the job's query hands them (a ``key`` column): a TxnOffsetCommit under another key, a
    non-UTF-8 key or none is not applied and not answered but dead-lettered, its reason naming
    the key and the groupId; one keyed by its group, and an OffsetCommit under any key, apply."""

    def txn(request_id: str, offset: int) -> bytes:
        return encode_request(
            TxnOffsetCommitRequest(
                request_id, GROUP, "tx-1", 7, 0, (PartitionCommit("orders", 0, offset),)
            )
        )

    keyed = messages(txn("other", 1), txn("bytes", 2), txn("none", 3), txn("own", 4))
    keyed["key"] = [b"team-b.orders", b"\xff", None, GROUP.encode()]
    out = handle_messages(SHARD, None, keyed, T0, RULES)
    assert answers(out) == {"own": 0}
    assert offsets(out.state) == {TopicPartition("orders", 0): 4}
    reasons = [json.loads(v)["reason"] for v in out.dead_letters["value"].to_pylist()]
    assert out.dead_letters["ingest_offset"].to_pylist() == [0, 1, 2]
    assert "key 'team-b.orders'" in reasons[0] and f"groupId {GROUP!r}" in reasons[0]
    assert "key b'\\xff' (not UTF-8)" in reasons[1] and f"groupId {GROUP!r}" in reasons[1]
    assert "has no key" in reasons[2] and f"groupId {GROUP!r}" in reasons[2]
    plain = messages(commit("plain", 9))
    plain["key"] = [b"k"]
    assert answers(handle_messages(SHARD, None, plain, T0, RULES)) == {"plain": 0}
