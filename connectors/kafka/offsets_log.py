"""Reading one partition of the offsets topic from its beginning: a coordinator shard's load.

Kafka's coordinator rebuilds a shard's cache by reading its ``__consumer_offsets`` partition up to
the log end offset seen when loading started; this does the same with kafka-python.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from connectors.kafka.admin import consumer_end_offsets


class LoadTimeoutError(RuntimeError):
    """The partition could not be read up to its end offset in time."""


def read_partition(
    client_options: Mapping[str, Any],
    topic: str,
    partition: int,
    timeout_s: float = 300.0,
) -> Iterator[tuple[bytes, bytes | None]]:
    """Yield ``(key, value)`` of every record of ``topic``/``partition`` from the beginning up
    to the end offset it has when reading starts (value None is a tombstone)."""
    consumer = KafkaConsumer(
        enable_auto_commit=False,
        # Whole partitions are read once: large fetches keep the loader off the network's latency.
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
        max_poll_records=50_000,
        **client_options,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        end = consumer_end_offsets(consumer, [tp])[tp]
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout_s
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise LoadTimeoutError(
                    f"loading {topic}-{partition}: at offset {consumer.position(tp)} of {end} "
                    f"after {timeout_s:.0f}s"
                )
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    if record.offset >= end:
                        return
                    if record.key is not None:
                        yield record.key, record.value
    finally:
        consumer.close()
