"""The records each side wrote for the harness's groups, read back and decoded by ``state/``.

Kafka writes to its ``__consumer_offsets``, the job to its offsets topic; both are read from the
beginning, decoded with ``state.formats.records``, and kept per group in log order, without
timestamps (the two sides commit at different times). Records of other key types (a 4.1 broker's
consumer-protocol and share-group records) are not the harness's and are skipped.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from connectors.kafka.admin import consumer_end_offsets
from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
)
from state.formats.records import decode_record
from tests.conformance.operations import RecordSummary


def summary(record: Record) -> RecordSummary | None:
    """The record without its timestamps; None for a key type the harness does not compare."""
    key, value = record
    if isinstance(key, OffsetCommitKey):
        if value is None:
            return ("offset", key.topic, key.partition, None)
        assert isinstance(value, OffsetAndMetadata)
        expire = value.expire_timestamp_ms
        retention = None if expire is None else expire - value.commit_timestamp_ms
        return (
            "offset",
            key.topic,
            key.partition,
            (value.offset, value.leader_epoch, value.metadata, retention),
        )
    if isinstance(key, GroupMetadataKey):
        if value is None:
            return ("group", None)
        assert isinstance(value, GroupMetadataValue)
        members = tuple(m.member_id for m in value.members)
        return (
            "group",
            (value.protocol_type, value.generation, value.protocol, value.leader, members),
        )
    return None


def _consumer(bootstrap_servers: str, isolation_level: str = "read_uncommitted") -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        enable_auto_commit=False,
        exclude_internal_topics=False,
        isolation_level=isolation_level,
    )


def end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """Each partition's end offset: where the records of what is sent next begin."""
    consumer = _consumer(bootstrap_servers)
    try:
        partitions = sorted(consumer.partitions_for_topic(topic) or [])
        if not partitions:
            raise RuntimeError(f"{topic} has no partitions yet: there is no end to read from")
        tps = [KafkaTopicPartition(topic, p) for p in partitions]
        return {tp.partition: end for tp, end in consumer_end_offsets(consumer, tps).items()}
    finally:
        consumer.close()


def group_records(
    bootstrap_servers: str,
    topic: str,
    groups: Collection[str],
    since: dict[int, int],
    timeout_s: float = 60.0,
    isolation_level: str = "read_uncommitted",
) -> dict[str, list[RecordSummary]]:
    """Every compared record ``topic`` holds for ``groups`` from the offsets ``since``, per
    group in log order (``read_committed``: up to the last stable offset, aborted ones left
    out, as Kafka's coordinator loads them)."""
    wanted = set(groups)
    out: dict[str, list[RecordSummary]] = {g: [] for g in wanted}
    consumer = _consumer(bootstrap_servers, isolation_level)
    try:
        tps = [KafkaTopicPartition(topic, p) for p in sorted(since)]
        consumer.assign(tps)
        ends = consumer_end_offsets(consumer, tps)
        for tp in tps:
            consumer.seek(tp, since[tp.partition])
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} did not reach its end offsets")
            for batch in consumer.poll(timeout_ms=500).values():
                for message in batch:
                    record = decode_record(message.key, message.value)
                    group = getattr(record.key, "group", None)
                    if group in wanted:
                        compared = summary(record)
                        if compared is not None:
                            out[group].append(compared)
        return out
    finally:
        consumer.close()
