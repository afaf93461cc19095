"""Benchmark of the driver's step and its Kafka transaction per batch: ``BatchWriter.write_table``
of a batch (by default a small one, 7 commits of 10 partitions: 70 offsets-topic records, 7
answers) on a SQLite sink, without a ``transactional.id`` and with one; and what a new holder's
``init_transactions`` takes after the previous holder was SIGKILLed with a transaction open (the
broker aborts it first).

Run with ``python -m tests.bench.bench_writer_transactions [--bootstrap HOST:PORT]
[--batches 200] [--commits 7 --partitions 10] [--takeovers 5]``. Prints the median and p95 per
batch of each, then each takeover's time. ``--commits 200 --partitions 1000 --batches 8
--takeovers 0``: the driver's step for a batch of 200k records, as work B's.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import pyarrow as pa
from kafka.admin import KafkaAdminClient, NewTopic

from connectors.kafka.producer import DurableProducer
from connectors.sinks import open_sink
from state.coordinator.config import CoordinatorConfig
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.engine.request_frame import frame_from_requests
from state.shard import (
    ShardOutput,
    apply_batch,
    empty_shard,
    encode_responses,
    group_commits,
    snapshot_records,
)
from streaming.spark.output import output_table
from streaming.spark.writer import BatchWriter, WriterSettings, transactional_id
from tests.bench.broker import bench_broker
from tests.streaming.test_output_table import SHARD, groups_of_shard

PARTITIONS = 4
NOW_MS = 1_700_000_000_000


def a_batch(batch: int, commits: int = 7, partitions: int = 10) -> pa.Table:
    """``commits`` commits of ``partitions`` partitions each to groups of one shard (a topic of
    its own each): ``commits * partitions`` records, ``commits`` answers."""
    groups = groups_of_shard(commits)
    requests = [
        OffsetCommitRequest(
            f"r{batch}-{i}",
            groups[i % len(groups)],
            tuple(PartitionCommit(f"t{i}", p, batch * 100 + p) for p in range(partitions)),
        )
        for i in range(commits)
    ]
    frame = frame_from_requests(requests, timestamps=NOW_MS)
    result = apply_batch(empty_shard(SHARD), frame, NOW_MS, CoordinatorConfig())
    answers, dead = encode_responses(result.responses, SHARD)
    output = ShardOutput(
        state=result.state,
        changed=True,
        records=result.records,
        record_partitions=None,
        loaded=snapshot_records(empty_shard(SHARD)),
        answers=answers,
        dead_letters=dead,
        group_commits=group_commits(result.responses),
        stats={
            "input_rows": frame.num_rows,
            "commits_applied": commits * partitions,
            "next_expiry_ms": None,
        },
    )
    return output_table(SHARD, output)


def timed(
    bootstrap: str,
    admin: KafkaAdminClient,
    transactional: bool,
    batches: int,
    commits: int = 7,
    partitions: int = 10,
) -> str:
    tag = uuid.uuid4().hex[:6]
    topics = [f"bench-txn-{kind}-{tag}" for kind in ("offsets", "responses", "dead")]
    admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics])
    time.sleep(1)
    settings = WriterSettings(
        bootstrap_servers=bootstrap,
        kafka_options={},
        ingest_topic="ingest",
        offsets_topic=topics[0],
        responses_topic=topics[1],
        dead_letter_topic=topics[2],
        compression="none",
        partitions=PARTITIONS,
        transactional_id=transactional_id(topics[0]) if transactional else None,
    )
    sink = open_sink(f"sqlite:///{tempfile.mkdtemp()}/offsets.db")
    writer = BatchWriter(settings, sink, lambda b: {"ingest": {0: b + 1}})
    tables = [a_batch(b, commits, partitions) for b in range(batches + 1)]
    try:
        writer.producer.flush(0)  # connected (and transactions initialised) first, as the job
        writer.write_table(tables[0], 0, time.monotonic())
        took = []
        for b in range(1, batches + 1):
            started = time.perf_counter()
            writer.write_table(tables[b], b, time.monotonic())
            took.append((time.perf_counter() - started) * 1000)
    finally:
        writer.close()
        sink.close()
        admin.delete_topics(topics)
    took.sort()
    return f"median {statistics.median(took):.1f} ms, p95 {took[int(0.95 * len(took))]:.1f} ms"


def hold_open(bootstrap: str, transactional: str, topic: str) -> None:
    """A holder with a transaction open (a child process, killed by :func:`takeover_ms`)."""
    producer = DurableProducer(bootstrap, {}, "none", transactional)
    producer.begin()
    producer.send(topic, [b"k"] * 70, [b"v"] * 70)
    producer.flush(30)
    print("open", flush=True)
    time.sleep(600)


def takeover_ms(bootstrap: str, topic: str) -> float:
    """ms of a new producer's ``init_transactions`` after its predecessor was SIGKILLed with a
    transaction open."""
    transactional = f"bench-txn-{uuid.uuid4().hex[:6]}"
    command = [sys.executable, "-m", "tests.bench.bench_writer_transactions", "--hold-open"]
    command += [transactional, topic, "--bootstrap", bootstrap]
    holder = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"open\n"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    started = time.perf_counter()
    successor = DurableProducer(bootstrap, {}, "none", transactional)
    successor.flush(0)  # init_transactions
    took = (time.perf_counter() - started) * 1000
    successor.close()
    return took


def _ms(values: list[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values) + " ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a running broker (default: a local one)")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--commits", type=int, default=7, help="commits per batch (7)")
    parser.add_argument("--partitions", type=int, default=10, help="partitions per commit (10)")
    parser.add_argument("--takeovers", type=int, default=5)
    parser.add_argument("--hold-open", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold_open:
        hold_open(args.bootstrap, *args.hold_open)
        return
    bootstrap, cluster = bench_broker(args.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topic = f"bench-txn-takeover-{uuid.uuid4().hex[:6]}"
    try:
        shape = (args.batches, args.commits, args.partitions)
        print(f"batches of {args.commits} commits x {args.partitions} partitions")
        print("no transaction   :", timed(bootstrap, admin, False, *shape))
        print("one per batch    :", timed(bootstrap, admin, True, *shape))
        if args.takeovers:
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
            time.sleep(1)
            took = [takeover_ms(bootstrap, topic) for _ in range(args.takeovers)]
            print("init_transactions after a SIGKILL mid-transaction:", _ms(took))
            admin.delete_topics([topic])
    finally:
        admin.close()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
