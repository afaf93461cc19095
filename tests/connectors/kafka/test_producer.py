"""The driver's producer reports a message the broker refused, on a real broker: librdkafka calls
back only for failures, through the producer's one delivery callback."""

from __future__ import annotations

import pytest

from connectors.kafka.producer import DeliveryError, DurableProducer
from tests.fixtures.kafka import TopicFactory


def test_a_message_the_broker_refuses_fails_the_flush_naming_it(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2, config={"max.message.bytes": "1024"})
    producer = DurableProducer(kafka_bootstrap, {}, "none")
    try:
        # A record batch is refused whole: each message to a partition of its own.
        assert producer.send(topic, [b"small", b"large"], [b"v", b"x" * 4096], [0, 1]) == 2
        with pytest.raises(DeliveryError) as failed:
            producer.flush(30)
        # One message of two refused, named by its topic, partition and Kafka's error.
        assert str(failed.value).startswith("1 messages not written: ")
        assert f"{topic}[1]" in str(failed.value)
        assert "MSG_SIZE_TOO_LARGE" in str(failed.value)
        # The next batch starts clean (a new producer, no failure carried over).
        producer.send(topic, [b"k"], [b"v"])
        producer.flush(30)
    finally:
        producer.close()
