"""Benchmark of ``consumer-offsets mirror``: catch-up and freshness, next to what offset watchers
do (a plain consumer of ``__consumer_offsets``, as Burrow, kminion and kafka_exporter read it).

Run from the repository root (not collected by pytest)::

    .venv/bin/python -m tests.bench.bench_mirror [--records 1000000] [--json out.json]
        [--freshness-seconds 60] [--load-rate 5000] [--trigger "1 second"] [--sink-url URL]

It starts a broker of its own (a fresh data dir under ``.runtime/``, free ports, stopped and
removed at the end), so ``__consumer_offsets`` holds exactly what the run puts there:

fill        ``--records`` offset commits through Kafka's own coordinator (librdkafka's
            ``alter_consumer_group_offsets``, 50 requests in flight; 100 groups x 1,000
            partitions per request): as many records in ``__consumer_offsets``.
catch-up    the mirror starts on that cluster with an empty checkpoint and sink: records/s from
            ``start()`` to status ACTIVE (it has read up to the end offsets seen at start); the
            sink then equals Kafka's OffsetFetch for a sample of groups. Peak memory of the
            driver's JVM, Python workers and this process.
freshness   while a steady commit load runs (``--load-rate`` offsets/s through the coordinator),
            a probe group commits a new offset every 200 ms; time from sending the commit to its
            offset being visible in the sink (the mirror) and to its record being read by a
            plain consumer assigned the group's ``__consumer_offsets`` partition (the watchers'
            way: no SQL, no history, nothing kept when it stops).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from connectors.client.offsets_reader import beginning_offsets, end_offsets
from connectors.kafka.admin import KafkaAdmin, plain_topic_spec
from connectors.kafka.local import LocalKafkaCluster
from connectors.runtime import runtime_dir
from connectors.sinks import open_sink
from state.coordinator.model import OffsetCommitKey
from state.coordinator.partitioner import partition_for
from state.formats.records import decode_record
from streaming.spark.mirror import CONSUMER_OFFSETS, MirrorConfig, OffsetsMirror
from streaming.spark.session import spark_session
from tests.bench.bench_e2e import percentile
from tests.bench.memory import MemorySampler
from tests.bench.native import commit_through_kafka
from tests.bench.results import print_and_save

#: The fill's request shape: Kafka's coordinator is fastest with wide requests (work B).
FILL_GROUPS = 100
FILL_PARTITIONS = 1_000
#: Offsets per request of the steady load during the freshness phase (Kafka's coordinator
#: answers ~200 alter-offsets requests/s here: narrower requests could not make the rate).
LOAD_PARTITIONS = 100
PROBE_INTERVAL_S = 0.2
POLL_INTERVAL_S = 0.02
#: Groups whose sink offsets are compared with Kafka's OffsetFetch after the catch-up.
SAMPLE_GROUPS = 5


def log(message: str) -> None:
    print(f"[bench-mirror {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _records_between(bootstrap: str) -> tuple[dict[int, int], dict[int, int]]:
    options = {"bootstrap_servers": bootstrap}
    return beginning_offsets(options, CONSUMER_OFFSETS), end_offsets(options, CONSUMER_OFFSETS)


def _kafka_offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    listed = future.result(timeout=60)
    return {(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions}


def phase_fill(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    groups = [f"bench-mirror-fill-{i}" for i in range(FILL_GROUPS)]
    rounds = math.ceil(records / (FILL_GROUPS * FILL_PARTITIONS))
    log(f"fill: {rounds} rounds x {FILL_GROUPS} groups x {FILL_PARTITIONS} partitions")
    result = commit_through_kafka(bootstrap, topic, groups, FILL_PARTITIONS, rounds, base_offset=1)
    if result.errors:
        raise RuntimeError(f"Kafka's coordinator refused commits: {result.errors}")
    log(f"fill: {result.offset_commits:,} offsets in {result.seconds:.1f} s")
    return {
        "groups": groups,
        "rounds": rounds,
        "kafka_coordinator": result.as_dict(),
    }


def phase_catch_up(
    spark: Any, mirror_config: MirrorConfig, fill: dict[str, Any]
) -> tuple[OffsetsMirror, dict[str, Any]]:
    bootstrap = mirror_config.source_bootstrap_servers
    starts, ends = _records_between(bootstrap)
    records = sum(ends.values()) - sum(starts.values())
    log(f"catch-up: {records:,} records in {CONSUMER_OFFSETS}")
    mirror = OffsetsMirror.create(mirror_config, spark)
    started = time.monotonic()
    mirror.start()
    batches = 0
    with open_sink(mirror_config.sink_url, read_only=True) as sink:
        while True:
            status = sink.status()
            if status.status == "ACTIVE":
                break
            query = mirror.query
            if query is not None and not query.isActive:
                raise RuntimeError(f"the mirror's query stopped: {query.exception()}")
            time.sleep(0.05)
        seconds = time.monotonic() - started
        batches = status.last_batch_id + 1
        # The sink equals Kafka's own OffsetFetch for a sample of the filled groups.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for group in fill["groups"][:: max(1, len(fill["groups"]) // SAMPLE_GROUPS)]:
            stored = {(o.topic, o.partition): o.offset for o in sink.fetch_offsets(group)}
            if stored != _kafka_offsets(admin, group):
                raise RuntimeError(f"the sink differs from Kafka's OffsetFetch for {group}")
    log(f"catch-up: ACTIVE after {seconds:.1f} s, {records / seconds:,.0f} records/s")
    return mirror, {
        "records": records,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "batches": batches,
        "checked_groups": SAMPLE_GROUPS,
    }


class _SteadyLoad(threading.Thread):
    """Offset commits at ``rate`` offsets/s through Kafka's coordinator (requests of
    ``LOAD_PARTITIONS`` offsets over 100 groups), paced per second."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True, name="steady-load")
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._topic, self._rate = topic, rate
        self._halt = threading.Event()
        self.offsets = 0
        self.errors = 0

    def run(self) -> None:
        per_second = max(1, self._rate // LOAD_PARTITIONS)
        next_offset = 1
        while not self._halt.is_set():
            second_started = time.monotonic()
            futures = []
            for i in range(per_second):
                group = f"bench-mirror-load-{i % 100}"
                partitions = [
                    TopicPartition(self._topic, p, next_offset) for p in range(LOAD_PARTITIONS)
                ]
                request = ConsumerGroupTopicPartitions(group, partitions)
                futures.append(self._admin.alter_consumer_group_offsets([request])[group])
            for future in futures:
                try:
                    future.result(timeout=30)
                    self.offsets += LOAD_PARTITIONS
                except Exception:
                    self.errors += 1
            next_offset += 1
            self._halt.wait(max(0.0, 1.0 - (time.monotonic() - second_started)))

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=60)


class _SinkWatcher(threading.Thread):
    """When each offset of the probe group first shows in the sink."""

    def __init__(self, sink_url: str, group: str) -> None:
        super().__init__(daemon=True, name="sink-watcher")
        self._sink_url, self._group = sink_url, group
        self._halt = threading.Event()
        self.seen: dict[int, float] = {}

    def run(self) -> None:
        with open_sink(self._sink_url, read_only=True) as sink:
            while not self._halt.wait(POLL_INTERVAL_S):
                for stored in sink.fetch_offsets(self._group):
                    self.seen.setdefault(stored.offset, time.monotonic())

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)


class _ConsumerWatcher(threading.Thread):
    """When each offset of the probe group is read from ``__consumer_offsets`` by a plain
    consumer assigned the group's partition (no group of its own, nothing committed)."""

    def __init__(self, bootstrap: str, group: str, start_offset: int) -> None:
        super().__init__(daemon=True, name="consumer-watcher")
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-mirror-watcher-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        partition = partition_for(group)
        self._consumer.assign([TopicPartition(CONSUMER_OFFSETS, partition, start_offset)])
        self._group = group
        self._halt = threading.Event()
        self.seen: dict[int, float] = {}

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                message = self._consumer.poll(0.1)
                if message is None or message.error() is not None:
                    continue
                at = time.monotonic()
                key, value = message.key(), message.value()
                if key is None or value is None:
                    continue
                record = decode_record(key, value)
                if isinstance(record.key, OffsetCommitKey) and record.key.group == self._group:
                    self.seen.setdefault(record.value.offset, at)  # type: ignore[union-attr]
        finally:
            self._consumer.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)


def phase_freshness(
    bootstrap: str, sink_url: str, topic: str, seconds: float, load_rate: int
) -> dict[str, Any]:
    probe = f"bench-mirror-probe-{uuid.uuid4().hex[:8]}"
    ends = end_offsets({"bootstrap_servers": bootstrap}, CONSUMER_OFFSETS)
    sink_watcher = _SinkWatcher(sink_url, probe)
    consumer_watcher = _ConsumerWatcher(bootstrap, probe, ends.get(partition_for(probe), 0))
    load = _SteadyLoad(bootstrap, topic, load_rate)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    sent: dict[int, float] = {}
    acked: list[float] = []
    log(f"freshness: {seconds:.0f} s, a commit every {PROBE_INTERVAL_S}s, load {load_rate:,}/s")
    for thread in (sink_watcher, consumer_watcher, load):
        thread.start()
    try:
        deadline = time.monotonic() + seconds
        offset = 0
        while time.monotonic() < deadline:
            offset += 1
            request = ConsumerGroupTopicPartitions(probe, [TopicPartition(topic, 0, offset)])
            sent[offset] = time.monotonic()
            admin.alter_consumer_group_offsets([request])[probe].result(timeout=30)
            acked.append(time.monotonic() - sent[offset])
            time.sleep(PROBE_INTERVAL_S)
        # The last commits get time to arrive.
        settle = time.monotonic() + 30
        while time.monotonic() < settle and offset not in sink_watcher.seen:
            time.sleep(0.1)
    finally:
        load.stop()
        sink_watcher.stop()
        consumer_watcher.stop()

    def delays(seen: dict[int, float]) -> dict[str, Any]:
        # Offsets only grow: commit ``o`` is visible once any offset >= o is. (The sink keeps
        # the latest offset, so the commits of one mirror batch show as its last one.)
        samples = []
        for o, at in sent.items():
            times = [when for shown, when in seen.items() if shown >= o]
            if times:
                samples.append(min(times) - at)
        return {
            "seen": len(samples),
            "p50_s": percentile(samples, 50),
            "p99_s": percentile(samples, 99),
            "max_s": max(samples, default=float("nan")),
        }

    return {
        "probe_commits": len(sent),
        "load_offsets_per_s": load.offsets / seconds,
        "load_errors": load.errors,
        "commit_ack_p50_s": percentile(acked, 50),
        "commit_ack_p99_s": percentile(acked, 99),
        "mirror_sink": delays(sink_watcher.seen),
        "plain_consumer": delays(consumer_watcher.seen),
    }


def report(results: dict[str, Any]) -> str:
    fill, catch_up = results["fill"]["kafka_coordinator"], results.get("catch_up")
    lines = [
        "| figure | the mirror | a plain consumer of __consumer_offsets |",
        "|---|---|---|",
        f"| fill: Kafka's coordinator wrote | {fill['offset_commits']:,} records "
        f"({fill['offsets_per_s']:,.0f}/s) | |",
    ]
    if catch_up:
        lines.append(
            f"| catch-up to ACTIVE | {catch_up['records']:,} records in "
            f"{catch_up['seconds']:.1f} s: **{catch_up['records_per_s']:,.0f} records/s** "
            f"({catch_up['batches']} batches) | |"
        )
    fresh = results.get("freshness")
    if fresh:
        sink, plain = fresh["mirror_sink"], fresh["plain_consumer"]
        lines.append(
            f"| freshness under {fresh['load_offsets_per_s']:,.0f} offsets/s: commit sent -> "
            f"visible, p50 / p99 | **{sink['p50_s']:.2f} / {sink['p99_s']:.2f} s** "
            f"({sink['seen']} of {fresh['probe_commits']}) | {plain['p50_s'] * 1000:.0f} / "
            f"{plain['p99_s'] * 1000:.0f} ms ({plain['seen']} of {fresh['probe_commits']}) |"
        )
        lines.append(
            f"| the commit's own ack (Kafka's coordinator), p50 / p99 | "
            f"{fresh['commit_ack_p50_s'] * 1000:.0f} / {fresh['commit_ack_p99_s'] * 1000:.0f} ms"
            " | |"
        )
    memory = results.get("memory")
    if memory:
        # No Python worker: the mirror's decoding runs in the driver's foreachBatch.
        lines.append(
            f"| peak memory: Spark's JVM / driver Python | {memory['jvm_peak_mb']:,.0f} / "
            f"{memory['bench_python_peak_mb']:,.0f} MB | |"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--freshness-seconds", type=float, default=60.0, help="0: skip")
    parser.add_argument("--load-rate", type=int, default=5_000, help="offsets/s during freshness")
    parser.add_argument("--trigger", default="1 second", help="the mirror's trigger interval")
    parser.add_argument("--sink-url", default=None, help="default: SQLite in the run's folder")
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-mirror-", dir=runtime_dir()))
    cluster = LocalKafkaCluster(folder / "kafka")
    results: dict[str, Any] = {
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    spark = mirror = sampler = None
    try:
        bootstrap = cluster.start(nodes=1, port=None, echo=log).config.bootstrap_servers
        topic = "bench-mirror.orders"
        with KafkaAdmin({"bootstrap_servers": bootstrap}) as admin:
            admin.ensure_topics([plain_topic_spec(topic, FILL_PARTITIONS, 1)])
        results["fill"] = phase_fill(bootstrap, topic, args.records)
        spark = spark_session(
            app_name="consumer-offsets-bench-mirror", extra_conf={"spark.ui.enabled": "false"}
        )
        jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]
        sampler = MemorySampler(jvm_pid)
        sampler.start()
        sink_url = args.sink_url or f"sqlite:///{folder / 'mirror.db'}"
        config = MirrorConfig(
            source_bootstrap_servers=bootstrap,
            sink_url=sink_url,
            checkpoint_location=str(folder / "checkpoint"),
            trigger_interval=args.trigger,
        )
        mirror, results["catch_up"] = phase_catch_up(spark, config, results["fill"])
        if args.freshness_seconds > 0:
            results["freshness"] = phase_freshness(
                bootstrap, sink_url, topic, args.freshness_seconds, args.load_rate
            )
    finally:
        if mirror is not None:
            mirror.stop()
            mirror.sink.close()
        if sampler is not None:
            results["memory"] = sampler.stop()
        if spark is not None:
            spark.stop()
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
    results["fill"].pop("groups", None)
    results["load_average_end"] = os.getloadavg()
    return results


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # The mirror's line per batch (records, and where its time went).
    logging.basicConfig(format="[%(name)s %(asctime)s] %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("consumer_offsets.mirror").setLevel(logging.INFO)
    signal.signal(signal.SIGTERM, _interrupt)
    results = run(args)
    print_and_save(results, report(results), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
