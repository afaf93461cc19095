"""Benchmark the sinks: upserts/s for big batches and OffsetFetch latency.

Run from the repository root::

    python -m tests.bench.bench_sinks [--rows 200000] [--postgres-url URL | --no-postgres]

Each sink gets a batch of ``--rows`` new keys (inserts), then a batch updating all of them, the
last 1% as tombstones (updates), then a batch updating them in a shuffled order, as a job's batch
of many small commits arrives (updates, log order); each timed as a whole ``write_batch`` call
(validation, dedupe, conversion and the one transaction). Then it times ``fetch_offsets`` for one
group of 100 partitions: all partitions (``partitions=None``) and the 100 listed.

PostgreSQL is ``--postgres-url`` (or env ``POSTGRES_URL``), else a throwaway local server with
fsync on; the tables get a unique prefix and are dropped afterwards. Not collected by pytest
(the name does not start with ``test_``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

from connectors.sinks import BatchProgress, Sink, open_sink
from state.coordinator.model import TopicPartition
from state.formats.frames import RECORD_FRAME_SCHEMA

PARTITIONS_PER_GROUP = 100


def offset_frame(rows: int, offset: int, tombstones: float = 0.0) -> pa.Table:
    """``rows`` offset records over groups of 100 partitions; the last ``tombstones`` share of
    the rows (whole groups at the end) are tombstones."""
    index = np.arange(rows)
    tomb = index >= rows - int(rows * tombstones)
    groups = pa.array([f"bench-group-{i // PARTITIONS_PER_GROUP:06d}" for i in index])
    value = pa.array(np.full(rows, b"v", dtype=object), pa.binary())
    return pa.table(
        {
            "kind": pa.array(np.full(rows, "offset", dtype=object), pa.string()),
            "group_id": groups,
            "topic": pa.array(np.full(rows, "bench-topic", dtype=object), pa.string()),
            "partition": pa.array(index % PARTITIONS_PER_GROUP, pa.int32()),
            "offset": pa.array(np.full(rows, offset, dtype=np.int64), mask=tomb),
            "leader_epoch": pa.array(np.full(rows, 5, dtype=np.int32), mask=tomb),
            "metadata": pa.array(np.full(rows, "", dtype=object), pa.string(), mask=tomb),
            "commit_timestamp_ms": pa.array(np.full(rows, 1_700_000_000_000), mask=tomb),
            "expire_timestamp_ms": pa.nulls(rows, pa.int64()),
            "generation": pa.nulls(rows, pa.int32()),
            "members": pa.nulls(rows, pa.int32()),
            "key": pa.array(np.full(rows, b"k", dtype=object), pa.binary()),
            "value": pa.array(value.to_pylist(), pa.binary(), mask=tomb),
        },
        schema=RECORD_FRAME_SCHEMA,
    )


def _timed_write(sink: Sink, batch_id: int, records: pa.Table) -> float:
    started = time.perf_counter()
    assert sink.write_batch(batch_id, records, BatchProgress(batch_id, {0: batch_id}))
    return time.perf_counter() - started


def _percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[98] * 1000


def bench(name: str, sink: Sink, rows: int, fetches: int) -> None:
    inserts, updates = offset_frame(rows, 1), offset_frame(rows, 2, tombstones=0.01)
    shuffled = offset_frame(rows, 3).take(np.random.default_rng(7).permutation(rows))
    for batch_id, (label, records) in enumerate(
        (("insert", inserts), ("update", updates), ("update, log order", shuffled))
    ):
        took_s = _timed_write(sink, batch_id, records)
        rate = f"{rows / took_s:>9,.0f} rows/s"
        print(f"{name:<22} {label:<17} {rows:>7} rows: {took_s:6.2f} s = {rate}")

    group = f"bench-group-{(rows // PARTITIONS_PER_GROUP) // 2:06d}"
    listed = [TopicPartition("bench-topic", p) for p in range(PARTITIONS_PER_GROUP)]
    for label, partitions in (("all", None), ("listed", listed)):
        for _ in range(50):  # warm caches and prepared statements
            sink.fetch_offsets(group, partitions)
        samples = []
        for _ in range(fetches):
            started = time.perf_counter()
            answers = sink.fetch_offsets(group, partitions)
            samples.append(time.perf_counter() - started)
        assert len(answers) == PARTITIONS_PER_GROUP
        p50, p99 = _percentiles(samples)
        print(f"{name:<22} fetch 100 partitions ({label:<6}): p50 {p50:.3f} ms, p99 {p99:.3f} ms")


@contextmanager
def _postgres(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from tests.fixtures.postgres import local_postgres

    with local_postgres(durable=True) as local:
        yield local


def _drop_prefixed(url: str, prefix: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        for (name,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            " AND starts_with(tablename, %s)",
            (prefix,),
        ).fetchall():
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--fetches", type=int, default=2_000)
    parser.add_argument("--postgres-url", default=os.environ.get("POSTGRES_URL"))
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--postgres-executemany",
        action="store_true",
        help="also time PostgreSQL with COPY disabled (executemany) for comparison",
    )
    args = parser.parse_args(argv)

    with (
        tempfile.TemporaryDirectory(prefix="bench-sinks-") as tmp,
        open_sink(f"sqlite:///{Path(tmp) / 'bench.db'}") as sink,
    ):
        bench("sqlite", sink, args.rows, args.fetches)

    if args.no_postgres:
        return
    with ExitStack() as stack:
        url = stack.enter_context(_postgres(args.postgres_url))
        variants = [("postgres (COPY)", {})]
        if args.postgres_executemany:
            variants.append(("postgres (executemany)", {"copy_threshold": 2**62}))
        for name, options in variants:
            prefix = f"bench_{uuid.uuid4().hex[:8]}_"
            try:
                with open_sink(url, table_prefix=prefix, **options) as sink:
                    bench(name, sink, args.rows, args.fetches)
            finally:
                _drop_prefixed(url, prefix)


if __name__ == "__main__":
    main()
