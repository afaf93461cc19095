"""Kafka's own group coordinator as the yardstick: the same commits through the broker.

Commits go through librdkafka (confluent-kafka's ``AdminClient.alter_consumer_group_offsets``:
one OffsetCommit per group and round, generation -1 like a standalone consumer's commit) with a
window of requests in flight, so that the client is not what is measured (kafka-python tops out
near 12k offsets/s here, below the coordinator).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.bench.load import group_positions

#: Requests in flight against the coordinator (the issue's yardstick: 50).
IN_FLIGHT = 50


@dataclass(frozen=True)
class NativeResult:
    """Offsets/s of Kafka's coordinator and its per-request latency (seconds)."""

    offset_commits: int
    requests: int
    seconds: float
    request_p50_s: float
    request_p99_s: float
    errors: dict[str, int]

    @property
    def offsets_per_s(self) -> float:
        return self.offset_commits / self.seconds if self.seconds else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "offset_commits": self.offset_commits,
            "requests": self.requests,
            "seconds": self.seconds,
            "offsets_per_s": self.offsets_per_s,
            "request_p50_s": self.request_p50_s,
            "request_p99_s": self.request_p99_s,
            "errors": self.errors,
        }


def _percentile(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


#: Groups committed to once before either side's clock starts (the job's side in ``bench_e2e``).
WARM_GROUPS = 200


def _warm_up(admin: AdminClient, groups: Sequence[str], topic: str) -> None:
    """One commit per group first, so the coordinators are known and ``__consumer_offsets``
    exists before the clock starts (a fresh broker creates it on the first request)."""
    deadline = time.monotonic() + 120
    pending = list(groups)
    while pending:
        failed = []
        for group in pending:
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])
            # A short timeout: a fresh broker's first request may wait for a coordinator that
            # a retry finds at once.
            future = admin.alter_consumer_group_offsets([request], request_timeout=5)[group]
            try:
                answered = future.result(timeout=30)
                if any(tp.error for tp in answered.topic_partitions):
                    failed.append(group)  # e.g. NOT_COORDINATOR while the topic is created
            except (KafkaException, TimeoutError):
                failed.append(group)
        if failed and time.monotonic() > deadline:
            raise RuntimeError(f"Kafka's coordinator did not answer {len(failed)} groups")
        if failed:
            time.sleep(1)
        pending = failed


def commit_through_kafka(
    bootstrap: str,
    topic: str,
    groups: Sequence[str],
    partitions: int,
    rounds: int,
    base_offset: int,
    in_flight: int = IN_FLIGHT,
) -> NativeResult:
    """``rounds`` x one request per group committing ``partitions`` partitions of ``topic``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _warm_up(admin, groups[:WARM_GROUPS], topic)
    window = threading.Semaphore(in_flight)
    lock = threading.Lock()
    latencies: list[float] = []
    errors: Counter[str] = Counter()

    def settle(future: Future, sent_at: float) -> None:
        done_at = time.monotonic()
        try:
            answered = future.result()
            failed = [tp.error.str() for tp in answered.topic_partitions if tp.error]
        except KafkaException as error:
            failed = [str(error.args[0])]
        with lock:
            latencies.append(done_at - sent_at)
            errors.update(failed)
        window.release()

    requests = 0
    started = time.monotonic()
    for r in range(rounds):
        for group in groups:
            offsets = [
                TopicPartition(topic, p, o)
                for p, o in enumerate(group_positions(group, partitions, base_offset + r))
            ]
            window.acquire()
            sent_at = time.monotonic()
            request = ConsumerGroupTopicPartitions(group, offsets)
            future = admin.alter_consumer_group_offsets([request])[group]
            future.add_done_callback(lambda f, at=sent_at: settle(f, at))
            requests += 1
    for _ in range(in_flight):
        window.acquire()
    seconds = time.monotonic() - started
    return NativeResult(
        offset_commits=requests * partitions,
        requests=requests,
        seconds=seconds,
        request_p50_s=_percentile(latencies, 50),
        request_p99_s=_percentile(latencies, 99),
        errors=dict(errors),
    )
