"""Benchmark of RequireStable's cost per OffsetFetch: ``OffsetsReader.fetch`` with and without
``require_stable`` on a SQLite sink, a group of 8 partitions, a 4-partition ingest topic.

Run with ``python -m tests.bench.bench_require_stable [--bootstrap HOST:PORT] [--fetches 200]``.
Three cases: no transaction (the job's progress at the log end), one open transaction naming the
group, and the job 1,000 requests behind on the group's ingest partition (the records between
its progress and the log end are read). Prints the median and p95 of each.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid

from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from connectors.client.offsets_reader import OffsetsReader
from connectors.sinks import open_sink
from state.coordinator.partitioner import partition_for
from tests.bench.broker import bench_broker
from tests.connectors.kafka.transactions import Committer
from tests.connectors.sinks.record_frames import commit, frame, progress

PARTITIONS = 4


def _timed(reader: OffsetsReader, stable: bool, fetches: int) -> str:
    reader.fetch("g", require_stable=stable)  # connections made, metadata read
    took = []
    for _ in range(fetches):
        started = time.perf_counter()
        reader.fetch("g", require_stable=stable)
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return f"median {statistics.median(took):.2f} ms, p95 {took[int(0.95 * len(took))]:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a running broker (default: a local one)")
    parser.add_argument("--fetches", type=int, default=200)
    args = parser.parse_args()
    bootstrap, cluster = bench_broker(args.bootstrap)
    ingest = f"bench-require-stable-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(ingest, PARTITIONS, 1)])
    time.sleep(1)
    shard = partition_for("g", PARTITIONS)
    sink = open_sink(f"sqlite:///{tempfile.mkdtemp()}/offsets.db")
    sink.set_status("ACTIVE")
    batch = [0]

    def apply() -> None:  # a batch of the job's, its progress at the log end
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        tps = [KafkaTopicPartition(ingest, p) for p in range(PARTITIONS)]
        ends = {tp.partition: end for tp, end in consumer.end_offsets(tps).items()}
        consumer.close()
        records = frame(*(commit("g", "t", p, 5) for p in range(8)))
        sink.write_batch(batch[0], records, progress(batch[0], ingest_offsets=ends))
        batch[0] += 1

    try:
        apply()
        reader = OffsetsReader(sink.url, {"bootstrap_servers": bootstrap}, ingest_topic=ingest)
        print("plain fetch            :", _timed(reader, False, args.fetches))
        print("no transaction, stable :", _timed(reader, True, args.fetches))
        committer = Committer(bootstrap, ingest)
        committer.begin()
        committer.txn_offset_commit("g", shard, {("t", 0): 9})
        print("one open, stable       :", _timed(reader, True, args.fetches))
        committer.abort()
        time.sleep(0.5)
        apply()
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for _ in range(1_000):
            producer.send(ingest, key=b"other", value=b'{"version": 1}', partition=shard)
        producer.close()
        print("1,000 behind, stable   :", _timed(reader, True, max(1, args.fetches // 4)))
        reader.close()
    finally:
        sink.close()
        admin.delete_topics([ingest])
        admin.close()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
