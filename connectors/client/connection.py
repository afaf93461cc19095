"""The commit client's link to the job: a request sent to the ingest topic, its answer read on
the responses topic by one thread (:class:`ResponseReader`), so no caller thread polls Kafka.
Every way the topics cannot be reached is a :class:`TopicsNotAvailable` (15).
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Final

from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaError, NoBrokersAvailable

from connectors.client.errors import (
    AttemptTimeout,
    BrokersNotAvailable,
    ClientClosedError,
    TopicsNotAvailable,
)
from connectors.client.requests import IngestMessage
from connectors.kafka import batch_decoding  # noqa: F401  (zstd batches over 1 MiB)
from connectors.kafka.admin import list_offsets
from state.formats.response_codec import Response, decode_response

log = logging.getLogger(__name__)

#: How often open() looks again for a topic the job has not created yet.
_TOPIC_POLL_S: Final = 0.2
#: How often the response thread wakes up to expire deadlines and notice close().
POLL_INTERVAL_MS: Final = 100
#: How long the thread waits before polling again after a failed poll.
_POLL_RETRY_S: Final = 0.5


@dataclass
class Connection:
    """A started producer and response reader, for one commit client."""

    producer: KafkaProducer
    reader: ResponseReader
    ingest_topic: str
    _ingest_partitions: int

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
        """Connect with kafka-python ``options``, wait until ``deadline`` for both topics,
        position the reader at the responses' log end before anything is sent, and start it
        (it stops once ``closed`` is set). Raises :class:`BrokersNotAvailable` when no broker
        answers, :class:`TopicsNotAvailable` when a topic is missing or a client cannot open."""
        servers = ",".join(options.get("bootstrap_servers", []))
        try:
            consumer = KafkaConsumer(
                client_id=f"{client_id}-responses",
                group_id=None,
                enable_auto_commit=False,
                allow_auto_create_topics=False,
                fetch_max_wait_ms=POLL_INTERVAL_MS,
                # An answer is readable once its batch's transaction commits, with its records.
                **{**options, "isolation_level": "read_committed"},
            )
        except NoBrokersAvailable:
            raise BrokersNotAvailable(
                f"cannot reach Kafka at {servers} (NoBrokersAvailable): is the broker running, "
                "and this its address?"
            ) from None
        except KafkaError as exc:  # retriable for callers
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
        """Send ``message`` to its group's ingest partition: the future of its answer, or of
        ``AttemptTimeout`` at ``deadline``, :class:`ClientClosedError`,
        :class:`TopicsNotAvailable`. ``on_appended(timestamp_ms)`` gets its append time once the
        broker acknowledged it, on the producer's thread."""
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

    @property
    def ingest_partitions(self) -> int:
        """The ingest topic's partition count, as last read."""
        return self._ingest_partitions

    def refresh_partitions(self) -> None:
        """Re-read the ingest topic's partition count (after NOT_COORDINATOR: it may have grown)."""
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
        # Not past the deadline: a caller waits for this answer only a moment after it.
        time.sleep(max(0.0, min(_TOPIC_POLL_S, deadline - time.monotonic())))


@dataclass(order=True)
class _Pending:
    """One attempt waiting for its answer; ordered by deadline for the expiry heap."""

    deadline: float
    request_id: str = field(compare=False)
    future: Future[Response] = field(compare=False)


class ResponseReader:
    """Completes registered requests' futures from the responses topic (others' answers and
    replayed duplicates skipped) and fails expired ones, on its own thread, which owns the
    positioned ``consumer`` and closes it once ``closed`` is set. If the thread fails, every
    waiting future fails and :attr:`failure` keeps why, so later requests are refused."""

    def __init__(
        self, consumer: KafkaConsumer, topic: str, closed: threading.Event, client_id: str
    ) -> None:
        self.topic = topic
        self.client_id = client_id
        self.failure: BaseException | None = None
        self._consumer = consumer
        self._closed = closed
        self._lock = threading.Lock()  # guards _pending, _deadlines
        self._pending: dict[str, _Pending] = {}
        self._deadlines: list[_Pending] = []
        self._thread = threading.Thread(
            target=self._run, name=f"{client_id}-responses", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the thread to end (a no-op on the thread itself)."""
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def expect(self, request_id: str, deadline: float) -> Future[Response]:
        """Register an attempt: its future completes with the decoded answer, with a
        RuntimeError for a malformed one, or with :class:`AttemptTimeout` at ``deadline``
        (``time.monotonic()``)."""
        future: Future[Response] = Future()
        entry = _Pending(deadline, request_id, future)
        with self._lock:
            self._pending[request_id] = entry
            heapq.heappush(self._deadlines, entry)
        return future

    def forget(self, request_id: str) -> None:
        """Stop waiting for ``request_id`` (its future is left as it is)."""
        with self._lock:
            self._pending.pop(request_id, None)

    def has_pending(self) -> bool:
        """Whether any registered attempt is still waiting."""
        with self._lock:
            return bool(self._pending)

    def fail_all(self, exc: BaseException) -> None:
        """Fail every waiting future with ``exc`` and forget them."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            self._deadlines.clear()
        for entry in pending:
            set_exception(entry.future, exc)

    def _run(self) -> None:
        consumer = self._consumer
        try:
            while not self._closed.is_set():
                try:
                    batches = consumer.poll(timeout_ms=POLL_INTERVAL_MS)
                except KafkaError as exc:
                    # Broker restarts and the like: the consumer reconnects on the next poll.
                    log.warning("reading %s failed, retrying: %s", self.topic, exc)
                    self._closed.wait(_POLL_RETRY_S)
                    batches = {}
                for records in batches.values():
                    for record in records:
                        self._dispatch(record.key, record.value)
                self._expire(time.monotonic())
        except BaseException as exc:  # the thread must not die silently with requests waiting
            log.exception("the response thread of %s failed", self.client_id)
            self.failure = exc
            self.fail_all(exc)
        finally:
            consumer.close()

    def _dispatch(self, key: bytes | None, value: bytes | None) -> None:
        """Complete the attempt ``key`` names, if it is one of ours and still waiting."""
        if key is None:  # no readable key: not an answer of this client's
            return
        try:
            request_id = key.decode("utf-8")
        except UnicodeDecodeError:
            return
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is None:
            return  # another client's answer, or a replayed duplicate of one already handled
        try:
            response = decode_response(key, value)
        except ValueError as exc:
            error = RuntimeError(f"malformed response to {request_id}: {exc}")
            set_exception(pending.future, error)
            return
        set_result(pending.future, response)

    def _expire(self, now: float) -> None:
        """Fail the attempts whose deadline is ``now`` or earlier with :class:`AttemptTimeout`."""
        expired: list[_Pending] = []
        with self._lock:
            while self._deadlines and self._deadlines[0].deadline <= now:
                entry = heapq.heappop(self._deadlines)
                if self._pending.get(entry.request_id) is entry:
                    del self._pending[entry.request_id]
                    expired.append(entry)
            # Answered entries leave the heap lazily; keep it from growing without bound.
            if len(self._deadlines) > 2 * len(self._pending) + 1024:
                self._deadlines = list(self._pending.values())
                heapq.heapify(self._deadlines)
        for entry in expired:
            set_exception(entry.future, AttemptTimeout(entry.request_id))


def set_result(future: Future[Any], value: Any) -> None:
    """Complete ``future`` with ``value`` unless it is done already (the first outcome wins)."""
    with contextlib.suppress(InvalidStateError):
        future.set_result(value)


def set_exception(future: Future[Any], exc: BaseException) -> None:
    """Fail ``future`` with ``exc`` unless it is done already."""
    with contextlib.suppress(InvalidStateError):
        future.set_exception(exc)
