"""Durable writes of encoded messages from the driver (librdkafka): ``acks=all`` and idempotent,
so a shard's records keep their order and a retry writes none twice. A refused message fails the
whole batch (:class:`DeliveryError`); the restart replays it, to the same records and answers."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from connectors.kafka.client_options import librdkafka_options

log = logging.getLogger(__name__)

#: Under the user's options: a micro-batch is one burst then a flush, so large batches cost no
#: latency.
PRODUCER_DEFAULTS: Mapping[str, Any] = {
    "linger.ms": 2,
    "batch.size": 1024 * 1024,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1024 * 1024,
    "message.max.bytes": 8 * 1024 * 1024,
}

#: Not overridable: every in-sync replica acknowledges; once and in order per partition.
_DURABLE = {"acks": "all", "enable.idempotence": True}


class DeliveryError(RuntimeError):
    """Kafka did not take every message of a batch."""


class DurableProducer:
    """Sends messages and waits until all are acknowledged (:meth:`flush`)."""

    def __init__(
        self, bootstrap_servers: str, kafka_options: Mapping[str, str], compression: str
    ) -> None:
        config = dict(PRODUCER_DEFAULTS)
        config.update(librdkafka_options(bootstrap_servers, kafka_options))
        config["compression.type"] = compression
        config.update(_DURABLE)
        # librdkafka's lines go through logging, where the job's outage line folds them.
        config["logger"] = logging.getLogger("librdkafka")
        self._config = config
        self._producer: Producer | None = None
        self._failures: list[str] = []
        self._failed = 0

    def _client(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self._config)
        return self._producer

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failed += 1
            if len(self._failures) < 5:
                self._failures.append(
                    f"{message.topic()}[{message.partition()}]: {error.str()} ({error.name()})"
                )

    def send(
        self,
        topic: str,
        keys: Iterable[bytes | None],
        values: Iterable[bytes | None],
        partitions: Iterable[int] | None = None,
    ) -> int:
        """Queue messages (in order per partition); returns how many. Partitions default to
        librdkafka's partitioner over the key."""
        producer = self._client()
        produce, poll, on_delivery = producer.produce, producer.poll, self._delivered
        # -1 (librdkafka's RD_KAFKA_PARTITION_UA): the partitioner chooses.
        chosen = itertools.repeat(-1) if partitions is None else partitions
        count = 0
        for key, value, partition in zip(keys, values, chosen, strict=partitions is not None):
            while True:
                try:
                    produce(topic, value, key, partition, on_delivery=on_delivery)
                    break
                except BufferError:
                    poll(0.01)  # the local queue is full: let deliveries drain it
            count += 1
        poll(0)
        return count

    def flush(self, timeout_s: float) -> None:
        """Wait until every queued message is acknowledged; raise if any was not."""
        producer = self._client()
        try:
            left = producer.flush(timeout_s)
        except KafkaException as error:
            self._reset()
            raise DeliveryError(f"producer failed: {error}") from error
        failed, failures = self._failed, self._failures
        if left or failed:
            self._reset()
            detail = "; ".join(failures) or f"{left} messages unacknowledged after {timeout_s} s"
            raise DeliveryError(f"{failed + left} messages not written: {detail}")

    def _reset(self) -> None:
        """A new producer: after a failure the old one's idempotence state may be unusable."""
        self._failures, self._failed = [], 0
        self._producer = None

    def close(self, timeout_s: float = 10.0) -> None:
        if self._producer is not None:
            self._producer.flush(timeout_s)
            self._producer = None
