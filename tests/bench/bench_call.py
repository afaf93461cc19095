"""Benchmark of a small shard call: the fixed cost of the state function, without Spark.

Run with ``python -m tests.bench.bench_call [--keys 4400] [--requests 2] [--calls 400]``. Each
call is what the job's state function (``streaming.spark.processor``) does for one shard of a small
micro-batch: a shard of ``--keys`` offsets (220k keys over 50 shards by default), ``--requests``
single-partition OffsetCommits as ingest messages, the state kept by the worker between calls
(as when Spark hands the same shard to the same Python worker), the new state encoded, the
responses and the output payload built. PySpark's own per-call work (Arrow to pandas and back,
the state row) is not in it: the end-to-end benchmark measures that beside the floor query.

Prints the median time per call and per section (the state function's profile sections) over
``--calls`` calls after a warm-up, on one core: the figure a small batch pays ~25 times per task.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from state.coordinator.config import CoordinatorConfig
from state.shard import ShardState
from streaming.spark import processor
from streaming.spark.processor import ProcessorSettings
from streaming.spark.shard_cache import DecodedShards
from tests.bench.bench_e2e import read_sections
from tests.bench.bench_shard import KEYS_PER_GROUP, loaded_shard, shard_groups
from tests.bench.load import commit_json, partitions_json
from tests.bench.profiling.sitecustomize import install as install_profiling

SHARD = 0
NOW_MS = 2_000_000


def ingest_messages(call: int, requests: int, groups: list[str]) -> pd.DataFrame:
    """``requests`` one-partition commits as the state function receives them from Spark."""
    first = call * requests
    return pd.DataFrame(
        {
            "ingest_offset": np.arange(first, first + requests, dtype=np.int64),
            "timestamp_ms": np.full(requests, NOW_MS, np.int64),
            "value": [
                commit_json(
                    f"r{call}-{i}", groups[i % len(groups)], "topic-1", partitions_json([i], call)
                )
                for i in range(requests)
            ],
            "ingest_partition": np.zeros(requests, np.int32),
        }
    )


class BlobStore:
    """A shard's state as one blob between calls (``streaming.spark.processor.StoredShard``)."""

    def __init__(self, blob: bytes, call: int) -> None:
        self.blob, self.call = blob, call

    def batch_time_ms(self) -> int:
        return NOW_MS + self.call

    def read(self, shards: DecodedShards) -> ShardState:
        return shards.decode(self.blob)

    def write(
        self, shards: DecodedShards, shard: int, state: ShardState, records: pa.Table
    ) -> None:
        self.blob = shards.encode(state, shard)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=4400, help="offsets in the shard")
    parser.add_argument("--requests", type=int, default=2, help="commits per call")
    parser.add_argument("--calls", type=int, default=400, help="timed calls")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()

    config = CoordinatorConfig()
    # Enough groups for --keys (each holds KEYS_PER_GROUP offsets), at least 50.
    groups = shard_groups(max(50, -(-args.keys // KEYS_PER_GROUP)))
    blob = loaded_shard(groups, args.keys, config)
    settings = ProcessorSettings(
        coordinator=config,
        offsets_topic="offsets",
        bootstrap_servers="unused:9092",
        kafka_options={},
        load_from_offsets_topic=False,
        ingest_partitions=(2,),
    )
    shard_call = processor.make_shard_call(settings)

    def call(index: int, blob: bytes) -> tuple[bytes, float]:
        messages = ingest_messages(index, args.requests, groups)
        store = BlobStore(blob, index)
        started = time.perf_counter()
        outputs = list(shard_call(SHARD, iter([messages]), store))
        elapsed = time.perf_counter() - started
        assert len(outputs) == 1
        return store.blob, elapsed

    for i in range(50):  # warm-up: imports, the worker's kept state
        blob, _ = call(i, blob)
    times = []
    for i in range(50, 50 + args.calls):
        blob, elapsed = call(i, blob)
        times.append(elapsed)

    with tempfile.TemporaryDirectory() as profile_dir:
        install_profiling(profile_dir, stores=(BlobStore,))
        shard_call = processor.make_shard_call(settings)
        for i in range(50 + args.calls, 50 + 2 * args.calls):
            blob, _ = call(i, blob)
        sections: dict[str, list[float]] = defaultdict(list)
        for row in read_sections(Path(profile_dir)):
            for name, seconds in row.items():
                if name not in ("pid", "rows", "state_keys", "state_kept"):
                    sections[name].append(seconds * 1000)

    per_call = statistics.median(times) * 1000
    medians = {name: statistics.median(values) for name, values in sections.items()}
    print(
        f"a call of {args.requests} commits on a shard of {args.keys:,} offsets: "
        f"median {per_call:.2f} ms (min {min(times) * 1000:.2f}, max {max(times) * 1000:.2f}) "
        f"over {args.calls} calls"
    )
    for name, ms in medians.items():
        print(f"  {name:<18} {ms:6.2f} ms")
    if args.json:
        args.json.write_text(json.dumps({"per_call_ms": per_call, "sections_ms": medians}))


if __name__ == "__main__":
    main()
