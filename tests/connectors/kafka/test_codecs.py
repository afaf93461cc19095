"""Every compression codec Kafka writes (gzip, snappy, lz4, zstd) is read by every kafka-python
reader of the job's topics, on a real broker: the open-transactions scan behind RequireStable,
serve's held-partition read (``ConsumerOffsetsIngestHeld``), the read of the record at a
committed offset (lag in seconds) and the commit client's answer reader on the responses topic.

Each topic is created with ``compression.type`` set to the codec, so the broker stores every
batch in it whatever the producer did (librdkafka sends a batch uncompressed when compressing
does not make it smaller)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from connectors.client.broker_offsets import BrokerOffsets
from connectors.client.connection import Connection
from connectors.sinks import open_sink
from connectors.sinks.log_end_samples import RecordTime
from state.coordinator.model import TopicPartition
from state.coordinator.requests import PartitionCommit, TxnOffsetCommitRequest
from state.formats.request_codec import encode_request
from state.formats.response_codec import RESPONSE_VERSION
from streaming.serve.log_end_cache import LogEndCache
from tests.connectors.kafka.transactions import Committer
from tests.fixtures.kafka import TopicFactory

CODECS = ("gzip", "snappy", "lz4", "zstd")
ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
#: Repeated text: makes every message worth compressing.
PADDING = "compressible " * 200


@pytest.mark.parametrize("codec", CODECS)
def test_every_python_reader_reads_batches_compressed_with(
    codec: str, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    compressed = {"compression.type": codec}
    ingest, responses = topic_factory(config=compressed), topic_factory(config=compressed)
    tp = TopicPartition(ingest, 0)
    options = {"bootstrap_servers": kafka_bootstrap}
    committer = Committer(kafka_bootstrap, ingest, **compressed)
    committer.begin()  # offset 0, then its commit marker at 1
    committer.send("h", 0, PADDING.encode())
    committer.commit()
    before_ms = int(time.time() * 1000)
    committer.begin()  # left open: offset 2 holds the partition
    request = TxnOffsetCommitRequest(
        request_id=uuid.uuid4().hex,
        group_id="g",
        transactional_id=committer.transactional_id,
        producer_id=1,
        producer_epoch=0,
        partitions=(PartitionCommit("orders", 0, 5, -1, PADDING),),
    )
    committer.send("g", 0, encode_request(request))
    after_ms = int(time.time() * 1000)
    time.sleep(0.05)  # a time taken at the refresh below would be after after_ms
    try:
        with BrokerOffsets(options, timeout_s=20) as broker:
            # RequireStable's scan: the open TxnOffsetCommit is decoded, its partition pending.
            applied = {ingest: {0: 2}}  # the job applied the committed transaction
            assert broker.open_transactions.unstable("g", [ORDERS_0, ORDERS_1], applied) == {
                ORDERS_0
            }
            # The record at a committed offset, read for the lag in seconds.
            (found,) = broker.record_times({tp: 0}).values()
            assert found.timestamp_ms < before_ms and not found.gone
        # serve's held partitions: the time of the open transaction's first record.
        with open_sink(f"sqlite:///{tmp_path / 'offsets.db'}") as sink:
            cache = LogEndCache(sink, options, ingest_topics=(ingest,))
            try:
                cache.refresh()
                held = cache.held()
            finally:
                cache.stop()
        assert list(held) == [tp] and before_ms <= held[tp] <= after_ms
    finally:
        committer.abort()

    # The commit client's answer reader, on the responses topic.
    closed = threading.Event()
    connection = Connection.open(
        client_id=f"codecs-{codec}",
        options=options,
        ingest_topic=ingest,
        responses_topic=responses,
        max_block_ms=10_000,
        closed=closed,
        deadline=time.monotonic() + 30,
    )
    try:
        answer = connection.reader.expect("r-1", time.monotonic() + 20)
        answers = Producer({"bootstrap.servers": kafka_bootstrap, **compressed})
        value = {"version": RESPONSE_VERSION, "requestId": "r-1", "errorCode": 0}
        answers.produce(responses, json.dumps({**value, "padding": PADDING}).encode(), b"r-1")
        assert answers.flush(30) == 0
        assert answer.result(timeout=30).error_code == 0
    finally:
        closed.set()
        connection.producer.close(timeout=5)
        connection.reader.join(10)


def test_a_zstd_batch_past_a_mebibyte_uncompressed_is_read(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Producers fill a batch by its compressed size: 3 MB of repetitive records make one zstd
    batch whose frame does not state its size (kafka-python alone reads 1 MiB of it)."""
    topic = topic_factory(config={"compression.type": "zstd"})
    producer = Producer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "compression.type": "zstd",
            "linger.ms": 1000,
            "batch.size": 8_000_000,
            "message.max.bytes": 8_000_000,
        }
    )
    for n in range(300):
        producer.produce(
            topic, b"%06d" % n + PADDING.encode() * 4, timestamp=1_000 + n, partition=0
        )
    assert producer.flush(30) == 0
    with BrokerOffsets({"bootstrap_servers": kafka_bootstrap}, timeout_s=20) as broker:
        assert broker.record_times({TopicPartition(topic, 0): 299}) == {
            TopicPartition(topic, 0): RecordTime(1_299)
        }
