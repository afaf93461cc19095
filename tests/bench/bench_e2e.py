"""End-to-end benchmark of the offsets job, side by side with Kafka's own group coordinator.

Run from the repository root (not collected by pytest: the name does not start with ``test_``)::

    .venv/bin/python -m tests.bench.bench_e2e [--works A B] [--commits N] [--json out.json]
        [--quick] [--bootstrap HOST:PORT]

It starts a local broker (``.runtime/kafka-bench/``, free ports; stopped at the end) unless
``--bootstrap`` names one (topics get a unique prefix), runs the job in this process
(:class:`streaming.spark.job.OffsetsJob`, the project's ``spark_session``, ``local[*]``) and
measures,
with load from child processes through librdkafka (``tests/bench/load.py``):

throughput  per work (A: 1,000 groups x 100 partitions per request; B: 100 groups x 1,000),
            N offset commits produced as fast as the producer goes while the job runs, until the
            sink holds all of them; the same commits through Kafka's coordinator on the same
            broker (``tests/bench/native.py``: librdkafka, 50 requests in flight); the ratio.
            Both sides get one commit per group (the first 200) before their clock starts.
latency     fixed commit rates (offset commits/s, requests of ``--latency-partitions``): time from
            sending a request to its answer on the responses topic and to its sink visibility.
fetch       OffsetFetch of a work-A group: the SQLite sink vs Kafka's coordinator.
scale       the same probe batches (updates of the work-A groups) with ~100k keys in state
            and after growing the state with new keys; peak memory of the JVM and Python workers.
recovery    restart with a checkpoint -> first batch committed; rebuild without a checkpoint
            (LOADING -> ACTIVE) in offsets-topic records/s.

The state function's section timings come from ``tests/bench/profiling/sitecustomize.py``, put
on the Python workers' path; the driver side is timed by wrapping the writer's Kafka writes and
the sink's ``write_batch`` on the job's instances. Figures depend on the machine and on what
else runs on it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.compute as pc
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from connectors.client.offsets_reader import end_offsets
from connectors.kafka.admin import KafkaAdmin, plain_topic_spec
from connectors.runtime import runtime_dir
from connectors.sinks import BatchProgress, open_sink
from streaming.config import JobConfig
from streaming.spark.job import OffsetsJob
from streaming.spark.session import spark_session
from streaming.spark.topics import ensure_topics
from tests.bench.broker import bench_broker
from tests.bench.cpu import CpuClock
from tests.bench.floor import FloorQuery, summarize_batches
from tests.bench.load import IngestTarget, check_encoding, in_child, paced_requests, produce_rounds
from tests.bench.memory import MemorySampler
from tests.bench.native import WARM_GROUPS, commit_through_kafka
from tests.bench.profiling.sitecustomize import PROFILE_DIR_ENV
from tests.bench.report import report
from tests.bench.results import print_and_save
from tests.fixtures.job import new_job_config

#: The after-burst phase (:func:`after_burst`): the burst's and the window's seconds.
BURST_S = 10.0
AFTER_BURST_S = 20.0


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank; NaN for no samples."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


# --- instrumentation ----------------------------------------------------------------------------


@dataclass
class BatchEvent:
    """One micro-batch as the sink saw it (``at``: monotonic time its transaction committed)."""

    at: float
    batch_id: int
    input_rows: int
    state_keys: int
    writer_ms: int
    sink_ms: float
    ingest_offsets: dict[int, int]


@dataclass
class Tap:
    """Wraps the job's ``sink.write_batch`` and the writer's Kafka writes to time them."""

    events: list[BatchEvent] = field(default_factory=list)
    kafka_writes: list[tuple[float, str, float]] = field(default_factory=list)
    #: (monotonic time, key + value bytes) of each write to the offsets topic.
    record_bytes: list[tuple[float, int]] = field(default_factory=list)
    #: (monotonic start, seconds) of each rebuilt shard's snapshot write.
    snapshot_writes: list[tuple[float, float]] = field(default_factory=list)

    def attach_sink(self, job: OffsetsJob) -> None:
        original = job.sink.write_batch
        original_snapshot = job.sink.write_snapshot

        def write_snapshot(batch_id: int, records: Any) -> Any:
            started = time.monotonic()
            done = original_snapshot(batch_id, records)
            self.snapshot_writes.append((started, time.monotonic() - started))
            return done

        job.sink.write_snapshot = write_snapshot  # type: ignore[method-assign]

        def write_batch(batch_id: int, records: Any, progress: BatchProgress) -> bool:
            started = time.perf_counter()
            done = original(batch_id, records, progress)
            self.events.append(
                BatchEvent(
                    at=time.monotonic(),
                    batch_id=batch_id,
                    input_rows=progress.input_rows,
                    state_keys=progress.state_keys,
                    writer_ms=progress.duration_ms,
                    sink_ms=(time.perf_counter() - started) * 1000,
                    ingest_offsets=dict(progress.ingest_offsets),
                )
            )
            if progress.input_rows:
                writes = [f"{t.rsplit('.', 1)[-1]} {s:.2f}" for at, t, s in self.kafka_writes[-3:]]
                log(
                    f"  batch {batch_id}: {progress.input_rows:,} rows, "
                    f"{progress.state_keys:,} keys, writer {progress.duration_ms / 1000:.2f} s "
                    f"+ sink {self.events[-1].sink_ms / 1000:.2f} s; last kafka writes {writes}"
                )
            return done

        job.sink.write_batch = write_batch  # type: ignore[method-assign]

    def attach_writer(self, job: OffsetsJob) -> None:
        writer = job.writer
        assert writer is not None
        original = writer.send

        def send(topic: str, messages: Any, partitions: str | None = None) -> None:
            started = time.perf_counter()
            original(topic, messages, partitions)
            self.kafka_writes.append((time.monotonic(), topic, time.perf_counter() - started))
            if topic == job.config.offsets_topic and messages.num_rows:
                size = sum(
                    int(pc.sum(pc.binary_length(messages[c])).as_py() or 0)
                    for c in ("key", "value")
                )
                self.record_bytes.append((time.monotonic(), size))

        writer.send = send  # type: ignore[method-assign]

    def covered_at(self, targets: Mapping[int, int], since: float = 0.0) -> float | None:
        """When the sink first covered every ``partition -> end offset`` of ``targets``."""
        for event in self.events:
            if event.at >= since and all(
                event.ingest_offsets.get(p, 0) >= end for p, end in targets.items() if end > 0
            ):
                return event.at
        return None

    def wait_covered(
        self, job: OffsetsJob, targets: Mapping[int, int], since: float, timeout_s: float
    ) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            at = self.covered_at(targets, since)
            if at is not None:
                return at
            query = job.query
            error = None if query is None else query.exception()
            if error is not None:
                raise RuntimeError(f"query failed: {error}")
            time.sleep(0.05)
        raise TimeoutError(f"sink did not cover {dict(targets)} within {timeout_s:.0f}s")

    def batches(self, start: float, end: float) -> list[BatchEvent]:
        return [e for e in self.events if start <= e.at <= end and e.input_rows > 0]


def read_sections(profile_dir: Path) -> list[dict[str, float]]:
    rows: list[dict[str, float]] = []
    for path in profile_dir.glob("sections-*.jsonl"):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


# --- the run ------------------------------------------------------------------------------------


@dataclass
class Context:
    args: argparse.Namespace
    bootstrap: str
    config: JobConfig
    spark: Any
    folder: Path
    profile_dir: Path
    tap: Tap = field(default_factory=Tap)
    job: OffsetsJob | None = None
    #: States holding the offsets-topic partitions in the job's last start (``state_shards``).
    state_shards: int = 0
    #: The groups that probe batches update, ``partitions`` partitions each (work A's).
    groups: list[str] = field(default_factory=list)
    partitions: int = 100
    #: The committed topic: a real topic with ``--partitions`` partitions (Kafka 4 checks it).
    topic: str = "orders"
    next_offset: int = 1
    progress: list[dict[str, Any]] = field(default_factory=list)
    #: The processes' CPU clock (throughput's CPU per offset); None: not measured.
    cpu: CpuClock | None = None

    def start_job(self, config: JobConfig | None = None) -> tuple[OffsetsJob, float]:
        """Start a job on ``config`` (default: the run's); returns it and its start time."""
        job = OffsetsJob.create(config or self.config, self.spark)
        self.tap.attach_sink(job)
        started = time.monotonic()
        job.start()
        self.tap.attach_writer(job)
        self.job = job
        self.state_shards = job.state_shards
        return job, started

    def stop_job(self) -> None:
        job = self.job
        if job is None:
            return
        self.progress += _progress_of(job)
        job.stop()
        job.sink.close()
        self.job = None

    def ingest_ends(self) -> dict[int, int]:
        return end_offsets(self.config.kafka_python_options(), self.config.ingest_topic)


def _progress_of(job: OffsetsJob) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if job.query is not None:
        for progress in job.query.recentProgress:
            raw = progress.json if hasattr(progress, "json") else progress
            out.append(json.loads(raw) if isinstance(raw, str) else dict(raw))
    return out


def _groups(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i:06d}" for i in range(count)]


@dataclass(frozen=True)
class Work:
    """A throughput workload: ``groups`` requests of ``partitions`` partitions per round."""

    name: str
    groups: int
    partitions: int

    def rounds(self, commits: int) -> int:
        return max(1, commits // (self.groups * self.partitions))


#: The issue's two workloads, the same for the job and for Kafka's coordinator.
WORKS = {
    "A": Work("A", groups=1000, partitions=100),
    "B": Work("B", groups=100, partitions=1000),
}


def _target(ctx: Context) -> IngestTarget:
    config = ctx.config
    return IngestTarget(
        ctx.bootstrap, config.ingest_topic, config.ingest_topic_partitions, config.responses_topic
    )


def phase_throughput(ctx: Context, work: Work) -> dict[str, Any]:
    """``--commits`` offset commits of ``work`` through the job (produced as fast as the
    producer goes, until the sink holds them all), then through Kafka's coordinator."""
    args = ctx.args
    rounds = work.rounds(args.commits)
    n = rounds * work.groups * work.partitions
    groups = _groups(f"tp{work.name}", work.groups)
    log(
        f"throughput {work.name}: {n:,} offset commits ({rounds} rounds x {work.groups} groups "
        f"x {work.partitions} partitions)"
    )
    # The same warm-up as Kafka's coordinator gets (native.py): one commit per group of the first
    # WARM_GROUPS, answered before the clock starts.
    assert ctx.job is not None
    warm_from = time.monotonic()
    in_child(produce_rounds, _target(ctx), groups[:WARM_GROUPS], ctx.topic, 1, 1, 0, "warm")
    ctx.tap.wait_covered(ctx.job, ctx.ingest_ends(), warm_from, timeout_s=args.timeout)
    cpu_before = ctx.cpu.read() if ctx.cpu else None
    start = time.monotonic()
    requests = in_child(
        produce_rounds,
        _target(ctx),
        groups,
        ctx.topic,
        work.partitions,
        rounds,
        ctx.next_offset,
        f"tp{work.name}",
    )
    produced = time.monotonic()
    targets = ctx.ingest_ends()
    done = ctx.tap.wait_covered(ctx.job, targets, start, timeout_s=args.timeout)
    job_cpu = ctx.cpu.since(cpu_before) if ctx.cpu and cpu_before else {}
    seconds = done - start
    batches = ctx.tap.batches(start, done)
    log(
        f"throughput {work.name}: {n:,} offsets in sink after {seconds:.1f} s "
        f"({n / seconds:,.0f}/s)"
    )
    for progress in _progress_of(ctx.job):
        if progress.get("numInputRows"):
            log(f"  spark batch {progress['batchId']}: durationMs {progress['durationMs']}")

    native_groups = _groups(f"native{work.name}-{ctx.topic.split('.')[0]}", work.groups)
    log(f"native {work.name}: committing {n:,} offsets through Kafka's coordinator")
    cpu_before = ctx.cpu.read() if ctx.cpu else None
    native = commit_through_kafka(
        ctx.bootstrap, ctx.topic, native_groups, work.partitions, rounds, ctx.next_offset
    )
    native_cpu = ctx.cpu.since(cpu_before) if ctx.cpu and cpu_before else {}
    cpu_us = {
        "job": {part: 1e6 * s / n for part, s in job_cpu.items()},
        "kafka": {"broker": 1e6 * native_cpu["broker"] / n} if "broker" in native_cpu else {},
    }
    log(f"CPU per offset (µs): job {cpu_us['job']}, Kafka's coordinator {cpu_us['kafka']}")
    log(
        f"native {work.name}: {n:,} offsets in {native.seconds:.1f} s "
        f"({native.offsets_per_s:,.0f}/s), request p99 {native.request_p99_s:.3f} s, "
        f"errors {native.errors}"
    )
    ctx.next_offset += rounds
    ours = n / seconds
    return {
        "work": dataclasses.asdict(work),
        "groups": groups,
        "native_groups": native_groups,
        "offset_commits": n,
        "requests": requests,
        "produce_s": produced - start,
        "end_to_end_s": seconds,
        "offsets_per_s": ours,
        "batches": [asdict(b) | {"ingest_offsets": None} for b in batches],
        "batch_rows_median": statistics.median([b.input_rows for b in batches]) if batches else 0,
        "batch_writer_ms_median": statistics.median([b.writer_ms for b in batches])
        if batches
        else 0,
        "native": native.as_dict(),
        "ratio_vs_native": ours / native.offsets_per_s,
        "cpu_us_per_offset": cpu_us,
        "window": [start, done],
    }


def phase_latency(ctx: Context, rate: int, seconds: float) -> dict[str, Any]:
    """``rate`` offset commits/s for ``seconds`` from another process: send → response,
    send → sink visibility."""
    args = ctx.args
    per_request = args.latency_partitions
    request_rate = rate / per_request
    count = max(1, int(request_rate * seconds))
    groups = _groups(f"lat{rate}", min(count, 1000))
    keys = keys_in_state(ctx)
    log(
        f"latency: {rate:,} offset commits/s = {request_rate:,.0f} requests/s for {seconds:.0f} s, "
        f"{keys:,} keys in state"
    )
    for path in ctx.profile_dir.glob("*.jsonl"):
        path.unlink()
    window_start, wall_start = time.monotonic(), time.time()
    outcomes, sending_s = in_child(
        paced_requests,
        _target(ctx),
        ctx.topic,
        groups,
        per_request,
        request_rate,
        count,
        f"lat{rate}",
    )
    window_end, wall_end = time.monotonic(), time.time()
    acks = [o.answered_at - o.sent_at for o in outcomes if o.answered_at is not None]
    visible: list[float] = []
    for o in outcomes:
        for event in ctx.tap.events:
            if event.at >= o.sent_at and event.ingest_offsets.get(o.ingest_partition, 0) > (
                o.ingest_offset
            ):
                visible.append(event.at - o.sent_at)
                break
    result = {
        "offsets_per_s": rate,
        "state_keys_at_start": keys,
        "requests_per_s_target": request_rate,
        "requests_per_s_achieved": count / sending_s if sending_s else float("nan"),
        "requests": count,
        "answered": len(acks),
        "ack_p50_s": percentile(acks, 50),
        "ack_p99_s": percentile(acks, 99),
        "ack_max_s": max(acks) if acks else float("nan"),
        "sink_p50_s": percentile(visible, 50),
        "sink_p99_s": percentile(visible, 99),
        **summarize_batches(_progress_of(ctx.job), wall_start, wall_end),
        **checkpoint_writes(ctx, window_start, window_end, wall_start, wall_end),
        "stages": stage_summary(ctx.folder / "events", window_start, time.monotonic()),
        "state_function": summarize_sections(read_sections(ctx.profile_dir)),
    }
    result["task_run_s_per_batch"] = task_run_per_batch(result["stages"], result["batches"])
    for stage in result["stages"]:
        log(f"  stage {stage}")
    log(
        f"latency {rate:,}/s: ack p50 {result['ack_p50_s']:.3f} s p99 {result['ack_p99_s']:.3f} s, "
        f"sink p50 {result['sink_p50_s']:.3f} s p99 {result['sink_p99_s']:.3f} s "
        f"({len(acks)}/{count} answered); batch p50 {result['batch_p50_s']:.3f} s; checkpoint "
        f"{result['changelog_bytes_per_batch']:,.0f} B/batch for "
        f"{result['record_bytes_per_batch']:,.0f} B of records "
        f"({result['state_file_bytes_per_batch']:,.0f} B/batch with snapshots)"
    )
    return result


def after_burst(
    ctx: Context,
    target: IngestTarget,
    tag: str,
    progress: Callable[[], list[dict[str, Any]]],
    floor: bool = False,
) -> dict[str, Any]:
    """Acks at the lowest latency rate for :data:`AFTER_BURST_S`, sent right after a
    :data:`BURST_S` burst at the highest (requests of ``--latency-partitions``): the transient
    a burst leaves, as users see it; with the first ten batches that started after the burst
    (input rows, seconds) from the query's ``progress``. ``floor``: the floor query's
    requests."""
    args = ctx.args
    burst, rate = max(args.latency_rates), min(args.latency_rates)
    burst_requests = int(burst / args.latency_partitions * BURST_S)
    count = burst_requests + int(rate / args.latency_partitions * AFTER_BURST_S)
    log(
        f"{tag}: {rate:,} offset commits/s for {AFTER_BURST_S:.0f} s right after "
        f"{BURST_S:.0f} s at {burst:,}/s"
    )
    burst_end = time.time() + BURST_S
    outcomes, _ = in_child(
        paced_requests,
        target,
        ctx.topic,
        _groups(tag, 1000),
        args.latency_partitions,
        rate / args.latency_partitions,
        count,
        tag,
        floor,
        (burst / args.latency_partitions, burst_requests),
    )
    after = outcomes[burst_requests:]
    acks = [o.answered_at - o.sent_at for o in after if o.answered_at is not None]
    result = {
        "offsets_per_s": rate,
        "after_burst_of": burst,
        "burst_s": BURST_S,
        "after_s": AFTER_BURST_S,
        "requests": len(after),
        "answered": len(acks),
        "ack_p50_s": percentile(acks, 50),
        "ack_p99_s": percentile(acks, 99),
        "ack_max_s": max(acks) if acks else float("nan"),
        "first_batches_after": [
            (p["numInputRows"], p["durationMs"]["triggerExecution"] / 1000)
            for p in progress()
            if pd.Timestamp(p["timestamp"]).timestamp() >= burst_end and p.get("numInputRows")
        ][:10],
    }
    log(
        f"{tag}: ack p50 {result['ack_p50_s']:.3f} s p99 {result['ack_p99_s']:.3f} s "
        f"({len(acks)}/{len(after)} answered); first batches after the burst (rows, s): "
        f"{result['first_batches_after']}"
    )
    return result


def keys_in_state(ctx: Context) -> int:
    """The keys (committed offsets) the job's state holds: the sink's offsets table, one row
    each, once the sink covers the batches so far."""
    with open_sink(ctx.config.sink_url, read_only=True) as sink:
        rows = sink.table_rows()
    return sum(n for table, n in rows.items() if table.endswith("consumer_offsets"))


def checkpoint_writes(
    ctx: Context, start: float, end: float, wall_start: float, wall_end: float
) -> dict[str, float]:
    """Bytes the state store wrote to the checkpoint (its changelog files written in the wall
    window; and all its files, with RocksDB's snapshots and their SST files) and bytes of offset
    records the writer produced (the monotonic window), per batch."""
    batches = len(ctx.tap.batches(start, end)) or 1
    state_dir = Path(ctx.config.checkpoint_location) / "state"
    written = [
        path
        for path in state_dir.rglob("*")
        if path.is_file()
        and not path.name.endswith(".crc")
        and wall_start <= path.stat().st_mtime <= wall_end + 1
    ]
    changelog = sum(p.stat().st_size for p in written if p.name.endswith(".changelog"))
    every_file = sum(p.stat().st_size for p in written)
    records = sum(size for at, size in ctx.tap.record_bytes if start <= at <= end)
    return {
        "changelog_bytes_per_batch": changelog / batches,
        "record_bytes_per_batch": records / batches,
        "changelog_to_records": changelog / records if records else float("nan"),
        "state_file_bytes_per_batch": every_file / batches,
    }


def phase_floor(ctx: Context) -> list[dict[str, Any]]:
    """The engine's floor (``tests.bench.floor``) at each latency rate, with the job stopped so
    that the two do not share the cores."""
    args = ctx.args
    ctx.stop_job()
    assert ctx.job is None
    from streaming.spark.job import state_partitions

    floor = FloorQuery(
        ctx.spark,
        ctx.bootstrap,
        ctx.config.ingest_topic.removesuffix(".commits"),
        # As many keys as the job's state has: the same number of calls per micro-batch.
        ctx.state_shards or ctx.config.partitions,
        ctx.config.ingest_topic_partitions,
        state_partitions(ctx.config, ctx.spark, ctx.state_shards or None),
        ctx.config.trigger_interval,
        ctx.folder,
        args.floor_answers,
    )
    target = IngestTarget(ctx.bootstrap, floor.ingest_topic, floor.partitions, floor.answers_topic)
    floor.start()
    out = []
    try:
        # The first batch starts the Python workers: answered, not measured.
        in_child(paced_requests, target, ctx.topic, ["floor-warm"], 1, 1.0, 1, "floor-warm", True)
        for rate in args.latency_rates:
            request_rate = rate / args.latency_partitions
            count = max(1, int(request_rate * args.latency_seconds))
            groups = _groups(f"floor{rate}", min(count, 1000))
            wall_start, window_start = time.time(), time.monotonic()
            outcomes, _ = in_child(
                paced_requests,
                target,
                ctx.topic,
                groups,
                args.latency_partitions,
                request_rate,
                count,
                f"floor{rate}",
                True,
            )
            acks = [o.answered_at - o.sent_at for o in outcomes if o.answered_at is not None]
            progress = [json.loads(p.json) for p in floor.query.recentProgress]
            result = {
                "offsets_per_s": rate,
                "requests": count,
                "answered": len(acks),
                "ack_p50_s": percentile(acks, 50),
                "ack_p99_s": percentile(acks, 99),
                **summarize_batches(progress, wall_start, time.time()),
            }
            stages = stage_summary(ctx.folder / "events", window_start, time.monotonic())
            result["task_run_s_per_batch"] = task_run_per_batch(stages, result["batches"])
            log(
                f"floor {rate:,}/s: ack p50 {result['ack_p50_s']:.3f} s "
                f"p99 {result['ack_p99_s']:.3f} s, batch p50 {result['batch_p50_s']:.3f} s "
                f"({len(acks)}/{count} answered)"
            )
            out.append(result)
        out.append(
            after_burst(
                ctx,
                target,
                "floor-after-burst",
                lambda: [json.loads(p.json) for p in floor.query.recentProgress],
                floor=True,
            )
        )
    finally:
        floor.stop()
    return out


def phase_fetch(ctx: Context, throughput: Mapping[str, Any]) -> dict[str, Any]:
    """OffsetFetch of the groups of a throughput run: the job's sink against Kafka's
    coordinator (librdkafka ``list_consumer_group_offsets``)."""
    samples = ctx.args.fetches
    partitions = throughput["work"]["partitions"]
    ours: list[float] = []
    with open_sink(ctx.config.sink_url, read_only=True) as sink:
        for i in range(samples):
            group = throughput["groups"][i % len(throughput["groups"])]
            started = time.perf_counter()
            answer = sink.fetch_offsets(group)
            ours.append((time.perf_counter() - started) * 1000)
            assert len(answer) == partitions, (group, len(answer))
    theirs: list[float] = []
    admin = AdminClient({"bootstrap.servers": ctx.bootstrap})
    for i in range(samples):
        group = throughput["native_groups"][i % len(throughput["native_groups"])]
        started = time.perf_counter()
        request = ConsumerGroupTopicPartitions(group)
        offsets = admin.list_consumer_group_offsets([request])[group].result()
        theirs.append((time.perf_counter() - started) * 1000)
        assert len(offsets.topic_partitions) == partitions, (group, offsets)
    result = {
        "fetches": samples,
        "sink_p50_ms": percentile(ours, 50),
        "sink_p99_ms": percentile(ours, 99),
        "native_p50_ms": percentile(theirs, 50),
        "native_p99_ms": percentile(theirs, 99),
    }
    log(
        f"fetch: sink p50 {result['sink_p50_ms']:.2f} ms p99 {result['sink_p99_ms']:.2f} ms; "
        f"Kafka p50 {result['native_p50_ms']:.2f} ms p99 {result['native_p99_ms']:.2f} ms"
    )
    return result


#: Micro-batches of updates each scale probe queues (``--max-offsets-per-trigger`` requests each).
PROBE_BATCHES = 5


def probe(ctx: Context, label: str) -> dict[str, Any]:
    """Stop the job, queue ``PROBE_BATCHES`` batches' worth of updates to the throughput groups,
    restart from the checkpoint: time to the first committed batch, each probe batch's time and
    the median of the warm ones."""
    args = ctx.args
    ctx.stop_job()
    rounds = max(1, PROBE_BATCHES * args.max_offsets_per_trigger // len(ctx.groups))
    in_child(
        produce_rounds,
        _target(ctx),
        ctx.groups,
        ctx.topic,
        ctx.partitions,
        rounds,
        ctx.next_offset,
        f"probe-{label}",
    )
    ctx.next_offset += rounds
    targets = ctx.ingest_ends()
    log(f"probe {label}: restarting from the checkpoint")
    for path in ctx.profile_dir.glob("*.jsonl"):
        path.unlink()
    job, started = ctx.start_job()
    done = ctx.tap.wait_covered(job, targets, started, timeout_s=args.timeout)
    batches = ctx.tap.batches(started, done)
    first = batches[0]
    warm = batches[1:] or batches
    result = {
        "label": label,
        "restart_to_first_batch_s": first.at - started,
        "batches": [
            {
                "rows": b.input_rows,
                "state_keys": b.state_keys,
                "writer_ms": b.writer_ms,
                "sink_ms": b.sink_ms,
            }
            for b in batches
        ],
        "state_keys": max(b.state_keys for b in batches),
        # The warm probe batches (not the first after restart) are the comparable ones; their
        # median, because a batch where many shards merge their delta into the base costs more
        # than the ones between (one batch alone made the ratio swing by 0.3).
        "warm_batch_s": statistics.median((b.writer_ms + b.sink_ms) / 1000 for b in warm),
        "warm_batch_rows": int(statistics.median(b.input_rows for b in warm)),
        "first_batch_s": (first.writer_ms + first.sink_ms) / 1000,
        "state_function": summarize_sections(read_sections(ctx.profile_dir)),
    }
    log(
        f"probe {label}: {result['state_keys']:,} keys, restart -> first batch "
        f"{result['restart_to_first_batch_s']:.1f} s, warm batch {result['warm_batch_s']:.2f} s "
        f"({result['warm_batch_rows']:,} rows)"
    )
    return result


def grow(ctx: Context, keys: int) -> float:
    """Add ``keys`` new offsets (new groups of ``--partitions`` partitions); returns seconds."""
    args = ctx.args
    count = keys // ctx.partitions
    groups = [f"grow-{uuid.uuid4().hex[:6]}-{i:07d}" for i in range(count)]
    started = time.monotonic()
    in_child(
        produce_rounds,
        _target(ctx),
        groups,
        ctx.topic,
        ctx.partitions,
        1,
        1,
        f"grow{len(groups)}",
    )
    targets = ctx.ingest_ends()
    assert ctx.job is not None
    done = ctx.tap.wait_covered(ctx.job, targets, started, timeout_s=args.timeout * 10)
    log(f"scale: +{keys:,} keys in {done - started:.1f} s ({keys / (done - started):,.0f}/s)")
    return done - started


def phase_scale(ctx: Context) -> dict[str, Any]:
    args = ctx.args
    probes = [probe(ctx, "baseline")]
    budget_end = time.monotonic() + args.scale_budget
    total = probes[0]["state_keys"]
    steps = [k for k in (1_000_000, 3_000_000, 6_000_000, 10_000_000) if k <= args.scale_keys]
    if not steps or steps[-1] < args.scale_keys:
        steps.append(args.scale_keys)
    growth: list[dict[str, float]] = []
    for target in steps:
        if total >= target:
            continue
        if time.monotonic() > budget_end:
            log(f"scale: time budget spent, stopping at {total:,} keys")
            break
        seconds = grow(ctx, target - total)
        growth.append({"keys_added": target - total, "seconds": seconds})
        probes.append(probe(ctx, f"{target // 1000}k"))
        total = probes[-1]["state_keys"]
    baseline, largest = probes[0], probes[-1]
    return {
        "probes": probes,
        "growth": growth,
        "baseline_keys": baseline["state_keys"],
        "largest_keys": largest["state_keys"],
        "baseline_batch_s": baseline["warm_batch_s"],
        "largest_batch_s": largest["warm_batch_s"],
        "ratio": largest["warm_batch_s"] / baseline["warm_batch_s"],
        "restart_s_at_largest": largest["restart_to_first_batch_s"],
    }


def phase_rebuild(ctx: Context) -> dict[str, Any]:
    """A new checkpoint over the filled offsets topic: LOADING → ACTIVE, records/s."""
    ctx.stop_job()
    stored = end_offsets(ctx.config.kafka_python_options(), ctx.config.offsets_topic)
    records = sum(stored.values())
    config = dataclasses.replace(
        ctx.config, checkpoint_location=str(ctx.folder / "checkpoint-rebuild")
    )
    log(f"rebuild: {records:,} records in the offsets topic, starting without a checkpoint")
    for path in ctx.profile_dir.glob("*.jsonl"):
        path.unlink()
    ctx.tap.snapshot_writes.clear()
    job, started = ctx.start_job(config)
    deadline = started + ctx.args.timeout * 10
    with open_sink(config.sink_url, read_only=True) as sink:
        while True:
            if job.query is not None and job.query.exception() is not None:
                raise RuntimeError(f"query failed: {job.query.exception()}")
            status = sink.status()
            if status.status == "ACTIVE" and status.last_batch_id >= 0:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("rebuild did not finish")
            time.sleep(0.2)
    seconds = time.monotonic() - started
    log(f"rebuild: ACTIVE after {seconds:.1f} s ({records / seconds:,.0f} records/s)")
    snapshots = ctx.tap.snapshot_writes
    profile = {
        # Until the driver got the state function's output (the first snapshot write).
        "to_first_snapshot_s": snapshots[0][0] - started if snapshots else None,
        "snapshot_writes": len(snapshots),
        "snapshot_write_s": sum(s for _, s in snapshots),
        "state_function": summarize_sections(read_sections(ctx.profile_dir)),
    }
    log(f"rebuild profile: {profile}")
    return {
        "records": records,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "profile": profile,
    }


def summarize_sections(rows: list[dict[str, float]]) -> dict[str, Any]:
    # tests/bench/profiling/sitecustomize.py's sections.
    names = ["decode_state", "adapter", "handle", "encode_state", "output_table"]
    names += ["encode_output", "emit", "load_shard", "write_loaded", "state_server"]
    names += ["decode_base", "replay_log", "encode_base", "encode_log_chunk"]
    totals = {n: sum(r.get(n, 0.0) for r in rows) for n in names}
    return {
        "calls": len(rows),
        "rows": int(sum(r.get("rows", 0) for r in rows)),
        "seconds": totals,
        # Calls whose shard state this Python worker kept since it encoded it (no decoding).
        "state_kept": int(sum(r.get("state_kept", 0) for r in rows)),
        "state_bytes_read": int(sum(r.get("state_bytes_read", 0) for r in rows)),
    }


def driver_sections(ctx: Context, start: float, end: float) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for at, topic, seconds in ctx.tap.kafka_writes:
        if start <= at <= end:
            out[topic.rsplit(".", 1)[-1]] += seconds
    for event in ctx.tap.batches(start, end):
        out["sink"] += event.sink_ms / 1000
        out["writer_total_before_sink"] += event.writer_ms / 1000
    return dict(out)


def task_run_per_batch(stages: Sequence[Mapping[str, Any]], batches: int) -> float:
    """Spark's task run time (every stage, both cores) per micro-batch with input: what a batch
    costs the executors, comparable between the job and the floor query."""
    return sum(stage["run_s"] for stage in stages) / batches if batches else float("nan")


def stage_summary(event_log: Path, start: float, end: float) -> list[dict[str, Any]]:
    """Spark stages completed in the monotonic window [start, end] (event-log wall clock)."""
    offset = time.time() - time.monotonic()
    lo, hi = (start + offset) * 1000, (end + offset) * 1000
    stages: dict[int, dict[str, Any]] = {}
    tasks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for path in event_log.rglob("*"):
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerStageCompleted":
                info = event["Stage Info"]
                stages[info["Stage ID"]] = info
            elif kind == "SparkListenerTaskEnd":
                tasks[event["Stage ID"]].append(event)
    out = []
    for stage_id, info in sorted(stages.items()):
        submitted, completed = info.get("Submission Time", 0), info.get("Completion Time", 0)
        if not (lo <= completed <= hi):
            continue
        metrics = [t.get("Task Metrics") or {} for t in tasks[stage_id]]
        out.append(
            {
                "stage": stage_id,
                "name": info["Stage Name"][:60],
                "tasks": info["Number of Tasks"],
                "wall_s": (completed - submitted) / 1000,
                "run_s": sum(m.get("Executor Run Time", 0) for m in metrics) / 1000,
                "cpu_s": sum(m.get("Executor CPU Time", 0) for m in metrics) / 1e9,
                "gc_s": sum(m.get("JVM GC Time", 0) for m in metrics) / 1000,
            }
        )
    return out


# --- report -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--commits", type=int, default=None, help="offset commits per work (300,000)"
    )
    parser.add_argument(
        "--works",
        nargs="*",
        default=list(WORKS),
        choices=list(WORKS),
        help="A: 1,000 groups x 100 partitions per request; B: 100 groups x 1,000 (none: the "
        "latency runs on a small state; no fetch, no scale)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--quick", action="store_true", help="~100k commits, smaller phases")
    parser.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    parser.add_argument("--shards", type=int, default=50, help="offsets topic partitions")
    parser.add_argument(
        "--state-shards", type=int, default=None, help="states holding them (default: the job's)"
    )
    parser.add_argument("--trigger", default=JobConfig.trigger_interval)
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, default=2000, help="ingest requests per batch"
    )
    parser.add_argument(
        "--ingest-partitions",
        type=int,
        default=None,
        help="partitions of the job's ingest topic (default the job's: a divisor of --shards)",
    )
    parser.add_argument(
        "--state-cache-mb",
        type=int,
        default=JobConfig.state_cache_mb,
        help="decoded shard states each Python worker keeps (0: decode every call)",
    )
    parser.add_argument(
        "--latency-rates",
        type=int,
        nargs="*",
        default=[10_000, 1_000],
        help="offset commits/s (requests of --latency-partitions partitions)",
    )
    parser.add_argument("--latency-seconds", type=float, default=None)
    parser.add_argument("--latency-partitions", type=int, default=10)
    parser.add_argument(
        "--floor-answers",
        choices=["driver", "tasks"],
        default="driver",
        help="the floor answers from foreachBatch, or from its state tasks (noop sink)",
    )
    parser.add_argument("--fetches", type=int, default=1000)
    parser.add_argument("--scale-keys", type=int, default=None, help="grow the state this far")
    parser.add_argument("--scale-budget", type=float, default=None, help="seconds for growing")
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["latency", "floor", "scale", "rebuild"]
    )
    parser.add_argument("--master", default="local[*]")
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the project's defaults (repeatable), to measure a lever",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="per wait, seconds")
    args = parser.parse_args(argv)
    if args.commits is None:
        args.commits = 100_000 if args.quick else 300_000
    if args.latency_seconds is None:
        args.latency_seconds = 5.0 if args.quick else 10.0
    if args.scale_keys is None:
        args.scale_keys = 1_000_000 if args.quick else 10_000_000
    if args.scale_budget is None:
        args.scale_budget = 300.0 if args.quick else 1200.0
    if args.quick:
        args.fetches = min(args.fetches, 300)
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    check_encoding()
    folder = Path(tempfile.mkdtemp(prefix="bench-e2e-", dir=runtime_dir()))
    profile_dir = folder / "profile"
    profile_dir.mkdir()
    os.environ[PROFILE_DIR_ENV] = str(profile_dir)
    bootstrap, cluster = bench_broker(args.bootstrap, echo=log)
    config = new_job_config(
        bootstrap,
        folder,
        prefix="bench",
        partitions=args.shards,
        state_shards=args.state_shards,
        trigger_interval=args.trigger,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        ingest_partitions=args.ingest_partitions,
        state_cache_mb=args.state_cache_mb,
    )
    prefix = config.ingest_topic.removesuffix(".commits")
    results: dict[str, Any] = {
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    spark = None
    sampler: MemorySampler | None = None
    ctx: Context | None = None
    try:
        ensure_topics(config)
        with KafkaAdmin(config.kafka_python_options()) as admin:
            widest = max([args.latency_partitions, *(WORKS[n].partitions for n in args.works)])
            admin.ensure_topics([plain_topic_spec(f"{prefix}.orders", widest, 1)])
        event_log = folder / "events"
        event_log.mkdir()
        # The workers' profiling hook: the JVM passes its PYTHONPATH to the Python workers.
        python_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).parent / "profiling"), *filter(None, [python_path])]
        )
        spark = spark_session(
            app_name="consumer-offsets-bench",
            master=args.master,
            extra_conf={
                "spark.ui.enabled": "false",
                # Per-stage task times for the profile (see stage_summary).
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": event_log.as_uri(),
                "spark.eventLog.compress": "false",
                "spark.eventLog.rolling.enabled": "false",
                **dict(pair.split("=", 1) for pair in args.spark_conf),
            },
        )
        # Only the JVM (started now) passes the hook on: not the load's child processes.
        if python_path is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = python_path
        jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]
        sampler = MemorySampler(jvm_pid)
        sampler.start()
        ctx = Context(args, bootstrap, config, spark, folder, profile_dir, topic=f"{prefix}.orders")
        ctx.cpu = CpuClock(jvm_pid)

        log(f"starting the job on {bootstrap} (topics {prefix}.*)")
        job, started_at = ctx.start_job()
        in_child(produce_rounds, _target(ctx), ["warm-up"], ctx.topic, 1, 1, 1, "warm")
        ctx.tap.wait_covered(job, ctx.ingest_ends(), started_at, timeout_s=args.timeout)
        results["start_to_first_batch_s"] = time.monotonic() - started_at
        results["state_shards"] = job.state_shards
        log(
            f"job answering after {results['start_to_first_batch_s']:.1f} s "
            f"({args.shards} offsets-topic partitions in {job.state_shards} state shards)"
        )

        results["throughput"] = {}
        results["profile"] = {}
        for name in args.works:
            sampler.phase = f"throughput {name}"
            for path in profile_dir.glob("*.jsonl"):
                path.unlink()
            tp = phase_throughput(ctx, WORKS[name])
            window = tp.pop("window")
            results["throughput"][name] = tp
            results["profile"][name] = {
                "state_function": summarize_sections(read_sections(profile_dir)),
                "driver": driver_sections(ctx, *window),
                "stages": stage_summary(event_log, *window),
            }
            for stage in results["profile"][name]["stages"]:
                log(f"  stage {stage}")
        probed = results["throughput"].get("A") or next(iter(results["throughput"].values()), None)
        if probed is not None:
            ctx.groups, ctx.partitions = probed["groups"], probed["work"]["partitions"]
            sampler.phase = "fetch"
            results["fetch"] = phase_fetch(ctx, probed)
        elif "scale" not in args.skip:
            args.skip.append("scale")  # its probes update a work's groups
        phases: list[tuple[str, Callable[[], Any]]] = [
            (
                "latency",
                lambda: [
                    *(
                        phase_latency(ctx, rate, args.latency_seconds)
                        for rate in args.latency_rates
                    ),
                    after_burst(ctx, _target(ctx), "after-burst", lambda: _progress_of(ctx.job)),
                ],
            ),
            ("floor", lambda: phase_floor(ctx)),
            ("scale", lambda: phase_scale(ctx)),
            ("rebuild", lambda: phase_rebuild(ctx)),
        ]
        for name, phase in phases:
            if name in args.skip:
                continue
            sampler.phase = name
            try:
                results[name] = phase()
            except (Exception, KeyboardInterrupt) as error:  # report what was measured so far
                log(f"{name} failed: {error!r}")
                results.setdefault("errors", {})[name] = repr(error)
                break
        results["streaming_progress"] = ctx.progress
    finally:
        if ctx is not None:
            try:
                ctx.stop_job()
            except Exception as error:  # keep cleaning up
                log(f"stopping the job failed: {error!r}")
        if sampler is not None:
            results["memory"] = sampler.stop()
        # The run's topics go, also from the broker in .runtime/kafka-bench that the next run
        # starts again: work B's topic alone has 1,000 partitions, and a few runs' leftovers ran
        # the broker's 512 MB heap out of memory.
        try:
            _delete_topics(bootstrap, prefix)
        except Exception as error:
            log(f"deleting the run's topics failed: {error!r}")
        # Report what was measured even when Spark's JVM died (e.g. out of memory).
        for what, stop in (
            ("Spark", spark and spark.stop),
            ("the broker", cluster and cluster.stop),
        ):
            try:
                if stop:
                    stop()
            except Exception as error:
                log(f"stopping {what} failed: {error!r}")
                results.setdefault("errors", {})[f"stop {what}"] = repr(error)
        shutil.rmtree(folder, ignore_errors=True)
    results["load_average_end"] = os.getloadavg()
    return results


def _delete_topics(bootstrap: str, prefix: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [t for t in admin.list_topics(timeout=30).topics if t.startswith(f"{prefix}.")]
    if not topics:
        return
    for topic, future in admin.delete_topics(topics).items():
        try:
            future.result(timeout=60)
        except Exception as error:
            log(f"could not delete topic {topic}: {error!r}")


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM (e.g. `timeout`) stops the run through its clean-up: job, Spark, broker.
    signal.signal(signal.SIGTERM, _interrupt)
    results = run(args)
    for tp in results.get("throughput", {}).values():
        tp.pop("groups", None)
        tp.pop("native_groups", None)
    print_and_save(results, report(results), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
