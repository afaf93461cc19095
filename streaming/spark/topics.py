"""The job's Kafka topics outside its query: created, their partition counts read, and the
markers that wake every state shard (at start, and as expiry ticks)."""

from __future__ import annotations

import functools
import logging
import threading

from kafka import KafkaProducer

from connectors.kafka.admin import (
    KafkaAdmin,
    dead_letter_topic_spec,
    ingest_topic_spec,
    offsets_topic_spec,
    responses_topic_spec,
)
from state.coordinator.partitioner import partition_for
from streaming.config import JobConfig
from streaming.spark.ingest import EXPIRY_TICK

log = logging.getLogger(__name__)


def ensure_topics(config: JobConfig) -> list[str]:
    """Create the job's topics where missing; refuse a layout the cluster cannot serve."""
    rf, isr, n = config.replication_factor, config.min_insync_replicas, config.partitions
    ingest = config.ingest_topic_partitions
    specs = [
        ingest_topic_spec(config.ingest_topic, ingest, rf, isr, n),
        offsets_topic_spec(config.offsets_topic, n, rf, isr, config.compression),
        responses_topic_spec(config.responses_topic, n, rf),
        dead_letter_topic_spec(config.dead_letter_topic, 1, rf),
    ]
    for tenant in config.tenants:
        specs.append(ingest_topic_spec(tenant.ingest_topic, ingest, rf, isr, n))
        specs.append(responses_topic_spec(tenant.responses_topic, n, rf))
    with KafkaAdmin(config.kafka_python_options()) as admin:
        return admin.ensure_topics(specs)


def ingest_layout(config: JobConfig) -> dict[str, int]:
    """The partition count of each of the job's ingest topics (they exist: ``ensure_topics``)."""
    with KafkaAdmin(config.kafka_python_options()) as admin:
        return admin.partition_counts(list(config.ingest_topics))


@functools.lru_cache(maxsize=4096)
def marker_key(shard: int, shards: int) -> bytes:
    """A message key whose shard (``partition_for``) is ``shard``, for the job's markers."""
    return next(
        key.encode()
        for key in (f"__consumer_offsets-marker-{shard}-{i}" for i in range(1_000_000))
        if partition_for(key, shards) == shard
    )


def write_markers(
    config: JobConfig,
    marker: bytes,
    ingest_partitions: int,
    shards: int,
    producer: KafkaProducer | None = None,
) -> None:
    """Write ``marker`` (acks=all) once per state shard, where that shard reads it."""
    own = producer is None
    producer = producer or KafkaProducer(acks="all", **config.kafka_python_options())
    try:
        for shard in range(shards):
            producer.send(
                config.ingest_topic,
                key=marker_key(shard, shards),
                value=marker,
                partition=shard % ingest_partitions,
            )
        producer.flush(timeout=60)
    finally:
        if own:
            producer.close()


def start_expiry_ticks(
    config: JobConfig, ingest_partitions: int, shards: int, stopping: threading.Event
) -> None:
    """Every ``retention_check_interval_ms`` until ``stopping``, wake every shard with an expiry
    tick (Kafka's periodic offset expiration); a failed write waits for the next."""
    interval_s = config.retention_check_interval_ms / 1000

    def tick() -> None:
        producer: KafkaProducer | None = None
        try:
            while not stopping.wait(interval_s):
                try:
                    if producer is None:
                        producer = KafkaProducer(acks="all", **config.kafka_python_options())
                    write_markers(config, EXPIRY_TICK, ingest_partitions, shards, producer)
                except Exception as error:  # keep ticking: the next tick covers this one
                    log.warning("expiry tick not written, retrying next interval: %s", error)
        finally:
            if producer is not None:
                producer.close(timeout=10)

    threading.Thread(target=tick, name="expiry-ticks", daemon=True).start()
