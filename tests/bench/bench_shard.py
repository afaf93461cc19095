"""Benchmark of one shard call: apply an 8k-row commit batch, encode and decode the state blob.

Run with ``python -m tests.bench.bench_shard [--keys 20000 200000 2000000] [--rounds 12]``. Each
round is what the streaming job does per shard and micro-batch: decode the blob, apply the batch,
encode the new state. Batches commit to existing groups without members, 90% to existing keys and
10% to new ones, so the shard grows and its delta gets merged as it would in production.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa

from state.coordinator.config import CoordinatorConfig
from state.coordinator.partitioner import partition_for
from state.engine.shard_state import compact
from state.shard import (
    REQUEST_FRAME_SCHEMA,
    apply_batch,
    decode_state,
    empty_shard,
    encode_state,
    replay_records,
)

SHARD = 0
TOPICS_PER_GROUP = 10
PARTITIONS_PER_TOPIC = 10
KEYS_PER_GROUP = TOPICS_PER_GROUP * PARTITIONS_PER_TOPIC
BATCH_ROWS = 8000


def shard_groups(count: int) -> list[str]:
    """The first ``count`` group names of the form ``consumer-group-<i>`` that map to ``SHARD``."""
    groups: list[str] = []
    i = 0
    while len(groups) < count:
        name = f"consumer-group-{i}"
        if partition_for(name) == SHARD:
            groups.append(name)
        i += 1
    return groups


def loaded_shard(groups: list[str], keys: int, config: CoordinatorConfig) -> bytes:
    """The blob of a shard holding ``keys`` offsets, as if loaded from the offsets topic."""
    n_groups = keys // KEYS_PER_GROUP
    g = np.repeat(np.arange(n_groups), KEYS_PER_GROUP)
    t = np.tile(np.repeat(np.arange(TOPICS_PER_GROUP), PARTITIONS_PER_TOPIC), n_groups)
    p = np.tile(np.arange(PARTITIONS_PER_TOPIC), n_groups * TOPICS_PER_GROUP)
    n = len(g)
    table = pa.table(
        {
            "kind": pa.array(["offset"] * n),
            "group_id": pa.array(groups[:n_groups]).take(pa.array(g)),
            "topic": pa.array([f"topic-{i}" for i in range(TOPICS_PER_GROUP)]).take(pa.array(t)),
            "partition": pa.array(p, pa.int32()),
            "offset": pa.array(np.arange(n), pa.int64()),
            "leader_epoch": pa.array(np.zeros(n), pa.int32()),
            "metadata": pa.array([""] * n),
            "commit_timestamp_ms": pa.array(np.full(n, 1_000_000), pa.int64()),
            "expire_timestamp_ms": pa.nulls(n, pa.int64()),
        }
    )
    state = compact(replay_records(empty_shard(SHARD, config), table))
    return encode_state(state)


def commit_batch(
    groups: list[str], keys: int, start_offset: int, now_ms: int, rng: np.random.Generator
) -> pa.Table:
    """``BATCH_ROWS`` single-partition commits from groups without members."""
    n_groups = keys // KEYS_PER_GROUP
    g = rng.integers(0, n_groups, BATCH_ROWS)
    t = rng.integers(0, TOPICS_PER_GROUP, BATCH_ROWS)
    # Partitions >= PARTITIONS_PER_TOPIC are new keys.
    p = np.where(
        rng.random(BATCH_ROWS) < 0.9,
        rng.integers(0, PARTITIONS_PER_TOPIC, BATCH_ROWS),
        rng.integers(PARTITIONS_PER_TOPIC, 1_000_000, BATCH_ROWS),
    )
    n = BATCH_ROWS
    columns = {
        "ingest_offset": pa.array(start_offset + np.arange(n), pa.int64()),
        "partition_index": pa.array(np.zeros(n), pa.int32()),
        "timestamp_ms": pa.array(np.full(n, now_ms), pa.int64()),
        "api": pa.array(["OffsetCommit"] * n),
        "request_id": pa.array([f"r{start_offset + i}" for i in range(n)]),
        "group_id": pa.array(groups[:n_groups]).take(pa.array(g)),
        "generation_id": pa.array(np.full(n, -1), pa.int32()),
        "member_id": pa.array([""] * n),
        "group_instance_id": pa.nulls(n, pa.string()),
        "retention_time_ms": pa.array(np.full(n, -1), pa.int64()),
        "topic": pa.array([f"topic-{i}" for i in range(TOPICS_PER_GROUP)]).take(pa.array(t)),
        "partition": pa.array(p, pa.int32()),
        "offset": pa.array(rng.integers(0, 10**9, n), pa.int64()),
        "leader_epoch": pa.array(np.zeros(n), pa.int32()),
        "metadata": pa.array([""] * n),
        "members_json": pa.nulls(n, pa.string()),
        "error_code": pa.array(np.zeros(n), pa.int16()),
        "error_reason": pa.nulls(n, pa.string()),
    }
    return pa.Table.from_pydict(columns, schema=REQUEST_FRAME_SCHEMA)


def bench(keys: int, rounds: int, groups: list[str]) -> None:
    """Time ``rounds`` shard calls on a shard of ``keys`` offsets and print the medians."""
    config = CoordinatorConfig()
    rng = np.random.default_rng(7)
    blob = loaded_shard(groups, keys, config)
    now = 2_000_000
    frames = [commit_batch(groups, keys, i * BATCH_ROWS, now, rng) for i in range(rounds)]
    decode_ms, apply_ms, encode_ms, sizes = [], [], [], []
    for frame in frames:
        t0 = time.perf_counter()
        state = decode_state(blob)
        t1 = time.perf_counter()
        result = apply_batch(state, frame, now, config)
        t2 = time.perf_counter()
        blob = encode_state(result.state)
        t3 = time.perf_counter()
        assert result.records.num_rows > 0 and result.responses.num_rows == BATCH_ROWS
        decode_ms.append((t1 - t0) * 1e3)
        apply_ms.append((t2 - t1) * 1e3)
        encode_ms.append((t3 - t2) * 1e3)
        sizes.append(len(blob))
    final = decode_state(blob)

    def stats(values: list[float]) -> str:
        return f"median {statistics.median(values):7.1f}  max {max(values):7.1f}"

    print(
        f"{keys:>9,} keys ({final.num_offsets:,} after {rounds} batches): "
        f"apply ms {stats(apply_ms)} | decode ms {stats(decode_ms)} | "
        f"encode ms {stats(encode_ms)} | blob {statistics.median(sizes) / 1e6:.1f} MB"
    )


def main() -> None:
    """Run the benchmark for each ``--keys`` size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[20_000, 200_000, 2_000_000])
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    groups = shard_groups(max(args.keys) // KEYS_PER_GROUP)
    print(f"{BATCH_ROWS} commit rows per batch, {args.rounds} batches per size")
    for keys in args.keys:
        bench(keys, args.rounds, groups)


if __name__ == "__main__":
    main()
