"""Producing requests to, and reading records back from, a real broker in job tests."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from connectors.kafka.admin import consumer_end_offsets
from connectors.sinks import SinkError, open_sink
from state.coordinator.model import Record
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import Request
from state.formats.records import decode_record
from state.formats.request_codec import encode_request

T = TypeVar("T")


def produce_requests(bootstrap: str, topic: str, requests: Iterable[Request]) -> None:
    """Write requests as the commit client does: keyed by group, at ``partition_for(group,
    the topic's partition count)``."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        partitions = len(producer.partitions_for(topic))
        for request in requests:
            producer.send(
                topic,
                key=request.group_id.encode(),
                value=encode_request(request),
                partition=partition_for(request.group_id, partitions),
            )
        producer.flush()
    finally:
        producer.close()


def produce_in_transaction(
    bootstrap: str, topic: str, requests: Iterable[Request], *, transactional_id: str, commit: bool
) -> None:
    """Write requests as :func:`produce_requests` does, inside one Kafka transaction of a
    transactional producer (confluent-kafka), then commit or abort it."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    partitions = len(producer.list_topics(topic, timeout=30).topics[topic].partitions)
    for request in requests:
        key = request.group_id
        producer.produce(topic, encode_request(request), key, partition_for(key, partitions))
    # In the log before the end: an abort drops what the producer still holds unsent.
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def produce_raw(bootstrap: str, topic: str, messages: Iterable[tuple[int, bytes | None]]) -> None:
    """Write arbitrary (partition, value) messages, e.g. malformed input."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for partition, value in messages:
            # A null value needs a key (Kafka's tombstone shape); the job must still cope.
            producer.send(topic, key=b"k", value=value, partition=partition)
        producer.flush()
    finally:
        producer.close()


def read_all(
    bootstrap: str, topic: str, isolation_level: str = "read_committed", deadline_s: float = 30
) -> list[Any]:
    """Every record of every partition of ``topic`` up to its current end, in partition order,
    within ``deadline_s``; read_committed by default, as the job's readers and clients read
    what the job writes."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation_level
    )
    try:
        partitions = sorted(consumer.partitions_for_topic(topic) or [])
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        ends = consumer_end_offsets(consumer, tps)
        consumer.seek_to_beginning(*tps)
        out: list[Any] = []
        deadline = time.monotonic() + deadline_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} did not reach its end offsets")
            for batch in consumer.poll(timeout_ms=500).values():
                out.extend(batch)
        return out
    finally:
        consumer.close()


def read_offsets_topic(
    bootstrap: str, topic: str, isolation_level: str = "read_committed", deadline_s: float = 30
) -> list[tuple[int, Record]]:
    """(partition, decoded record) for every record of the offsets topic."""
    records = read_all(bootstrap, topic, isolation_level, deadline_s)
    return [(r.partition, decode_record(r.key, r.value)) for r in records]


def compacted(records: Iterable[tuple[int, Record]]) -> dict[Any, Any]:
    """What compaction leaves: the last value per key, tombstoned keys gone."""
    latest: dict[Any, Any] = {}
    for _, record in records:
        if record.value is None:
            latest.pop(record.key, None)
        else:
            latest[record.key] = record.value
    return latest


def read_responses(bootstrap: str, topic: str) -> dict[str, dict[str, Any]]:
    """Responses by request id (the last one wins, as a client would see after a replay)."""
    return {r.key.decode(): json.loads(r.value) for r in read_all(bootstrap, topic)}


def mirror_command(
    bootstrap: str, sink_url: str, checkpoint: str, trigger_interval: str
) -> list[str]:
    """``consumer-offsets mirror`` of ``bootstrap`` into ``sink_url``, as a process runs it."""
    return [
        str(Path(sys.executable).parent / "consumer-offsets"),
        "mirror",
        "--source-bootstrap-servers",
        bootstrap,
        "--sink-url",
        sink_url,
        "--checkpoint-location",
        checkpoint,
        "--trigger-interval",
        trigger_interval,
    ]


def wait_for(probe: Callable[[], T], accept: Callable[[T], bool], timeout_s: float = 120.0) -> T:
    """Poll ``probe`` until ``accept`` holds; return the accepted value or fail with the last."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if accept(last):
            return last
        time.sleep(0.25)
    raise AssertionError(f"condition not met within {timeout_s:.0f}s; last value: {last!r}")


def kafka_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """Kafka's own OffsetFetch of ``group`` ({} once the group or its offsets are gone)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        fetched = admin.list_consumer_group_offsets(group)
    finally:
        admin.close()
    return {(tp.topic, tp.partition): o.offset for tp, o in fetched.items() if o.offset >= 0}


def sink_offsets(sink_url: str, group: str) -> dict[tuple[str, int], int] | None:
    """The group's offsets in the sink; None while the sink does not exist yet."""
    try:
        with open_sink(sink_url, read_only=True) as sink:
            return {(o.topic, o.partition): o.offset for o in sink.fetch_offsets(group)}
    except SinkError:
        return None
