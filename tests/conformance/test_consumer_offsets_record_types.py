"""``__consumer_offsets`` as a real Kafka 4.1 broker writes it, read by ``state/``.

Groups of both protocols run on the test broker — a kafka-python consumer in a classic group,
confluent-kafka consumers with ``group.protocol=consumer`` (KIP-848, one subscribed by name and
one by regular expression), admin-only commits — and then every record of the broker's
``__consumer_offsets`` is classified by type; the classic types are decoded in full, and the
job's shard loader replays all of them. Nothing may be unreadable; an unknown type is counted.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from connectors.kafka.admin import consumer_end_offsets
from state.coordinator.model import UnknownKey
from state.engine.loading import replay_log, snapshot_records
from state.formats.records import RECORD_TYPES, RecordFormatError, classify_key, decode_record
from tests.conformance.harness import KAFKA_OFFSETS_TOPIC
from tests.fixtures.admin_commits import admin_commit
from tests.fixtures.kafka import TopicFactory

_MESSAGES = 30


def _consume_classic(bootstrap: str, topic: str, group: str) -> None:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < _MESSAGES:
            assert time.monotonic() < deadline, f"classic group {group} read {seen} messages"
            seen += sum(len(b) for b in consumer.poll(timeout_ms=500).values())
        consumer.commit()
    finally:
        consumer.close()


def _consume_kip848(bootstrap: str, subscription: str, group: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([subscription])
        seen = 0
        deadline = time.monotonic() + 90
        while seen < _MESSAGES:
            assert time.monotonic() < deadline, f"KIP-848 group {group} read {seen} messages"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _read_all(bootstrap: str, topic: str) -> list[tuple[bytes, bytes | None]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, exclude_internal_topics=False
    )
    try:
        tps = [KafkaTopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        ends = consumer_end_offsets(consumer, tps)
        consumer.seek_to_beginning(*tps)
        out: list[tuple[bytes, bytes | None]] = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"reading {topic} did not reach its end"
            for batch in consumer.poll(timeout_ms=500).values():
                out += [(m.key, m.value) for m in batch]
        return out
    finally:
        consumer.close()


def test_every_record_a_41_broker_writes_is_decoded_or_classified(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    tag = uuid.uuid4().hex[:8]
    topic = topic_factory(partitions=3, name=f"record-types-{tag}")
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(_MESSAGES):
        producer.send(topic, f"m{i}".encode(), partition=i % 3)
    producer.flush()
    producer.close()

    groups = {
        "classic": f"classic-{tag}",
        "consumer": f"kip848-{tag}",
        "consumer, regex": f"kip848-regex-{tag}",
        "admin commit": f"admin-{tag}",
    }
    _consume_classic(kafka_bootstrap, topic, groups["classic"])
    _consume_kip848(kafka_bootstrap, topic, groups["consumer"])
    _consume_kip848(kafka_bootstrap, f"^record-types-{tag}.*", groups["consumer, regex"])
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin_commit(admin, groups["admin commit"], {(topic, 0): 7})

    records = _read_all(kafka_bootstrap, KAFKA_OFFSETS_TOPIC)
    counts: Counter[tuple[str, str]] = Counter()
    ours: Counter[str] = Counter()
    for key, value in records:
        record_type = classify_key(key)
        if record_type.type_id <= 2:
            record = decode_record(key, value)  # classic types: decoded in full, or it raises
            assert not isinstance(record.key, UnknownKey)
            how = "decoded"
        else:
            how = "classified"
        counts[(record_type.name, how)] += 1
        if record_type.group_id in groups.values():
            ours[record_type.name] += 1

    print(f"\n{KAFKA_OFFSETS_TOPIC} of a Kafka 4.1 broker, {len(records)} records:")
    print("| record type | records | read as |")
    print("|---|---|---|")
    for (name, how), count in sorted(counts.items()):
        print(f"| {name} | {count} | {how} |")
    assert not any(name.startswith("Unknown") for name, _ in counts), counts
    # What the groups of this test must have left (both protocols, and the regex).
    for name in (
        "OffsetCommit",
        "GroupMetadata",
        "ConsumerGroupMetadata",
        "ConsumerGroupMemberMetadata",
        "ConsumerGroupTargetAssignmentMetadata",
        "ConsumerGroupTargetAssignmentMember",
        "ConsumerGroupCurrentMemberAssignment",
    ):
        assert ours[name] > 0, f"no {name} record of this test's groups: {dict(ours)}"
    assert set(ours) <= set(RECORD_TYPES.values())

    # The job's shard loader takes all of them: classic records replayed, the rest counted.
    unreadable: list[RecordFormatError] = []
    loaded = replay_log(0, records, unreadable.append)
    assert unreadable == []
    assert loaded.records_read == len(records)
    snapshot = snapshot_records(loaded.state).to_pylist()
    committed = {
        (r["group_id"], r["partition"]): r["offset"]
        for r in snapshot
        if r["kind"] == "offset" and r["topic"] == topic
    }
    for group in (groups["classic"], groups["consumer"], groups["consumer, regex"]):
        assert sum(committed.get((group, p), 0) for p in range(3)) == _MESSAGES, committed
    assert committed[(groups["admin commit"], 0)] == 7
