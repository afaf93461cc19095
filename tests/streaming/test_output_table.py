"""The state function's output table (``streaming.spark.output.output_table``): every kind of
row a call makes, in order, each with its shard."""

from __future__ import annotations

import pyarrow as pa
import pytest

from state.coordinator.config import CoordinatorConfig
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import DeleteGroupsRequest, OffsetCommitRequest, PartitionCommit
from state.engine.request_frame import frame_from_requests
from state.shard import (
    ShardOutput,
    apply_batch,
    decode_request_messages,
    empty_shard,
    encode_responses,
    group_commits,
    snapshot_records,
)
from streaming.spark.output import OUTPUT_TABLE_SCHEMA, output_table

SHARD = 3
NOW_MS = 1_700_000_000_000


def groups_of_shard(count: int) -> list[str]:
    names = (f"group-{i}" for i in range(10_000))
    return [g for g in names if partition_for(g) == SHARD][:count]


def call_output(commits: int, record_partitions: pa.Array | None = None) -> ShardOutput:
    """A call with ``commits`` commits, a group deletion (tombstones), a request for another
    shard's group (NOT_COORDINATOR), a message that is no request (a dead letter), a rebuilt
    shard's records, a tenant's position (not carried: the writer reads Spark's) and commits per
    group."""
    config = CoordinatorConfig()
    mine = groups_of_shard(3)
    other = next(f"g{i}" for i in range(1000) if partition_for(f"g{i}") != SHARD)
    loaded = apply_batch(
        empty_shard(SHARD),
        frame_from_requests(
            [OffsetCommitRequest("seed", mine[2], (PartitionCommit("t", 0, 1, 4, "m"),))],
            timestamps=NOW_MS,
        ),
        NOW_MS,
        config,
    ).state
    requests = [
        OffsetCommitRequest(f"c{i}", mine[i % 2], (PartitionCommit(f"topic-{i}", i, i * 10),))
        for i in range(commits)
    ]
    requests += [
        DeleteGroupsRequest("d", mine[2]),
        OffsetCommitRequest("x", other, (PartitionCommit("t", 0, 1),)),
    ]
    frame = pa.concat_tables(
        [
            frame_from_requests(requests, timestamps=NOW_MS),
            decode_request_messages([(len(requests), NOW_MS, b"not a request")]),
        ],
        promote_options="permissive",
    )
    result = apply_batch(loaded, frame, NOW_MS, config)
    answers, dead = encode_responses(result.responses, SHARD)
    return ShardOutput(
        state=result.state,
        changed=True,
        records=result.records,
        record_partitions=record_partitions,
        loaded=snapshot_records(loaded),
        answers=answers,
        dead_letters=dead,
        group_commits=group_commits(result.responses),
        stats={"input_rows": frame.num_rows, "commits_applied": commits, "next_expiry_ms": None},
    )


KINDS = ["loaded", "record", "response", "dead_letter", "group_commits", "stats"]


@pytest.mark.parametrize("commits", [1, 2, 80])
def test_every_kind_of_row_in_order_with_its_columns(commits: int) -> None:
    out = call_output(commits)
    table = output_table(SHARD, out)
    assert table.schema == OUTPUT_TABLE_SCHEMA
    assert table["seq"].to_pylist() == list(range(table.num_rows))
    kinds = table["out"].to_pylist()
    assert list(dict.fromkeys(kinds)) == KINDS
    assert kinds.count("record") == out.records.num_rows
    assert kinds.count("response") == out.answers.num_rows
    assert table["shard"].to_pylist() == [SHARD] * table.num_rows
    records = table.filter(pa.compute.equal(table["out"], "record"))
    # The deleted group's offset and its group record.
    assert records["is_tombstone"].to_pylist().count(True) == 2
    assert records["value"].to_pylist() == out.records["value"].to_pylist()
    loaded = table.filter(pa.compute.equal(table["out"], "loaded"))
    # A loaded shard carries its decoded columns only (the sink's).
    assert loaded["offset"].to_pylist() == [1]
    assert loaded["value"].null_count == loaded.num_rows
    (stats,) = table.filter(pa.compute.equal(table["out"], "stats")).to_pylist()
    assert stats["commits_applied"] == commits
    assert stats["input_rows"] == out.stats["input_rows"]


@pytest.mark.parametrize("commits", [2, 80])
def test_records_of_a_state_of_several_partitions_carry_their_partition(commits: int) -> None:
    """A record's ``shard`` is its offsets-topic partition (the writer's), every other row's
    the call's shard."""
    records = call_output(commits).records
    partitions = pa.array([SHARD + 10 * (i % 3) for i in range(records.num_rows)], pa.int32())
    table = output_table(SHARD, call_output(commits, partitions))
    is_record = pa.compute.equal(table["out"], "record")
    assert table.filter(is_record)["shard"].to_pylist() == partitions.to_pylist()
    others = table.filter(pa.compute.invert(is_record))["shard"].to_pylist()
    assert others == [SHARD] * (table.num_rows - records.num_rows)
