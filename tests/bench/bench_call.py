"""Benchmark of a small shard call: the fixed cost of the state function, without Spark.

Run with ``python -m tests.bench.bench_call [--keys 4400] [--requests 2] [--partitions 1]
[--workers 1] [--calls 400]``. Each call is what the job's state function
(``streaming.spark.processor``) does for one shard of a small micro-batch: a shard of ``--keys``
offsets (220k keys over 50 shards by default), ``--requests`` OffsetCommits of ``--partitions``
partitions each to the shard's groups as ingest messages, the shard stored as the job stores it
(``streaming.spark.value_states``: head, base blob and log chunks, here in memory), the log chunk
written, the base rewritten when the log outgrows it, the responses and the output payload
built. ``--workers N``: each call runs in one of N Python workers at random, as Spark hands a
task to any idle worker: a worker that did not make the shard's last state replays the log after
the last state it kept, or decodes the base. PySpark's own per-call work (Arrow to pandas and
back, the state server's round trips) is not in it: the end-to-end benchmark measures that
beside the floor query.

Prints the median time per call and per section (the state function's profile sections) over
``--calls`` calls after a warm-up, on one core, with the log's bytes a call reads from the store:
the figure a small batch pays ~25 times per task.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from state.coordinator.config import CoordinatorConfig
from state.shard import blob_stamp
from streaming.spark import processor
from streaming.spark.processor import ProcessorSettings
from streaming.spark.shard_cache import DecodedShards
from streaming.spark.value_states import Head, ValueStateStore
from tests.bench.bench_e2e import read_sections
from tests.bench.bench_shard import KEYS_PER_GROUP, loaded_shard, shard_groups
from tests.bench.load import commit_json, partitions_json
from tests.bench.profiling.sitecustomize import install as install_profiling

SHARD = 0
NOW_MS = 2_000_000


def ingest_messages(call: int, requests: int, partitions: int, groups: list[str]) -> pd.DataFrame:
    """``requests`` commits of ``partitions`` partitions as the state function receives them."""
    first = call * requests
    return pd.DataFrame(
        {
            "ingest_offset": np.arange(first, first + requests, dtype=np.int64),
            "timestamp_ms": np.full(requests, NOW_MS, np.int64),
            "value": [
                commit_json(
                    f"r{call}-{i}",
                    groups[(first + i) % len(groups)],
                    "topic-1",
                    partitions_json(range(partitions), call),
                )
                for i in range(requests)
            ],
            "ingest_partition": np.zeros(requests, np.int32),
        }
    )


class MemoryValue:
    """A ``ValueState`` in memory."""

    def __init__(self, value: tuple[Any, ...] | None = None) -> None:
        self.value = value

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


class MemoryList:
    """A ``ListState`` in memory, counting the bytes read from it (the state server's)."""

    def __init__(self) -> None:
        self.rows: list[tuple[bytes, int]] = []
        self.bytes_read = 0

    def get(self) -> Iterator[tuple[bytes, int]]:
        self.bytes_read += sum(len(chunk) for chunk, _ in self.rows)
        return iter(list(self.rows))

    def appendValue(self, row: tuple[bytes, int]) -> None:
        self.rows.append(row)

    def clear(self) -> None:
        self.rows = []


class MemoryShard:
    """A shard's ``head``, ``base`` and ``log`` as the job keeps them, in memory."""

    def __init__(self, blob: bytes) -> None:
        stamp = blob_stamp(blob)
        self.head = MemoryValue(Head(stamp, stamp, 0, 0, len(blob)).row())
        self.base = MemoryValue((blob,))
        self.log = MemoryList()

    def store(self, call: int) -> ValueStateStore:
        return ValueStateStore(self.head, self.base, self.log, NOW_MS + call)  # type: ignore[arg-type]

    def base_stamp(self) -> int:
        assert self.head.value is not None
        return Head.of(self.head.value).base_stamp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=4400, help="offsets in the shard")
    parser.add_argument("--requests", type=int, default=2, help="commits per call")
    parser.add_argument("--partitions", type=int, default=1, help="partitions per commit")
    parser.add_argument("--workers", type=int, default=1, help="Python workers calls land on")
    parser.add_argument("--calls", type=int, default=400, help="timed calls")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()

    config = CoordinatorConfig()
    # Enough groups for --keys (each holds KEYS_PER_GROUP offsets), at least 50.
    groups = shard_groups(max(50, -(-args.keys // KEYS_PER_GROUP)))
    shard = MemoryShard(loaded_shard(groups, args.keys, config))
    settings = ProcessorSettings(
        coordinator=config,
        offsets_topic="offsets",
        bootstrap_servers="unused:9092",
        kafka_options={},
        load_from_offsets_topic=False,
        ingest_partitions=(2,),
    )
    workers = [DecodedShards() for _ in range(args.workers)]
    choose = random.Random(7).randrange
    shard_call = processor.make_shard_call(settings)
    counts: dict[str, int] = defaultdict(int)

    def call(index: int) -> tuple[float, float]:
        messages = ingest_messages(index, args.requests, args.partitions, groups)
        # The worker Spark runs this call in: its kept states are the module's cache.
        worker = processor._decoded = workers[choose(len(workers))]
        base, misses, read = shard.base_stamp(), worker.misses, shard.log.bytes_read
        started, cpu = time.perf_counter(), time.process_time()
        outputs = list(shard_call(SHARD, iter([messages]), shard.store(index)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert len(outputs) == 1
        counts["base_rewrites"] += shard.base_stamp() != base
        counts["base_decodes"] += worker.misses - misses
        counts["log_bytes_read"] += shard.log.bytes_read - read
        return elapsed, cpu

    for i in range(50):  # warm-up: imports, the workers' kept states
        call(i)
    counts.clear()
    timed = [call(i) for i in range(50, 50 + args.calls)]
    times = [elapsed for elapsed, _ in timed]
    # CPU time as well: on a shared machine it moves less than the wall clock.
    cpu_ms = statistics.median(cpu for _, cpu in timed) * 1000
    timed_counts = dict(counts)

    with tempfile.TemporaryDirectory() as profile_dir:
        install_profiling(profile_dir)
        shard_call = processor.make_shard_call(settings)
        for i in range(50 + args.calls, 50 + 2 * args.calls):
            call(i)
        sections: dict[str, list[float]] = defaultdict(list)
        for row in read_sections(Path(profile_dir)):
            for name, seconds in row.items():
                if name not in ("pid", "rows", "state_keys", "state_kept", "state_bytes_read"):
                    sections[name].append(seconds * 1000)

    per_call = statistics.median(times) * 1000
    means = {name: sum(values) / args.calls for name, values in sections.items()}
    print(
        f"a call of {args.requests} commits x {args.partitions} partitions on a shard of "
        f"{args.keys:,} offsets, {args.workers} worker(s): median {per_call:.2f} ms "
        f"({cpu_ms:.2f} ms CPU), mean "
        f"{statistics.mean(times) * 1000:.2f} (min {min(times) * 1000:.2f}, max "
        f"{max(times) * 1000:.2f}) over {args.calls} calls; {timed_counts.get('base_rewrites', 0)}"
        f" base rewrites, {timed_counts.get('base_decodes', 0)} base decodes, log read "
        f"{timed_counts.get('log_bytes_read', 0) / args.calls / 1024:,.1f} KB a call"
    )
    for name, ms in means.items():
        print(f"  {name:<18} {ms:6.2f} ms mean")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"per_call_ms": per_call, "cpu_ms": cpu_ms, "sections_mean_ms": means}
                | timed_counts
            )
        )


if __name__ == "__main__":
    main()
