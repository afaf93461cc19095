"""A shard that holds several offsets-topic partitions (``CoordinatorConfig.state_shards``)
answers and writes exactly what one shard per partition would, and refuses the groups of the
partitions it does not hold."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from state.coordinator.config import CoordinatorConfig
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import Request
from state.shard import (
    apply_batch,
    empty_shard,
    frame_from_requests,
    record_partitions,
    replay_records,
)
from tests.state.harness import responses_by_offset, shard_groups
from tests.state.strategies import GROUPS, OTHER_SHARD_GROUP, PARTITIONS, SHARD, batches

STATE_SHARDS = 5
HELD = SHARD % STATE_SHARDS
#: Another partition the same state holds, and a group of it.
NEIGHBOUR = (SHARD + STATE_SHARDS) % PARTITIONS
NEIGHBOUR_GROUP = next(
    g for g in (f"n{i}" for i in range(10_000)) if partition_for(g, PARTITIONS) == NEIGHBOUR
)
#: A group of a partition the state does not hold.
FOREIGN_GROUP = next(
    g
    for g in (f"f{i}" for i in range(10_000))
    if partition_for(g, PARTITIONS) % STATE_SHARDS != HELD
)
#: The strategies' groups, moved so that the batches span two partitions of the state and one
#: it does not hold.
MOVED = {GROUPS[1]: NEIGHBOUR_GROUP, OTHER_SHARD_GROUP: FOREIGN_GROUP}

BASE = CoordinatorConfig(offsets_retention_ms=1000, offset_metadata_max_bytes=8)
COMBINED = dataclasses.replace(BASE, state_shards=STATE_SHARDS)


def moved(request: Request) -> Request:
    group = getattr(request, "group_id", None)
    return dataclasses.replace(request, group_id=MOVED.get(group, group))  # type: ignore[type-var]


def test_config_places_partitions_in_states() -> None:
    assert COMBINED.shard_count == STATE_SHARDS and BASE.shard_count == PARTITIONS
    assert list(COMBINED.partitions_of(2)) == list(range(2, PARTITIONS, STATE_SHARDS))
    assert list(BASE.partitions_of(7)) == [7]
    for group in (*GROUPS, NEIGHBOUR_GROUP, FOREIGN_GROUP, ""):
        partition = partition_for(group, PARTITIONS)
        assert BASE.state_shard_for(group) == partition
        assert COMBINED.state_shard_for(group) == partition % STATE_SHARDS
        assert partition in COMBINED.partitions_of(COMBINED.state_shard_for(group))


@pytest.mark.parametrize("state_shards", [0, 3, 7, 51, True])
def test_state_shards_must_divide_partitions(state_shards: int) -> None:
    with pytest.raises(ValueError, match="state_shards must divide offsets_topic_partitions"):
        CoordinatorConfig(state_shards=state_shards)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(batches)
def test_a_state_of_several_partitions_is_the_shards_of_each(
    runs: list[tuple[int, list[Request]]],
) -> None:
    """Every request is answered as the shard of its group's partition answers it (a group of
    a partition the state does not hold: NOT_COORDINATOR); the records are theirs, each with its
    group's partition; the state holds their groups, and replaying the records rebuilds it."""
    combined = empty_shard(HELD, COMBINED)
    apart = {p: empty_shard(p, BASE) for p in COMBINED.partitions_of(HELD)}
    start, now, written = 0, 10_000, []
    for advance, requests in runs:
        now += advance
        requests = [moved(r) for r in requests]
        frame = frame_from_requests(requests, start, now)
        result = apply_batch(combined, frame, now, COMBINED)
        combined = result.state
        answers = responses_by_offset(result.responses)
        theirs = {}
        records = []
        for partition, state in apart.items():
            each = apply_batch(state, frame, now, BASE)
            apart[partition] = each.state
            theirs[partition] = responses_by_offset(each.responses)
            records.append(each.records)
        for i, request in enumerate(requests):
            group = getattr(request, "group_id", None)
            partition = partition_for(group, PARTITIONS) if isinstance(group, str) else None
            # A group of a partition the state does not hold (or no valid group): as a shard
            # that does not hold it either answers.
            owner = partition if partition in apart else SHARD
            assert answers.get(start + i, []) == theirs[owner].get(start + i, []), request
        expected = pa.concat_tables(records)
        assert sorted(result.records.to_pylist(), key=repr) == sorted(
            expected.to_pylist(), key=repr
        )
        partitions = record_partitions(result.records, COMBINED)
        assert partitions is not None
        assert partitions.to_pylist() == [
            partition_for(g, PARTITIONS) for g in result.records["group_id"].to_pylist()
        ]
        written.append(result.records)
        start += len(requests)
    union = {}
    for state in apart.values():
        union.update(shard_groups(state))
    assert shard_groups(combined) == union
    if written:
        rebuilt = replay_records(empty_shard(HELD, COMBINED), pa.concat_tables(written))
        assert shard_groups(rebuilt) == union


def test_one_partition_per_state_needs_no_record_partitions() -> None:
    frame = frame_from_requests([], 0, 0)
    assert record_partitions(apply_batch(empty_shard(SHARD), frame, 0, BASE).records, BASE) is None
