"""Reading one partition of the offsets topic from its beginning: a coordinator shard's load.

Kafka's coordinator rebuilds a shard's cache by reading its ``__consumer_offsets`` partition up to
the log end offset seen when loading started; this does the same through librdkafka, handing the
records over in chunks of binary columns (``state.shard.replay_log_chunks`` decodes a chunk at a
time), so that neither a Python object per record nor the whole partition is held at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from connectors.kafka.client_options import librdkafka_options

#: Records per chunk handed to the state.
CHUNK_RECORDS = 100_000


class LoadTimeoutError(RuntimeError):
    """The partition could not be read up to its end offset in time."""


def read_partition_chunks(
    bootstrap_servers: str,
    kafka_options: Mapping[str, str],
    topic: str,
    partition: int,
    timeout_s: float = 300.0,
    chunk_records: int = CHUNK_RECORDS,
) -> Iterator[tuple[pa.Array, pa.Array]]:
    """Yield ``(keys, values)`` binary columns of every record of ``topic``/``partition`` from
    the beginning up to the end offset it has when reading starts (a null value is a
    tombstone; records without a key are left out, as Kafka's loader does)."""
    options = librdkafka_options(bootstrap_servers, kafka_options)
    options.update(
        {
            # Required by librdkafka, unused: the partition is assigned, nothing is committed.
            "group.id": "consumer-offsets-loader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            # Whole partitions are read once: large fetches keep the loader off the latency.
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "queued.max.messages.kbytes": 256 * 1024,
        }
    )
    consumer = Consumer(options)
    try:
        tp = TopicPartition(topic, partition)
        _low, end = consumer.get_watermark_offsets(tp, timeout=timeout_s)
        if end <= 0:
            return
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        keys: list[bytes] = []
        values: list[bytes | None] = []
        position = -1
        while position + 1 < end:
            if time.monotonic() > deadline:
                raise LoadTimeoutError(
                    f"loading {topic}-{partition}: at offset {position + 1} of {end} "
                    f"after {timeout_s:.0f}s"
                )
            # consume() returns once it has num_messages (the partition's end-of-file event
            # counts as one) or at the timeout: ask for no more than what is left, so that the
            # last call returns at once instead of waiting the timeout out. (Compaction leaves
            # gaps in the offsets, so fewer may arrive: then the short timeout ends the call.)
            wanted = min(chunk_records - len(keys), end - position - 1) + 1
            for message in consumer.consume(num_messages=wanted, timeout=0.2):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        position = max(position, message.offset() - 1)
                        continue
                    raise LoadTimeoutError(f"loading {topic}-{partition}: {error.str()}")
                position = message.offset()
                if position >= end:
                    break
                key = message.key()
                if key is not None:
                    keys.append(key)
                    values.append(message.value())
            if len(keys) >= chunk_records:
                yield pa.array(keys, pa.binary()), pa.array(values, pa.binary())
                keys, values = [], []
        if keys:
            yield pa.array(keys, pa.binary()), pa.array(values, pa.binary())
    finally:
        consumer.close()
