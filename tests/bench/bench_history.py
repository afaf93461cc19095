"""Benchmark a micro-batch's sink write with the commit history on, and beside its thinning.

Run from the repository root::

    python -m tests.bench.bench_history [--keys 4000] [--batches 100] [--batch-commits 2000]
        [--backlog-hours 2] [--backlog-every-s 30] [--round-batches 5]
        [--chunk-rows N] [--pause-ms MS] [--postgres-url URL | --no-postgres]

Per sink (SQLite file, PostgreSQL), ``write_batch`` of ``--batch-commits`` commits over
``--keys`` group-partitions stamped now, timed per micro-batch (p50 / p95 / max) in three arms:

1. history off (``keep_history=False``);
2. history on, no retention thread;
3. history on with ``HistoryRetention`` running (check interval 1 s) over a history holding a
   thinning backlog: before the arms, one commit per key every ``--backlog-every-s`` over the
   last ``--backlog-hours``. One thread, started after the backlog, its sink's calls held at a
   gate outside this arm's rounds: its first pass over the backlog (as after a start or an
   outage: the worst case) goes on across them, and each round's batches start once it is
   deleting. Its chunks (thinning read, fenced delete) are timed as they run;
   ``--chunk-rows`` / ``--pause-ms`` try other chunks and pauses than the retention's.

The arms share one database (the same tables and sizes, so they differ only in the history and
the thread) and run interleaved in rounds of ``--round-batches`` (1, 2, 3, 1, 2, 3, ...), so a
loaded machine's drift falls on every arm alike. The writer holds the deployment's lease and
the thread's sink is fenced by it, as in the job.

PostgreSQL is ``--postgres-url`` (or env ``POSTGRES_URL``), else a throwaway local server with
fsync on; the tables get a unique prefix and are dropped afterwards. Not collected by pytest
(the name does not start with ``test_``).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from connectors.sinks import BatchProgress, Sink, open_sink, retention
from connectors.sinks.retention import DEFAULT_HISTORY_RETENTION_MS, HistoryRetention
from connectors.sinks.values import now_ms
from state.formats.frames import RECORD_FRAME_SCHEMA
from tests.bench.bench_sinks import _drop_prefixed, _postgres

PARTITIONS_PER_GROUP = 100
ARMS = ("1 history off", "2 history on", "3 history on, thinning")
LEASE = "bench-history"
#: How long a round of arm 3 waits for its thread's first delete before timing anyway.
FIRST_DELETE_WAIT_S = 30.0


def commit_frame(keys: np.ndarray, offsets: np.ndarray, stamps: np.ndarray) -> pa.Table:
    """Offset commits of group-partitions ``keys`` (groups of 100 partitions of one topic) in
    RECORD_FRAME_SCHEMA, one row per key with its offset and commit time."""
    rows = len(keys)
    names = pa.array([f"bench-group-{g:05d}" for g in range(int(keys.max()) // 100 + 1)])
    return pa.table(
        {
            "kind": pa.array(np.full(rows, "offset", dtype=object), pa.string()),
            "group_id": names.take(pa.array(keys // PARTITIONS_PER_GROUP)),
            "topic": pa.array(np.full(rows, "bench-topic", dtype=object), pa.string()),
            "partition": pa.array(keys % PARTITIONS_PER_GROUP, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "leader_epoch": pa.array(np.full(rows, 5, dtype=np.int32)),
            "metadata": pa.array(np.full(rows, "", dtype=object), pa.string()),
            "commit_timestamp_ms": pa.array(stamps, pa.int64()),
            "expire_timestamp_ms": pa.nulls(rows, pa.int64()),
            "generation": pa.nulls(rows, pa.int32()),
            "members": pa.nulls(rows, pa.int32()),
            "key": pa.array(np.full(rows, b"k", dtype=object), pa.binary()),
            "value": pa.array(np.full(rows, b"v", dtype=object), pa.binary()),
        },
        schema=RECORD_FRAME_SCHEMA,
    )


def _timed_write(sink: Sink, batch_id: int, records: pa.Table) -> tuple[float, float]:
    """The batch's (start, end) on ``time.perf_counter``."""
    started = time.perf_counter()
    assert sink.write_batch(batch_id, records, BatchProgress(batch_id, {0: batch_id}))
    return started, time.perf_counter()


class Gate:
    """The retention thread's sink with a gate: its calls pass only while the gate is open
    (arm 3's rounds) and a closed gate waits for the call in progress, so no other arm runs
    beside the thread. Each fenced delete is logged (start, end, rows) and each thinning read
    timed."""

    #: The sink methods a retention pass calls.
    CALLS = ("purge_history", "reclaim_space", "history_since_batch", "thinnable_history")

    def __init__(self) -> None:
        self.deletes: list[tuple[float, float, int]] = []
        self.reads: list[float] = []
        #: Set as a delete of some rows starts.
        self.deleting = threading.Event()
        self._open = False
        self._busy = 0
        self._changed = threading.Condition()

    def open(self) -> None:
        with self._changed:
            self._open = True
            self._changed.notify_all()

    def close(self) -> None:
        """Close the gate once the call in progress has returned."""
        with self._changed:
            self._open = False
            self._changed.wait_for(lambda: self._busy == 0)

    def _through(self, call: Callable[..., Any], *args: Any) -> Any:
        with self._changed:
            self._changed.wait_for(lambda: self._open)
            self._busy += 1
        try:
            return call(*args)
        finally:
            with self._changed:
                self._busy -= 1
                self._changed.notify_all()

    def watch(self, writer: Sink) -> Sink:
        """``writer`` with its retention calls gated and its deletes and reads timed."""
        calls = {name: getattr(writer, name) for name in self.CALLS}
        calls["thinnable_history"] = self._timed_read(calls["thinnable_history"])
        calls["delete_history"] = self._timed_delete(writer.delete_history)
        for name, call in calls.items():
            setattr(writer, name, functools.partial(self._through, call))
        return writer

    def _timed_read(self, read: Callable[..., list[tuple[int, int]]]) -> Callable[..., Any]:
        def timed(*args: Any) -> list[tuple[int, int]]:
            started = time.perf_counter()
            keys = read(*args)
            self.reads.append(time.perf_counter() - started)
            return keys

        return timed

    def _timed_delete(
        self, delete: Callable[[Sequence[tuple[int, int]]], int]
    ) -> Callable[..., int]:
        def timed(keys: Sequence[tuple[int, int]]) -> int:
            if keys:
                self.deleting.set()
            started = time.perf_counter()
            count = delete(keys)
            if keys:
                self.deletes.append((started, time.perf_counter(), count))
            return count

        return timed


@dataclass
class History:
    """Rows per group-partition of the history table: total, mean and max."""

    rows: int
    mean: float
    most: int


class Bench:
    """The three arms on one sink's tables."""

    def __init__(self, url: str, prefix: str, args: argparse.Namespace) -> None:
        self.url, self.prefix, self.args = url, prefix, args
        self.next_batch = 0
        self.offset = 0
        self.keys = np.arange(args.keys)
        self.samples: dict[str, list[tuple[float, float]]] = {arm: [] for arm in ARMS}
        self.gate = Gate()

    def open(self, keep_history: bool) -> Sink:
        return open_sink(self.url, table_prefix=self.prefix, keep_history=keep_history)

    def write(self, sink: Sink, records: pa.Table) -> tuple[float, float]:
        batch_id, self.next_batch = self.next_batch, self.next_batch + 1
        return _timed_write(sink, batch_id, records)

    def fill_backlog(self, sink: Sink) -> tuple[int, float]:
        """One commit per key every ``--backlog-every-s`` over the last ``--backlog-hours``,
        in batches of 10 minutes of commits; the rows written and the seconds taken."""
        every_ms = self.args.backlog_every_s * 1000
        now = now_ms()
        slots = int(self.args.backlog_hours * 3_600_000 // every_ms)
        per_batch = max(1, 600_000 // every_ms)
        started, written = time.perf_counter(), 0
        for first in range(0, slots, per_batch):
            slot = np.arange(first, min(slots, first + per_batch))
            # Key by key, in time order: the history's per-key indexes fill in order (a third
            # less CPU than time slot by slot); log order within a key is time order all the same.
            keys = np.repeat(self.keys, len(slot))
            slot = np.tile(slot, len(self.keys))
            records = commit_frame(keys, slot, now - (slots - slot) * every_ms)
            self.write(sink, records)
            written += records.num_rows
        self.offset = slots
        return written, time.perf_counter() - started

    def batch(self) -> pa.Table:
        """The next micro-batch: ``--batch-commits`` keys in turn, stamped now."""
        commits = self.args.batch_commits
        start = (self.offset * commits) % len(self.keys)
        keys = self.keys[(start + np.arange(commits)) % len(self.keys)]
        self.offset += 1
        return commit_frame(keys, np.full(commits, self.offset), np.full(commits, now_ms()))

    def round(self, arm: str, sink: Sink, batches: int) -> None:
        for _ in range(batches):
            records = self.batch()
            self.samples[arm].append(self.write(sink, records))

    def thinning_round(self, sink: Sink, batches: int) -> None:
        """The gate opened; once the thread deletes, the round's batches; the gate closed."""
        self.gate.deleting.clear()
        self.gate.open()
        try:
            self.gate.deleting.wait(FIRST_DELETE_WAIT_S)
            self.round(ARMS[2], sink, batches)
        finally:
            self.gate.close()

    def history(self) -> History:
        table = f'"{self.prefix}offset_commit_history"'
        query = (
            f"SELECT sum(n), avg(n), max(n) FROM (SELECT count(*) AS n FROM {table}"
            ' GROUP BY group_id, topic, "partition") AS per_key'
        )
        if self.url.startswith("sqlite"):
            import sqlite3

            with closing(sqlite3.connect(self.url.removeprefix("sqlite:///"))) as conn:
                total, mean, most = conn.execute(query).fetchone()
        else:
            import psycopg

            with psycopg.connect(self.url) as conn:
                found = conn.execute(query).fetchone()
                assert found is not None
                total, mean, most = found
        return History(int(total), float(mean), int(most))

    def run(self) -> tuple[int, float, History, History]:
        """Fill the backlog, then the arms in rounds; (backlog rows, its seconds, history
        before, history after)."""
        args = self.args
        with self.open(True) as on, self.open(False) as off, self.open(True) as writer:
            assert on.acquire_lease(LEASE, "bench-history", 3_600_000) is not None
            fence = on.fence
            assert fence is not None
            off.fence_writes(*fence)
            writer.fence_writes(*fence)  # the thread's, as the job's (closed by its stop too)
            thread = HistoryRetention(
                lambda: self.gate.watch(writer), DEFAULT_HISTORY_RETENTION_MS, 1000
            )
            backlog, backlog_s = self.fill_backlog(on)
            before = self.history()
            thread.start()  # its sink's calls wait at the gate
            try:
                done = 0
                while done < args.batches:
                    n = min(args.round_batches, args.batches - done)
                    self.round(ARMS[0], off, n)
                    self.round(ARMS[1], on, n)
                    self.thinning_round(on, n)
                    done += n
                after = self.history()
            finally:
                self.gate.open()
                thread.stop(timeout_s=120)
            on.release_lease()
        return backlog, backlog_s, before, after


def _ms(seconds: Sequence[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[94] * 1000, max(seconds) * 1000


def _during_deletes(batches: Sequence[tuple[float, float]], gate: Gate) -> list[bool]:
    """Whether a delete chunk ran during each batch."""
    return [any(s < end and e > start for s, e, _ in gate.deletes) for start, end in batches]


def _p50(seconds: Sequence[float]) -> str:
    return f"{statistics.median(seconds) * 1000:.0f} ms" if seconds else "-"


def report(name: str, bench: Bench, results: tuple[int, float, History, History]) -> list[str]:
    """Print the history's figures; the table's rows of this sink."""
    backlog, backlog_s, before, after = results
    lines = []
    for arm in ARMS:
        p50, p95, most = _ms([end - start for start, end in bench.samples[arm]])
        lines.append(f"| {name} | {arm} | {p50:.1f} | {p95:.1f} | {most:.1f} |")
    gate = bench.gate
    deleted = sum(n for _, _, n in gate.deletes)
    holds = [e - s for s, e, _ in gate.deletes]
    arm3 = bench.samples[ARMS[2]]
    during = _during_deletes(arm3, gate)
    beside = [e - s for (s, e), d in zip(arm3, during, strict=True) if d]
    apart = [e - s for (s, e), d in zip(arm3, during, strict=True) if not d]
    print(
        f"{name}: backlog {backlog:,} rows written in {backlog_s:.0f} s; history rows per"
        f" group-partition before arm 3 {before.mean:.0f} (max {before.most}), after"
        f" {after.mean:.0f} (max {after.most}); {before.rows:,} → {after.rows:,} rows"
    )
    print(
        f"{name}: the thread deleted {deleted:,} rows in {len(holds)} chunks (delete"
        f" transaction p50 {_p50(holds)}, max {max(holds, default=0) * 1000:.0f} ms; thinning"
        f" read p50 {_p50(gate.reads)}); arm-3 batches with a delete running: {len(beside)} of"
        f" {len(arm3)}, p50 {_p50(beside)} (the others {_p50(apart)})"
    )
    return lines


def _thin_with(chunk_rows: int | None, pause_ms: float | None) -> None:
    """The retention thread's passes thin with these chunks and pauses (this process only)."""
    options: dict[str, Any] = {}
    if chunk_rows is not None:
        options["chunk_rows"] = chunk_rows
    if pause_ms is not None:
        options["pause_s"] = pause_ms / 1000
    thin = functools.partial(retention.thin_history, **options)
    retention.thin_history = thin  # type: ignore[assignment]


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=4000)
    parser.add_argument("--batches", type=int, default=100, help="per arm")
    parser.add_argument("--batch-commits", type=int, default=2000)
    parser.add_argument("--round-batches", type=int, default=5)
    parser.add_argument("--backlog-hours", type=float, default=2.0)
    parser.add_argument("--backlog-every-s", type=int, default=30)
    parser.add_argument("--postgres-url", default=os.environ.get("POSTGRES_URL"))
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--chunk-rows",
        type=int,
        help="thin with this many rows per delete transaction instead of the retention's default",
    )
    parser.add_argument(
        "--pause-ms",
        type=float,
        help="and at least this pause between chunks (default 20 ms, or as long as the chunk)",
    )
    args = parser.parse_args(argv)
    if args.batch_commits > args.keys:
        parser.error("--batch-commits must be at most --keys (one commit per key a batch)")

    if args.chunk_rows is not None or args.pause_ms is not None:
        _thin_with(args.chunk_rows, args.pause_ms)
    started = time.monotonic()
    print(f"load average (1 / 5 / 15 min) at start: {_load()}")
    table = ["| sink | arm | p50 ms | p95 ms | max ms |", "|---|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        bench = Bench(f"sqlite:///{Path(tmp) / 'bench.db'}", "", args)
        table += report("sqlite", bench, bench.run())
    print(f"load average after SQLite: {_load()}")

    if not args.no_postgres:
        with ExitStack() as stack:
            url = stack.enter_context(_postgres(args.postgres_url))
            prefix = f"bench_{uuid.uuid4().hex[:8]}_"
            try:
                bench = Bench(url, prefix, args)
                table += report("postgres", bench, bench.run())
            finally:
                _drop_prefixed(url, prefix)
        print(f"load average after PostgreSQL: {_load()}")
    print("\n".join(table))
    print(f"{time.monotonic() - started:.0f} s in all")


if __name__ == "__main__":
    main()
