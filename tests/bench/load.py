"""Load for the job: OffsetCommit requests on the ingest topic, and their answers.

Requests are produced and answers consumed through librdkafka (confluent-kafka), so that the
load generator's own CPU, on the same 2 cores as the job, stays small (kafka-python needs about
a core for 1,000 requests/s). Each function runs in a child process (:func:`in_child`): the job
under test runs in the parent, whose Python shares one interpreter lock with the ``foreachBatch``
writer. Times cross over as ``time.monotonic()``, which is system-wide.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from state.coordinator.partitioner import partition_for
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.formats.request_codec import encode_request

_PART = (
    '{{"partitionIndex":{p},"committedOffset":{o},'
    '"committedLeaderEpoch":-1,"committedMetadata":""}}'
)


def partitions_json(partitions: Iterable[int], offset: int) -> str:
    return ",".join(_PART.format(p=p, o=offset) for p in partitions)


def group_positions(group: str, partitions: int, advance: int) -> list[int]:
    """Committed offsets of ``group``'s partitions after ``advance`` rounds: each partition at
    its own position, as real consumers' are (the same offset everywhere compresses the state
    and the offsets topic far better than production data would)."""
    start = zlib.crc32(group.encode()) % 1_000_000 * 1_000
    return [start + p * 7_919 + advance for p in range(partitions)]


def positions_json(group: str, partitions: int, advance: int) -> str:
    """``partitions_json`` of :func:`group_positions`."""
    return ",".join(
        _PART.format(p=p, o=o) for p, o in enumerate(group_positions(group, partitions, advance))
    )


def commit_json(request_id: str, group: str, topic: str, parts_json: str) -> bytes:
    """An OffsetCommit request as ``state.formats.request_codec.encode_request`` writes it."""
    return (
        f'{{"version":1,"api":"OffsetCommit","requestId":"{request_id}","groupId":"{group}",'
        f'"generationId":-1,"memberId":"","groupInstanceId":null,"retentionTimeMs":-1,'
        f'"topics":[{{"name":"{topic}","partitions":[{parts_json}]}}]}}'
    ).encode()


def check_encoding() -> None:
    """The fast spelling above must be the codec's: the job's JVM parser relies on it."""
    request = OffsetCommitRequest(
        request_id="r",
        group_id="g",
        partitions=(PartitionCommit("t", 0, 7), PartitionCommit("t", 1, 7)),
    )
    assert commit_json("r", "g", "t", partitions_json(range(2), 7)) == encode_request(request)


def in_child(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` in a fresh Python process and return its result."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(fn, args)


@dataclass(frozen=True)
class IngestTarget:
    """Where requests go: the job's ingest topic and its partition count (a group's requests go
    to ``partition_for(group, partitions)``), and where answers come."""

    bootstrap: str
    ingest_topic: str
    partitions: int
    responses_topic: str


def _producer(bootstrap: str, linger_ms: int) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": linger_ms,
            "batch.size": 1024 * 1024,
            "message.max.bytes": 8 * 1024 * 1024,
            "queue.buffering.max.kbytes": 512 * 1024,
        }
    )


def _flush(producer: Producer) -> None:
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} requests not delivered to the ingest topic")


def produce_rounds(
    target: IngestTarget,
    groups: Sequence[str],
    topic: str,
    partitions: int,
    rounds: int,
    base_offset: int,
    tag: str,
) -> int:
    """``rounds`` x one request per group committing ``partitions`` partitions; returns requests.
    Run it in a child (:func:`in_child`)."""
    producer = _producer(target.bootstrap, linger_ms=5)
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    sent = 0
    for r in range(rounds):
        for group in groups:
            parts = positions_json(group, partitions, base_offset + r)
            while True:
                try:
                    producer.produce(
                        target.ingest_topic,
                        key=group.encode(),
                        value=commit_json(f"{tag}-{r}-{group}", group, topic, parts),
                        partition=partition_for(group, target.partitions),
                        on_delivery=delivered,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            sent += 1
    _flush(producer)
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed: {failures[0]}")
    return sent


@dataclass(frozen=True)
class Outcome:
    """One request of a latency run: when it was sent, where it landed, when it was answered."""

    request_id: str
    sent_at: float
    ingest_partition: int
    ingest_offset: int
    answered_at: float | None


def paced_requests(
    target: IngestTarget,
    topic: str,
    groups: Sequence[str],
    per_request: int,
    request_rate: float,
    count: int,
    tag: str,
    request_id_header: bool = False,
    burst: tuple[float, int] = (1.0, 0),
) -> tuple[list[Outcome], float]:
    """Send ``count`` requests at ``request_rate``/s and wait for each one's answer on the
    responses topic; returns the outcomes and the seconds the sending took. Run it in a child.
    ``request_id_header``: each message carries its request id in a header too (for the floor
    query of ``tests.bench.floor``, which answers with it and parses nothing). ``burst``: the
    first ``burst[1]`` of them at ``burst[0]`` requests/s, the rest right after."""
    parts = partitions_json(range(per_request), 1)
    received: dict[str, float] = {}
    # librdkafka reads read_committed by default: an answer counts once its batch committed.
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": f"bench-{tag}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
            "fetch.min.bytes": 1,
        }
    )
    # Start at the end of every partition: only this run's answers count.
    ends = []
    topic_metadata = consumer.list_topics(target.responses_topic, timeout=30)
    for p in sorted(topic_metadata.topics[target.responses_topic].partitions):
        _low, high = consumer.get_watermark_offsets(
            TopicPartition(target.responses_topic, p), timeout=30
        )
        ends.append(TopicPartition(target.responses_topic, p, high))
    consumer.assign(ends)
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            for message in consumer.consume(num_messages=1000, timeout=0.05):
                if message.error() is None and message.key() is not None:
                    received.setdefault(message.key().decode(), time.monotonic())

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    producer = _producer(target.bootstrap, linger_ms=0)
    positions: dict[str, tuple[int, int]] = {}
    sent: list[tuple[str, float]] = []

    burst_rate, burst_count = burst
    start = time.monotonic()
    for i in range(count):
        due = (
            i / burst_rate
            if i < burst_count
            else (burst_count / burst_rate + (i - burst_count) / request_rate)
        )
        delay = start + due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        group = groups[i % len(groups)]
        request_id = f"{tag}-{i}"
        at = time.monotonic()

        def on_delivery(error: KafkaError | None, message: Any, rid: str = request_id) -> None:
            if error is None:
                positions[rid] = (message.partition(), message.offset())

        producer.produce(
            target.ingest_topic,
            key=group.encode(),
            value=commit_json(request_id, group, topic, parts),
            partition=partition_for(group, target.partitions),
            on_delivery=on_delivery,
            **({"headers": [("request_id", request_id.encode())]} if request_id_header else {}),
        )
        producer.poll(0)
        sent.append((request_id, at))
    sending_s = time.monotonic() - start
    _flush(producer)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(rid in received for rid, _ in sent):
        time.sleep(0.1)
    stop.set()
    reader.join(5)
    consumer.close()
    outcomes = [
        Outcome(rid, at, *positions.get(rid, (-1, -1)), received.get(rid)) for rid, at in sent
    ]
    return outcomes, sending_s
