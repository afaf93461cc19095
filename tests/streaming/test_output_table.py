"""The state function's output table: built row by row for a small call and column by column
for a large one, the two equal for every kind of output row."""

from __future__ import annotations

import pyarrow as pa
import pytest

from state.coordinator.config import CoordinatorConfig
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import DeleteGroupsRequest, OffsetCommitRequest, PartitionCommit
from state.engine.request_frame import frame_from_requests
from state.shard import (
    apply_batch,
    decode_request_messages,
    empty_shard,
    encode_responses,
    snapshot_records,
)
from streaming.spark.output import OUTPUT_TABLE_SCHEMA
from streaming.spark.processor import (
    ROW_BY_ROW_UP_TO,
    _output_by_column,
    _output_by_row,
    _output_table,
    group_commits,
)

SHARD = 3
NOW_MS = 1_700_000_000_000


def groups_of_shard(count: int) -> list[str]:
    names = (f"group-{i}" for i in range(10_000))
    return [g for g in names if partition_for(g) == SHARD][:count]


def call_output(commits: int) -> tuple[list[tuple[str, pa.Table]], dict[str, int | None]]:
    """The parts and stats of a call with ``commits`` commits, a group deletion (tombstones), a
    request for another shard's group (NOT_COORDINATOR), a message that is no request (a dead
    letter), a rebuilt shard's records, a tenant's position and commits per group."""
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
    positions = pa.table(
        {"topic": [None, "tenant-in"], "partition": [1, 0], "next_offset": [42, 7]},
        schema=pa.schema(
            [("topic", pa.string()), ("partition", pa.int64()), ("next_offset", pa.int64())]
        ),
    )
    parts = [
        ("loaded", snapshot_records(loaded)),
        ("record", result.records),
        ("response", answers),
        ("dead_letter", dead),
        ("position", positions),
        ("group_commits", group_commits(result.responses)),
    ]
    stats = {"input_rows": frame.num_rows, "commits_applied": commits, "next_expiry_ms": None}
    return parts, stats


@pytest.mark.parametrize("commits", [1, 2, 80])
def test_row_by_row_and_column_builds_are_equal(commits: int) -> None:
    parts, stats = call_output(commits)
    assert {out for out, table in parts if table.num_rows} == {
        "loaded",
        "record",
        "response",
        "dead_letter",
        "position",
        "group_commits",
    }
    by_row = _output_by_row(SHARD, parts, stats)
    by_column = _output_by_column(SHARD, parts, stats)
    assert by_row.schema == OUTPUT_TABLE_SCHEMA
    assert by_row.equals(by_column)
    assert by_row["seq"].to_pylist() == list(range(by_row.num_rows))
    tombstones = by_row.filter(pa.compute.equal(by_row["out"], "record"))["is_tombstone"]
    # The deleted group's offset and its group record.
    assert tombstones.to_pylist().count(True) == 2


def test_the_call_size_picks_the_build() -> None:
    small, stats = call_output(2)
    large, _ = call_output(ROW_BY_ROW_UP_TO)
    assert sum(t.num_rows for _, t in small) < ROW_BY_ROW_UP_TO <= sum(t.num_rows for _, t in large)
    for parts in (small, large):
        tables = dict(parts)
        built = _output_table(
            SHARD,
            tables["loaded"],
            tables["record"],
            tables["response"],
            tables["dead_letter"],
            stats,
            tables["position"],
            tables["group_commits"],
        )
        assert built.equals(_output_by_column(SHARD, parts, stats))


@pytest.mark.parametrize("commits", [2, 80])
def test_records_of_a_state_of_several_partitions_carry_their_partition(commits: int) -> None:
    """A record's ``shard`` is its offsets-topic partition (the writer's), every other row's
    the call's shard; both builds agree."""
    parts, stats = call_output(commits)
    records = dict(parts)["record"]
    partitions = pa.array([SHARD + 10 * (i % 3) for i in range(records.num_rows)], pa.int32())
    by_row = _output_by_row(SHARD, parts, stats, partitions)
    assert by_row.equals(_output_by_column(SHARD, parts, stats, partitions))
    is_record = pa.compute.equal(by_row["out"], "record")
    assert by_row.filter(is_record)["shard"].to_pylist() == partitions.to_pylist()
    others = by_row.filter(pa.compute.invert(is_record))["shard"].to_pylist()
    assert others == [SHARD] * (by_row.num_rows - records.num_rows)
