"""A coordinator shard's load: one offsets-topic partition read from its beginning up to the log
end seen when loading starts (as Kafka loads ``__consumer_offsets``), through librdkafka, in
chunks of binary columns so that neither the partition nor an object per record is held."""

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
) -> Iterator[tuple[pa.Array, pa.Array]]:
    """Yield ``(keys, values)`` binary columns of every committed record of ``topic``/
    ``partition`` from the beginning up to its last stable offset when reading starts (a null
    value is a tombstone; records without a key are left out, as Kafka's loader does)."""
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
            # librdkafka's default, kept over the user's options: a load sees committed batches
            # only (no zombie's, no failed batch's), and the end offset is the last stable one.
            "isolation.level": "read_committed",
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
            # consume() returns at num_messages (end-of-file counts as one) or the timeout: asking
            # for no more than is left makes the last call return at once (compaction's gaps
            # leave it to the short timeout).
            wanted = min(CHUNK_RECORDS - len(keys), end - position - 1) + 1
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
            if len(keys) >= CHUNK_RECORDS:
                yield pa.array(keys, pa.binary()), pa.array(values, pa.binary())
                keys, values = [], []
        if keys:
            yield pa.array(keys, pa.binary()), pa.array(values, pa.binary())
    finally:
        consumer.close()
