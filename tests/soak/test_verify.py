"""The soak's end check reads the ingest log for a request answered twice differently: two
copies of it are two requests (on a real broker)."""

from __future__ import annotations

from confluent_kafka import Producer

from tests.fixtures.kafka import TopicFactory
from tests.soak.verify import copies_in_log


def _request(request_id: str) -> bytes:
    return b'{"version":1,"requestId":"' + request_id.encode() + b'","groupId":"g"}'


def test_copies_in_log_counts_each_request_ids_messages(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    # r-1 twice (once in each partition), r-2 and r-10 once; r-3 never.
    for request_id, partition in (("r-1", 0), ("r-2", 0), ("r-10", 1), ("r-1", 1)):
        producer.produce(topic, key=b"g", value=_request(request_id), partition=partition)
    assert producer.flush(30) == 0
    assert copies_in_log(kafka_bootstrap, topic, 2, ["r-1", "r-2", "r-3"]) == {
        "r-1": 2,
        "r-2": 1,
        "r-3": 0,
    }
    assert copies_in_log(kafka_bootstrap, topic, 2, []) == {}
