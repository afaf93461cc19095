"""A catch-up after an outage: a backlog waiting on the ingest topic when an active job and a
warm standby start on the defaults (50 partitions, ``max_offsets_per_trigger``'s cap, TTL 10 s).

    python -m tests.reliability.catch_up [--groups 20000] [--partitions 100]
        [--sink sqlite|postgres] [--no-standby] [--bootstrap HOST:PORT] [--postgres-url URL]

Every offset is a key of its own (``--groups`` requests of ``--partitions`` partitions each),
the worst case for the sink. It checks, and fails (exit 1) otherwise: the active keeps its
lease (no "lease job lost", no exit), the standby keeps waiting (never acquires), every request
is answered with error code 0 (deadlines are generous), and the sink and the compacted offsets
topic equal the model. It prints the catch-up time and rate (offsets/s, from the query's start
to the last answer), the batches it took and the peak resident memory of each driver's process
tree. Not collected by pytest; ``test_catch_up`` runs it small.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaConsumer

from state.coordinator.partitioner import partition_for
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.formats.request_codec import encode_request
from streaming.config import JobConfig
from tests.bench.memory import descendants, status_kb
from tests.fixtures.job import prepare_topics
from tests.reliability.load import DriverProcess
from tests.reliability.support import (
    OffsetState,
    diff,
    last_batch_id,
    log_line_time,
    offsets_topic_offsets,
    producer,
    reliability_config,
    sink_offsets,
)

TOPIC = "orders"
LOST = "lease job lost"
ACQUIRED = "lease job acquired"
READY = "standby ready"


@dataclass
class Result:
    offsets: int
    requests: int
    answered: int
    errors: int
    #: Seconds from the query's start to the last answer.
    catch_up_s: float
    batches: int
    active_peak_mb: float
    standby_peak_mb: float
    problems: list[str]

    @property
    def rate(self) -> float:
        return self.offsets / self.catch_up_s if self.catch_up_s > 0 else 0.0

    def report(self) -> str:
        return (
            f"catch-up of {self.offsets:,} offsets ({self.requests:,} requests):"
            f" {self.catch_up_s:.1f} s, {self.rate:,.0f} offsets/s, {self.batches} micro-batches;"
            f" answered {self.answered:,} ({self.errors} with an error); peak RSS active"
            f" {self.active_peak_mb:,.0f} MB, standby {self.standby_peak_mb:,.0f} MB"
        )


def produce_backlog(config: JobConfig, groups: int, partitions: int) -> OffsetState:
    """``groups`` commit requests of ``partitions`` partitions each, every offset its own key."""
    kafka = producer(config.bootstrap_servers, linger_ms=50, batch_size=1 << 20)
    model: OffsetState = {}
    try:
        for g in range(groups):
            group = f"cu-g{g}"
            commits = tuple(PartitionCommit(TOPIC, p, g + p + 1) for p in range(partitions))
            model.update({(group, TOPIC, c.partition): c.offset for c in commits})
            request = OffsetCommitRequest(request_id=f"cu-{g}", group_id=group, partitions=commits)
            kafka.send(
                config.ingest_topic,
                key=group.encode(),
                value=encode_request(request),
                partition=partition_for(group, config.ingest_topic_partitions),
            )
        kafka.flush(timeout=600)
    finally:
        kafka.close(timeout=60)
    return model


class Peak:
    """The peak of a driver's process tree's resident memory (the driver, JVM, Python workers)."""

    def __init__(self, driver: DriverProcess) -> None:
        self.driver = driver
        self.mb = 0.0

    def sample(self) -> None:
        if self.driver.process is None or not self.driver.running:
            return
        root = self.driver.process.pid
        kb = sum(status_kb(pid)[1] for pid in (root, *descendants(root)))
        self.mb = max(self.mb, kb / 1024)


def answers(consumer: KafkaConsumer, seen: dict[str, int]) -> None:
    """Read what arrived on the responses topic into ``seen`` (request id → error code)."""
    for records in consumer.poll(timeout_ms=200, max_records=50_000).values():
        for record in records:
            answer = json.loads(record.value)
            failed = answer["errorCode"] or any(p["errorCode"] for p in answer["partitions"])
            seen[answer["requestId"]] = 1 if failed else 0


def catch_up(
    bootstrap: str, folder: Path, sink_url: str, groups: int, partitions: int, standby: bool
) -> Result:
    config = reliability_config(bootstrap, folder, sink_url, partitions=50)
    prepare_topics(config)
    produced_at = time.monotonic()
    model = produce_backlog(config, groups, partitions)
    print(
        f"backlog: {len(model):,} offsets in {groups:,} requests,"
        f" produced in {time.monotonic() - produced_at:.1f} s",
        flush=True,
    )
    active = DriverProcess(config, folder / "active.log")
    second = DriverProcess(config, folder / "standby.log", ("--standby",))
    peaks = (Peak(active), Peak(second))
    seen: dict[str, int] = {}
    problems: list[str] = []
    consumer = KafkaConsumer(
        config.responses_topic,
        bootstrap_servers=bootstrap.split(","),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    try:
        active.start()
        active.wait_for_log(ACQUIRED, 180)
        if standby:
            second.start()
        started = time.monotonic()
        deadline = started + max(600.0, groups * partitions / 2_000)
        while len(seen) < groups and time.monotonic() < deadline:
            answers(consumer, seen)
            for peak in peaks:
                peak.sample()
            if not active.running:
                problems.append("the active exited")
                break
        query_started = _log_time(active, "query started")
        catch_up_s = time.monotonic() - (query_started or started)
        rate = len(model) / catch_up_s
        print(f"answered {len(seen):,} in {catch_up_s:.1f} s: {rate:,.0f} offsets/s", flush=True)
        if len(seen) < groups:
            problems.append(f"{groups - len(seen):,} requests not answered in time")
        if standby:
            second.wait_for_log(READY, 120)
            if ACQUIRED in second.current_log():
                problems.append("the standby took the lease")
            if not second.running:
                problems.append("the standby exited")
        if LOST in active.current_log():
            problems.append("the active lost its lease")
        batches = last_batch_id(sink_url) + 1
        sink = sink_offsets(sink_url)
        if sink != model:
            problems.append("sink != model: " + diff(model, sink))
        topic = offsets_topic_offsets(bootstrap, config.offsets_topic, deadline_s=900)
        if topic != model:
            problems.append("offsets topic != model: " + diff(model, topic))
    finally:
        consumer.close()
        second.stop()
        active.stop()
    return Result(
        offsets=len(model),
        requests=groups,
        answered=len(seen),
        errors=sum(seen.values()),
        catch_up_s=catch_up_s,
        batches=batches,
        active_peak_mb=peaks[0].mb,
        standby_peak_mb=peaks[1].mb,
        problems=problems,
    )


def _log_time(driver: DriverProcess, text: str) -> float | None:
    """The monotonic time of the current start's first log line containing ``text``."""
    for line in driver.current_log().splitlines():
        if text in line:
            return time.monotonic() - (time.time() - log_line_time(line))
    return None


@contextlib.contextmanager
def _sink(kind: str, postgres_url: str | None, folder: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'offsets.db'}"
        return
    from tests.fixtures.postgres import local_postgres

    if postgres_url:
        yield postgres_url
        return
    with local_postgres(durable=True) as url:
        yield url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--sink", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres-url")
    parser.add_argument("--bootstrap")
    parser.add_argument("--no-standby", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the logs' folder")
    args = parser.parse_args(argv)
    from tests.bench.broker import bench_broker

    bootstrap, cluster = bench_broker(args.bootstrap)
    folder = Path(tempfile.mkdtemp(prefix="catch-up-"))
    try:
        with _sink(args.sink, args.postgres_url, folder) as sink_url:
            result = catch_up(
                bootstrap, folder, sink_url, args.groups, args.partitions, not args.no_standby
            )
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"{args.sink}: {result.report()}")
    for problem in result.problems:
        print(f"FAIL: {problem}")
    if args.keep or result.problems:
        print(f"logs: {folder}")
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
