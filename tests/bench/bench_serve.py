"""Benchmark ``consumer-offsets serve``'s read side over a big sink: ``/metrics`` (per partition
and with ``--granularity topic``), a group's dashboard page, Burrow's ``…/lag``, the dashboard's
index (a page, and a search), and the server's memory.

Run from the repository root::

    python -m tests.bench.bench_serve [--sink sqlite|postgres] [--groups 10000]
        [--partitions 20] [--groups-per-topic 20] [--history-hours 24]

The sink gets ``--groups`` groups x ``--partitions`` partitions, 20 groups reading each topic
(10,000 x 20: 500 topics, 10,000 topic-partitions, 200,000 group-partitions), a commit of
every group-partition each hour for ``--history-hours`` hours (the history table: 4.8 M rows
for a day), and each topic-partition's log-end samples over that day (60 points each). Then
two servers run on it as the CLI starts them (their own processes, no broker: log-end offsets
from the sink), and each route is timed (median of 3, after one warm-up request; for
``/metrics`` the warm-up, which makes the text the next scrapes get from the server's cache,
is shown too, and the scrape as Prometheus asks for it: gzip). PostgreSQL is
``--postgres-url`` (or env ``POSTGRES_URL``), its tables under a unique prefix, dropped
afterwards. Not collected by pytest (the name does not start with ``test_``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

from connectors.kafka.local import free_port_block
from connectors.sinks import BatchProgress, open_sink
from state.formats.frames import RECORD_FRAME_SCHEMA
from tests.bench.bench_sinks import _drop_prefixed

HOUR_MS = 3_600_000
#: What Prometheus sends: the answer's size is then the compressed one.
GZIP = {"Accept-Encoding": "gzip"}
SAMPLES = 60


def _topic(group: int, groups_per_topic: int) -> str:
    return f"bench-topic-{group // groups_per_topic:05d}"


def _hour_frame(groups: int, partitions: int, per_topic: int, hour: int, at_ms: int) -> pa.Table:
    """Every group-partition's commit of ``hour``: offsets 1,000 an hour, each group behind
    its topic's log end by a different amount."""
    rows = groups * partitions
    index = np.arange(rows)
    group = index // partitions
    offsets = np.maximum(0, hour * 1000 + 400 - (group % 50) * 60)
    names = [f"bench-group-{g:06d}" for g in range(groups)]
    return pa.table(
        {
            "kind": pa.array(["offset"] * rows, pa.string()),
            "group_id": pa.array([names[g] for g in group], pa.string()),
            "topic": pa.array([_topic(g, per_topic) for g in group], pa.string()),
            "partition": pa.array(index % partitions, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "leader_epoch": pa.array(np.full(rows, 1, dtype=np.int32)),
            "metadata": pa.array([""] * rows, pa.string()),
            "commit_timestamp_ms": pa.array(np.full(rows, at_ms, dtype=np.int64)),
            "expire_timestamp_ms": pa.nulls(rows, pa.int64()),
            "generation": pa.nulls(rows, pa.int32()),
            "members": pa.nulls(rows, pa.int32()),
            "key": pa.array([b"k"] * rows, pa.binary()),
            "value": pa.array([b"v"] * rows, pa.binary()),
        },
        schema=RECORD_FRAME_SCHEMA,
    )


def build(url: str, groups: int, partitions: int, per_topic: int, hours: int) -> None:
    """Fill the sink (see the module docstring)."""
    now = int(time.time() * 1000)
    started = time.perf_counter()
    with open_sink(url, keep_history=True) as sink:
        sink.reset("ACTIVE", "bench")
        for hour in range(hours):
            at = now - (hours - 1 - hour) * HOUR_MS - 60_000
            frame = _hour_frame(groups, partitions, per_topic, hour, at)
            sink.write_batch(hour, frame, BatchProgress(batch_id=hour, input_rows=frame.num_rows))
        topics = sorted({_topic(g, per_topic) for g in range(groups)})
        day = hours * HOUR_MS
        for r in range(SAMPLES):
            at = now - day + (r + 1) * day // SAMPLES
            end = (r + 1) * hours * 1000 // SAMPLES
            sink.record_log_end_samples(
                {(t, p): end for t in topics for p in range(partitions)}, at - 1000
            )
        sink.write_log_end_offsets(
            {(t, p): hours * 1000 for t in topics for p in range(partitions)}
        )
        sink.heartbeat()
        rows = sink.table_rows()
    print(
        f"built in {time.perf_counter() - started:.0f} s: "
        + ", ".join(f"{name} {count:,}" for name, count in sorted(rows.items()))
    )


@contextmanager
def serving(url: str, *extra: str) -> Iterator[tuple[str, int]]:
    """``consumer-offsets serve`` on ``url`` in its own process: (base URL, pid)."""
    port = free_port_block(1)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streaming.cli",
            "serve",
            "--sink-url",
            url,
            "--port",
            str(port),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while _get(f"{base}/burrow/admin") is None:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("serve did not start")
            time.sleep(0.5)
        yield base, process.pid
    finally:
        process.terminate()
        process.wait(30)


def _get(url: str, headers: dict[str, str] | None = None) -> bytes | None:
    try:
        request = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.read()
    except OSError:
        return None


def timed(url: str, runs: int = 3, headers: dict[str, str] | None = None) -> tuple[float, int]:
    """Median seconds of ``runs`` requests after a warm-up, and the answer's size."""
    median, size, _ = timed_cold(url, runs, headers)
    return median, size


def timed_cold(
    url: str, runs: int = 3, headers: dict[str, str] | None = None
) -> tuple[float, int, float]:
    """As :func:`timed`, and the seconds of the warm-up request itself (for ``/metrics``: the
    first scrape, which makes the text while later ones get it from the server's cache)."""
    started = time.perf_counter()
    body = _get(url, headers)
    cold = time.perf_counter() - started
    if body is None:
        raise RuntimeError(f"{url} failed")
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        body = _get(url, headers)
        times.append(time.perf_counter() - started)
    return statistics.median(times), len(body or b""), cold


def _memory(pid: int) -> str:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return f"RSS {fields['VmRSS'].strip()}, peak {fields['VmHWM'].strip()}"


def measure(name: str, url: str, groups: int) -> None:
    group = f"bench-group-{groups // 2:06d}"
    rows = []
    with serving(url, "--evaluation-interval", "600") as (base, pid):
        # The index's first pass (every group's Burrow status) runs at start: wait for it.
        started = time.perf_counter()
        while b"\xe2\x80\xa6</span>" in (_get(f"{base}/") or b"\xe2\x80\xa6</span>"):
            time.sleep(5)
        rows.append(
            ("evaluator's first pass (every group's status)", time.perf_counter() - started, 0)
        )
        median, size, cold = timed_cold(f"{base}/metrics")
        rows.append(("/metrics (per partition), first scrape: made now", cold, size))
        rows.append(("/metrics (per partition), median of the next 3", median, size))
        rows.append(("/metrics (per partition), gzip", *timed(f"{base}/metrics", headers=GZIP)))
        rows.append(("a group's page", *timed(f"{base}/group/{group}")))
        rows.append(("Burrow …/lag", *timed(f"{base}/v3/kafka/local/consumer/{group}/lag")))
        rows.append(("dashboard index (page 1)", *timed(f"{base}/")))
        rows.append(
            ("dashboard index (search)", *timed(f"{base}/?q=" + urllib.parse.quote("-0042")))
        )
        memory = _memory(pid)
    with serving(url, "--granularity", "topic", "--evaluation-interval", "600") as (base, _):
        median, size, cold = timed_cold(f"{base}/metrics")
        rows.append(("/metrics (--granularity topic), first scrape: made now", cold, size))
        rows.append(("/metrics (--granularity topic), median of the next 3", median, size))
        rows.append(
            ("/metrics (--granularity topic), gzip", *timed(f"{base}/metrics", headers=GZIP))
        )
    print(f"\n{name}: serve {memory}")
    print("| route | seconds | bytes |\n|---|---:|---:|")
    for label, seconds, size in rows:
        print(f"| {label} | {seconds:.3f} | {size:,} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sink", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--groups-per-topic", type=int, default=20)
    parser.add_argument("--history-hours", type=int, default=24)
    parser.add_argument("--postgres-url", default=os.environ.get("POSTGRES_URL"))
    parser.add_argument(
        "--sink-url", help="measure this sink as a previous run built it (no build, no drop)"
    )
    args = parser.parse_args(argv)
    if args.sink_url:
        measure(
            "SQLite" if args.sink_url.startswith("sqlite") else "PostgreSQL",
            args.sink_url,
            args.groups,
        )
        return
    shape = (args.groups, args.partitions, args.groups_per_topic, args.history_hours)
    if args.sink == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'offsets.db'}"
            build(url, *shape)
            measure("SQLite", url, args.groups)
        return
    if not args.postgres_url:
        parser.error("--sink postgres needs --postgres-url or POSTGRES_URL")
    prefix = f"bench_serve_{uuid.uuid4().hex[:8]}_"
    url = f"{args.postgres_url}?table_prefix={prefix}"
    try:
        build(url, *shape)
        measure("PostgreSQL", url, args.groups)
    finally:
        _drop_prefixed(args.postgres_url, prefix)


if __name__ == "__main__":
    main()
