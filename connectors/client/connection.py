"""The commit client's link to the job: a producer to the ingest topic, a reader of the responses.

:meth:`Connection.open` waits for both topics (the job creates them), positions the response
reader at the end of the responses topic *before* any request is sent (so every answer to this
client is read), and opens the producer (``acks=all``). :meth:`Connection.submit` then sends one
attempt and returns the future of its answer. Every way the topics cannot be reached is a
:class:`TopicsNotAvailable`, which callers turn into COORDINATOR_NOT_AVAILABLE (15).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Final

from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaError, NoBrokersAvailable

from connectors.client.errors import BrokersNotAvailable, ClientClosedError, TopicsNotAvailable
from connectors.client.requests import IngestMessage
from connectors.client.responses import POLL_INTERVAL_MS, ResponseReader, set_exception
from connectors.kafka.admin import list_offsets
from state.formats.response_codec import Response

log = logging.getLogger(__name__)

__all__ = ["Connection"]

# How often open() looks again for a topic the job has not created yet.
_TOPIC_POLL_S: Final = 0.2


class Connection:
    """A started producer and response reader, for one commit client."""

    def __init__(
        self,
        producer: KafkaProducer,
        reader: ResponseReader,
        ingest_topic: str,
        ingest_partitions: int,
    ) -> None:
        self.producer = producer
        self.reader = reader
        self.ingest_topic = ingest_topic
        self._ingest_partitions = ingest_partitions

    @classmethod
    def open(
        cls,
        *,
        client_id: str,
        options: Mapping[str, Any],
        ingest_topic: str,
        responses_topic: str,
        max_block_ms: int,
        closed: threading.Event,
        deadline: float,
    ) -> Connection:
        """Connect with kafka-python ``options``, wait until ``deadline`` for both topics, and
        start the response reader (it stops once ``closed`` is set).

        Raises :class:`BrokersNotAvailable` when no broker answers at the bootstrap servers,
        :class:`TopicsNotAvailable` when a topic does not exist by the deadline or a client
        cannot be opened.
        """
        try:
            consumer = KafkaConsumer(
                client_id=f"{client_id}-responses",
                group_id=None,
                enable_auto_commit=False,
                allow_auto_create_topics=False,
                fetch_max_wait_ms=POLL_INTERVAL_MS,
                **options,
            )
        except NoBrokersAvailable:
            servers = ",".join(options.get("bootstrap_servers", []))
            raise BrokersNotAvailable(
                f"cannot reach Kafka at {servers} (NoBrokersAvailable): is the broker running, "
                "and this its address?"
            ) from None
        except KafkaError as exc:  # retriable for callers
            servers = ",".join(options.get("bootstrap_servers", []))
            raise TopicsNotAvailable(f"cannot reach Kafka at {servers}: {exc!r}") from None
        try:
            responses = _wait_for_topic(consumer, responses_topic, deadline)
            ingest = _wait_for_topic(consumer, ingest_topic, deadline)
            tps = [KafkaTopicPartition(responses_topic, p) for p in sorted(responses)]
            consumer.assign(tps)
            # Everything after these offsets can answer our requests: none is sent yet.
            ends = list_offsets(consumer.end_offsets, tps, max(1.0, deadline - time.monotonic()))
            for tp, end in ends.items():
                consumer.seek(tp, end)
            producer = KafkaProducer(
                client_id=client_id,
                acks="all",
                linger_ms=1,
                allow_auto_create_topics=False,
                max_block_ms=max_block_ms,
                **options,
            )
        except KafkaError as exc:
            consumer.close()
            raise TopicsNotAvailable(f"cannot start the commit client: {exc!r}") from None
        except BaseException:
            consumer.close()
            raise
        reader = ResponseReader(consumer, responses_topic, closed, client_id)
        connection = cls(producer, reader, ingest_topic, len(ingest))
        reader.start()
        return connection

    def submit(
        self,
        message: IngestMessage,
        deadline: float,
        on_appended: Callable[[int], None] | None = None,
    ) -> Future[Response]:
        """Send ``message`` to the ingest partition that owns its group and return the future
        of its answer, or of its failure: ``AttemptTimeout`` at ``deadline``,
        :class:`ClientClosedError`, :class:`TopicsNotAvailable` when it cannot be sent.
        ``on_appended(timestamp_ms)`` gets the message's timestamp once the broker acknowledged
        it (its append time on the ingest topic, LogAppendTime), on the producer's thread."""
        failure = self.reader.failure
        if failure is not None:
            failed: Future[Response] = Future()
            failed.set_exception(ClientClosedError(f"the response thread failed: {failure}"))
            return failed
        request_id = message.request_id
        future = self.reader.expect(request_id, deadline)
        try:
            sent = self.producer.send(
                self.ingest_topic,
                key=message.key,
                value=message.value,
                partition=message.partition(self._ingest_partitions),
            )
        except Exception as exc:  # KafkaTimeoutError (no metadata), closed producer, ...
            self.reader.forget(request_id)
            set_exception(future, TopicsNotAvailable(f"cannot send to {self.ingest_topic}: {exc}"))
            return future

        def _sent(result: Any) -> None:
            if isinstance(result, BaseException):
                self.reader.forget(request_id)
                set_exception(
                    future, TopicsNotAvailable(f"cannot send to {self.ingest_topic}: {result}")
                )

        sent.add_errback(_sent)
        if on_appended is not None:
            sent.add_callback(lambda metadata: on_appended(int(metadata.timestamp)))
        return future

    def refresh_partitions(self) -> None:
        """Re-read the ingest topic's partition count (after NOT_COORDINATOR: it may have grown,
        and with it the partition that owns a group)."""
        try:
            partitions = self.producer.partitions_for(self.ingest_topic)
        except KafkaError as exc:
            log.debug("cannot refresh %s metadata: %s", self.ingest_topic, exc)
            return
        if partitions:
            self._ingest_partitions = len(partitions)


def _wait_for_topic(consumer: KafkaConsumer, topic: str, deadline: float) -> set[int]:
    """The partitions of ``topic`` once it exists; :class:`TopicsNotAvailable` at ``deadline``."""
    while True:
        partitions = consumer.partitions_for_topic(topic)
        if partitions:
            return set(partitions)
        if time.monotonic() >= deadline:
            raise TopicsNotAvailable(
                f"topic {topic!r} does not exist: is the offsets job running with these "
                "topic names?"
            )
        time.sleep(_TOPIC_POLL_S)
