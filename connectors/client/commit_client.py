"""The commit client: how committers store, delete and drop offsets through the offset manager.

A committer does not talk to a broker's group coordinator here; it writes a request to the
ingest topic and the streaming job answers it on the responses topic once the resulting records
are in the offsets topic (``acks=all``) and the sink. :class:`OffsetCommitClient` hides that
round trip behind Kafka's consumer API shapes:

* :meth:`~OffsetCommitClient.commit` is ``commitSync``: one request per call (all partitions of
  the group batched), retried on retriable error codes with exponential backoff until the
  deadline (``offsets.commit.timeout.ms``-like, 5 s by default); raises
  :class:`CommitFailedError` when a partition fails for good, :class:`CommitTimeoutError`
  (REQUEST_TIMED_OUT, 7) when no definite answer came in time.
* :meth:`~OffsetCommitClient.commit_async` is ``commitAsync``: one attempt, never retried (a
  retry could land after a newer commit and rewind the group), a ``Future`` and an optional
  ``callback(result, exception)``.
* :meth:`~OffsetCommitClient.delete_offsets` (OffsetDelete, KIP-496) and
  :meth:`~OffsetCommitClient.delete_group` (DeleteGroups) wait and retry like ``commit``.

Requests go to the ingest partition that owns the group (``partition_for``, Kafka's
``abs(hashCode) % partitions`` over the ingest topic's partition count), keyed by group id, with
a fresh uuid4 request id. One background thread reads *every* partition of the responses topic
with a single consumer, from the end offsets taken before the first request was sent, and
completes the waiting futures by request id: many concurrent commits share that one poll loop,
and answers to other clients' requests are skipped.

A timeout is ambiguous, as in Kafka: the request may still be applied after the caller gave up.
Retrying a commit is safe (the same offsets again); committers that need certainty read the
offsets back (``connectors.client.offsets_reader``).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Protocol, Self

from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaError

from connectors.client.errors import (
    ClientClosedError,
    CommitFailedError,
    CommitTimeoutError,
    DeleteGroupFailedError,
    OffsetDeleteFailedError,
    OffsetsError,
    OffsetsRequestError,
    describe_error,
    error_code_of,
    is_retriable,
)
from connectors.kafka.admin import (
    DEFAULT_BOOTSTRAP_SERVERS,
    DEFAULT_INGEST_TOPIC,
    DEFAULT_RESPONSES_TOPIC,
    list_offsets,
)
from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetAndMetadata, TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    Api,
    DeleteGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    Request,
)
from state.formats.request_codec import encode_request

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ClientClosedError",
    "CommitCallback",
    "CommitFailedError",
    "CommitResult",
    "CommitTimeoutError",
    "DeleteGroupFailedError",
    "DeleteResult",
    "OffsetCommitClient",
    "OffsetDeleteFailedError",
    "OffsetsError",
    "OffsetsRequestError",
    "describe_error",
    "error_code_of",
    "list_offsets",
]

#: Kafka's ``offsets.commit.timeout.ms`` default (5000 ms): how long a call waits by default.
DEFAULT_TIMEOUT_S: Final = 5.0
#: Kafka's client ``retry.backoff.ms`` and ``retry.backoff.max.ms`` defaults.
DEFAULT_RETRY_BACKOFF_S: Final = 0.1
DEFAULT_RETRY_BACKOFF_MAX_S: Final = 1.0
#: Response message format version this client reads
#: (``state.formats.response_codec.RESPONSE_VERSION``).
RESPONSE_VERSION: Final = 1
# How often the response thread wakes up to expire deadlines and notice close().
_POLL_INTERVAL_MS: Final = 100
# How long close() waits for the response thread and producer.
_CLOSE_JOIN_S: Final = 5.0


# --- listing offsets ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommitResult:
    """A successful commit: every partition of ``offsets`` is in the offsets topic and the sink.

    ``request_ids`` lists one id per attempt (several when retriable errors were retried).
    """

    group_id: str
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    request_ids: tuple[str, ...] = ()

    @property
    def attempts(self) -> int:
        return len(self.request_ids)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """A successful OffsetDelete (``partitions`` as requested) or DeleteGroups (``()``)."""

    group_id: str
    partitions: tuple[TopicPartition, ...] = ()
    request_ids: tuple[str, ...] = ()


class OffsetLike(Protocol):
    """Anything with an ``offset`` (and optionally ``metadata`` and ``leader_epoch``), such as
    ``state.coordinator.model.OffsetAndMetadata`` or kafka-python's ``OffsetAndMetadata``."""

    @property
    def offset(self) -> int: ...


#: ``callback(result, exception)``: exactly one of the two is None.
CommitCallback = Callable[[CommitResult | None, BaseException | None], None]


# --- responses --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Response:
    """One message of the responses topic (see ``streaming.writer``)."""

    request_id: str
    error_code: int
    error_message: str | None
    partitions: dict[TopicPartition, tuple[int, str | None]]


def _parse_response(request_id: str, value: bytes | None) -> _Response:
    """Parse a response value; raises ValueError when it is not the documented JSON."""
    if value is None:
        raise ValueError("null response value")
    obj = json.loads(value.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("response is not a JSON object")
    version = obj.get("version")
    if version != RESPONSE_VERSION:
        raise ValueError(f"unsupported response version {version!r}")
    code = obj.get("errorCode", 0)
    if type(code) is not int:
        raise ValueError(f"errorCode is not an integer: {code!r}")
    partitions: dict[TopicPartition, tuple[int, str | None]] = {}
    for p in obj.get("partitions") or []:
        topic, index, pcode = p.get("topic"), p.get("partitionIndex"), p.get("errorCode", 0)
        if type(topic) is not str or type(index) is not int or type(pcode) is not int:
            raise ValueError(f"malformed partition entry {p!r}")
        partitions[TopicPartition(topic, index)] = (pcode, p.get("errorMessage"))
    message = obj.get("errorMessage")
    return _Response(request_id, code, message if isinstance(message, str) else None, partitions)


@dataclass(frozen=True, slots=True)
class _Outcome:
    """A response read against the partitions that were asked for."""

    error_code: int  # top-level code
    error_message: str | None
    codes: dict[TopicPartition, int]
    messages: dict[TopicPartition, str | None]

    @property
    def ok(self) -> bool:
        return self.error_code == 0 and all(c == 0 for c in self.codes.values())

    @property
    def retriable(self) -> bool:
        """Not ok, and every error in it is retriable."""
        errors = [c for c in (self.error_code, *self.codes.values()) if c != 0]
        return bool(errors) and all(is_retriable(c) for c in errors)

    def main_code(self) -> int:
        """The request's error: top-level, else the first non-retriable partition code, else
        the first failing partition code, else 0."""
        if self.error_code:
            return self.error_code
        failing = [c for c in self.codes.values() if c != 0]
        hard = [c for c in failing if not is_retriable(c)]
        return (hard or failing or [0])[0]

    def describe(self) -> str:
        parts = []
        if self.error_code:
            text = describe_error(self.error_code)
            parts.append(f"{text}: {self.error_message}" if self.error_message else text)
        for tp, code in self.codes.items():
            if code:
                text = f"{tp.topic}-{tp.partition}: {describe_error(code)}"
                reason = self.messages.get(tp)
                parts.append(f"{text}: {reason}" if reason else text)
        return "; ".join(parts)


def _outcome(response: _Response, asked: Sequence[TopicPartition]) -> _Outcome:
    """Per asked partition, its code: its own entry, else the top-level code (a request-level
    rejection such as INVALID_REQUEST answers every partition)."""
    codes: dict[TopicPartition, int] = {}
    messages: dict[TopicPartition, str | None] = {}
    for tp in asked:
        code, message = response.partitions.get(tp, (response.error_code, response.error_message))
        codes[tp] = code
        messages[tp] = message
    return _Outcome(response.error_code, response.error_message, codes, messages)


# --- the client -------------------------------------------------------------------------------


@dataclass(order=True)
class _Pending:
    deadline: float
    request_id: str = field(compare=False)
    future: Future[_Response] = field(compare=False)


_ERRORS: Final[dict[Api, type[OffsetsRequestError]]] = {
    Api.OFFSET_COMMIT: CommitFailedError,
    Api.OFFSET_DELETE: OffsetDeleteFailedError,
    Api.DELETE_GROUPS: DeleteGroupFailedError,
}
_TIMEOUT_ERRORS: Final[dict[Api, type[OffsetsRequestError]]] = {
    Api.OFFSET_COMMIT: CommitTimeoutError,
    Api.OFFSET_DELETE: OffsetDeleteFailedError,
    Api.DELETE_GROUPS: DeleteGroupFailedError,
}


class _AttemptTimeout(Exception):
    """Internal: no response to one attempt before its deadline."""


class _NotAvailable(Exception):
    """Internal: the job's topics cannot be reached (COORDINATOR_NOT_AVAILABLE)."""


class ClientConfig(Protocol):
    """What the client reads from a deployment's configuration (``streaming.config.JobConfig``
    has these): the two topics it talks through and kafka-python's client options."""

    @property
    def ingest_topic(self) -> str: ...

    @property
    def responses_topic(self) -> str: ...

    def kafka_python_options(self) -> dict[str, Any]: ...


class OffsetCommitClient:
    """Commits, deletes offsets and deletes groups through the offset manager's topics.

    Build it from the job's configuration (:class:`ClientConfig`, e.g. ``JobConfig``) (topic names,
    bootstrap servers, Kafka client
    options) or from the same values as keywords; keywords override the config. The client is
    thread-safe: share one per process. Kafka connections are opened on first use (or by
    :meth:`start`); :meth:`close` (or ``with``) releases them.

    Futures of :meth:`commit_async` complete on the client's response thread, and their
    ``add_done_callback`` functions run there: they must not block or call :meth:`commit`. The
    ``callback`` argument runs on a separate callback thread instead, in completion order, where
    blocking is allowed (but delays later callbacks).
    """

    def __init__(
        self,
        config: ClientConfig | None = None,
        *,
        bootstrap_servers: str | Sequence[str] | None = None,
        ingest_topic: str | None = None,
        responses_topic: str | None = None,
        kafka_options: Mapping[str, Any] | None = None,
        client_id: str = "consumer-offsets-client",
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        retry_backoff_max_s: float = DEFAULT_RETRY_BACKOFF_MAX_S,
    ) -> None:
        options: dict[str, Any] = (
            config.kafka_python_options()
            if config is not None
            else {"bootstrap_servers": DEFAULT_BOOTSTRAP_SERVERS.split(",")}
        )
        if bootstrap_servers is not None:
            servers = bootstrap_servers
            options["bootstrap_servers"] = (
                servers.split(",") if isinstance(servers, str) else list(servers)
            )
        if kafka_options:
            options.update({k.replace(".", "_"): v for k, v in kafka_options.items()})
        if default_timeout_s <= 0:
            raise ValueError(f"default_timeout_s must be > 0, got {default_timeout_s}")
        self.ingest_topic = ingest_topic or (
            config.ingest_topic if config else DEFAULT_INGEST_TOPIC
        )
        self.responses_topic = responses_topic or (
            config.responses_topic if config else DEFAULT_RESPONSES_TOPIC
        )
        self.client_id = client_id
        self.default_timeout_s = float(default_timeout_s)
        self._retry_backoff_s = float(retry_backoff_s)
        self._retry_backoff_max_s = float(retry_backoff_max_s)
        self._options = options

        self._lock = threading.Lock()  # guards _pending, _deadlines
        self._start_lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._deadlines: list[_Pending] = []
        self._closed = threading.Event()
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._thread: threading.Thread | None = None
        self._callbacks: ThreadPoolExecutor | None = None
        self._failure: BaseException | None = None
        self._ingest_partitions = 0

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout_s: float | None = None) -> None:
        """Connect and start the response thread now (otherwise the first request does).

        Waits up to ``timeout_s`` for the ingest and responses topics to exist; raises
        :class:`OffsetsError` with COORDINATOR_NOT_AVAILABLE (15) when they do not (the job has
        not created them yet), :class:`ClientClosedError` after :meth:`close`.
        """
        deadline = time.monotonic() + (self.default_timeout_s if timeout_s is None else timeout_s)
        try:
            self._ensure_started(deadline)
        except _NotAvailable as exc:
            raise OffsetsError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from None

    def _ensure_started(self, deadline: float) -> None:
        if self._thread is not None and not self._closed.is_set():
            return
        with self._start_lock:
            if self._closed.is_set():
                raise ClientClosedError("the commit client is closed")
            if self._thread is not None:
                return
            try:
                consumer = KafkaConsumer(
                    client_id=f"{self.client_id}-responses",
                    group_id=None,
                    enable_auto_commit=False,
                    allow_auto_create_topics=False,
                    fetch_max_wait_ms=_POLL_INTERVAL_MS,
                    **self._options,
                )
            except KafkaError as exc:  # NoBrokersAvailable and the like: retriable for callers
                servers = ",".join(self._options.get("bootstrap_servers", []))
                raise _NotAvailable(f"cannot reach Kafka at {servers}: {exc!r}") from None
            try:
                responses = self._wait_for_topic(consumer, self.responses_topic, deadline)
                ingest = self._wait_for_topic(consumer, self.ingest_topic, deadline)
                tps = [KafkaTopicPartition(self.responses_topic, p) for p in sorted(responses)]
                consumer.assign(tps)
                # Everything after these offsets can answer our requests: none is sent yet.
                ends = list_offsets(
                    consumer.end_offsets, tps, max(1.0, deadline - time.monotonic())
                )
                for tp, end in ends.items():
                    consumer.seek(tp, end)
                producer = KafkaProducer(
                    client_id=self.client_id,
                    acks="all",
                    linger_ms=1,
                    allow_auto_create_topics=False,
                    max_block_ms=max(1000, int(self.default_timeout_s * 1000)),
                    **self._options,
                )
            except KafkaError as exc:
                consumer.close()
                raise _NotAvailable(f"cannot start the commit client: {exc!r}") from None
            except BaseException:
                consumer.close()
                raise
            self._ingest_partitions = len(ingest)
            self._consumer = consumer
            self._producer = producer
            self._callbacks = ThreadPoolExecutor(1, thread_name_prefix=f"{self.client_id}-cb")
            thread = threading.Thread(
                target=self._run, name=f"{self.client_id}-responses", daemon=True
            )
            thread.start()
            self._thread = thread

    def _wait_for_topic(self, consumer: KafkaConsumer, topic: str, deadline: float) -> set[int]:
        while True:
            partitions = consumer.partitions_for_topic(topic)
            if partitions:
                return set(partitions)
            if time.monotonic() >= deadline:
                raise _NotAvailable(
                    f"topic {topic!r} does not exist: is the offsets job running with these "
                    "topic names?"
                )
            time.sleep(0.2)

    def close(self, timeout_s: float | None = None) -> None:
        """Wait up to ``timeout_s`` (default: the client's timeout) for in-flight requests to be
        answered, then fail the rest with :class:`ClientClosedError`, stop the response thread
        and close the Kafka clients. Idempotent."""
        wait = self.default_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and self._thread is not None:
            with self._lock:
                if not self._pending:
                    break
            time.sleep(0.02)
        self._closed.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_CLOSE_JOIN_S)
        self._fail_all(ClientClosedError("the commit client was closed before an answer came"))
        if self._callbacks is not None:
            self._callbacks.shutdown(wait=True)
        if self._producer is not None:
            self._producer.close(timeout=_CLOSE_JOIN_S)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- the response thread ------------------------------------------------------------------

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        try:
            while not self._closed.is_set():
                try:
                    batches = consumer.poll(timeout_ms=_POLL_INTERVAL_MS)
                except KafkaError as exc:
                    # Broker restarts and the like: the consumer reconnects on the next poll.
                    log.warning("reading %s failed, retrying: %s", self.responses_topic, exc)
                    self._closed.wait(0.5)
                    batches = {}
                for records in batches.values():
                    for record in records:
                        self._dispatch(record.key, record.value)
                self._expire(time.monotonic())
        except BaseException as exc:  # the thread must not die silently with requests waiting
            log.exception("the response thread of %s failed", self.client_id)
            self._failure = exc
            self._fail_all(exc)
        finally:
            consumer.close()

    def _dispatch(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
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
            response = _parse_response(request_id, value)
        except (ValueError, UnicodeDecodeError, AttributeError) as exc:
            error = RuntimeError(f"malformed response to {request_id}: {exc}")
            _set_exception(pending.future, error)
            return
        _set_result(pending.future, response)

    def _expire(self, now: float) -> None:
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
            _set_exception(entry.future, _AttemptTimeout(entry.request_id))

    def _fail_all(self, exc: BaseException) -> None:
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            self._deadlines.clear()
        for entry in pending:
            _set_exception(entry.future, exc)

    # --- one attempt --------------------------------------------------------------------------

    def _submit(self, request: Request, deadline: float) -> Future[_Response]:
        """Send ``request`` and return the future of its response (or of its failure:
        ``_AttemptTimeout`` at ``deadline``, ``ClientClosedError``, ``_NotAvailable``)."""
        # Raises ValueError for text that is not valid Unicode, before anything is registered.
        value = encode_request(request)
        key = request.group_id.encode("utf-8")
        future: Future[_Response] = Future()
        try:
            self._ensure_started(deadline)
        except (_NotAvailable, ClientClosedError) as exc:
            future.set_exception(exc)
            return future
        if self._failure is not None:
            future.set_exception(ClientClosedError(f"the response thread failed: {self._failure}"))
            return future
        entry = _Pending(deadline, request.request_id, future)
        with self._lock:
            self._pending[request.request_id] = entry
            heapq.heappush(self._deadlines, entry)
        producer = self._producer
        assert producer is not None
        try:
            sent = producer.send(
                self.ingest_topic,
                key=key,
                value=value,
                partition=partition_for(request.group_id, self._ingest_partitions),
            )
        except Exception as exc:  # KafkaTimeoutError (no metadata), closed producer, ...
            self._forget(request.request_id)
            _set_exception(future, _NotAvailable(f"cannot send to {self.ingest_topic}: {exc}"))
            return future

        def _sent(result: Any) -> None:
            if isinstance(result, BaseException):
                self._forget(request.request_id)
                _set_exception(
                    future, _NotAvailable(f"cannot send to {self.ingest_topic}: {result}")
                )

        sent.add_errback(_sent)
        return future

    def _forget(self, request_id: str) -> None:
        with self._lock:
            self._pending.pop(request_id, None)

    def _refresh_partitions(self) -> None:
        """Re-read the ingest topic's partition count (after NOT_COORDINATOR)."""
        producer = self._producer
        if producer is None:
            return
        try:
            partitions = producer.partitions_for(self.ingest_topic)
        except KafkaError as exc:
            log.debug("cannot refresh %s metadata: %s", self.ingest_topic, exc)
            return
        if partitions:
            self._ingest_partitions = len(partitions)

    def _backoff(self, attempt: int) -> float:
        """Kafka's exponential backoff with 20% jitter: 0.1 s, 0.2 s, ... up to the max."""
        base = min(self._retry_backoff_max_s, self._retry_backoff_s * (2**attempt))
        return base * random.uniform(0.8, 1.2)

    # --- the synchronous calls ----------------------------------------------------------------

    def _execute(
        self,
        api: Api,
        group_id: str,
        keys: Sequence[TopicPartition],
        make: Callable[[str, Sequence[TopicPartition]], Request],
        timeout_s: float | None,
    ) -> tuple[str, ...]:
        """Send, wait, retry the partitions that failed retriably; return the request ids.

        ``keys`` are the request's partitions ([] for DeleteGroups, retried whole).
        """
        timeout = self.default_timeout_s if timeout_s is None else float(timeout_s)
        if timeout <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        deadline = time.monotonic() + timeout
        codes: dict[TopicPartition, int] = dict.fromkeys(keys, ErrorCode.REQUEST_TIMED_OUT)
        remaining = list(keys)
        request_ids: list[str] = []
        last: _Outcome | None = None
        last_note = "no answer"
        for attempt in itertools.count():
            request_id = str(uuid.uuid4())
            request_ids.append(request_id)
            future = self._submit(make(request_id, remaining), deadline)
            try:
                # The response thread enforces the deadline; the margin only guards against a
                # wedged thread.
                response = future.result(max(0.0, deadline - time.monotonic()) + 2.0)
            except (_AttemptTimeout, TimeoutError):
                self._forget(request_id)
                break
            except _NotAvailable as exc:
                last_note = str(exc)
                last = _Outcome(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc), {}, {})
            else:
                last = _outcome(response, remaining)
                codes.update(last.codes)
                if last.ok:
                    return tuple(request_ids)
                if not last.retriable:
                    error = _ERRORS[api]
                    raise error(
                        last.main_code(),
                        codes,
                        f"group {group_id!r}: {last.describe()}",
                        group_id=group_id,
                        request_ids=request_ids,
                    )
                last_note = last.describe()
                if ErrorCode.NOT_COORDINATOR in (last.error_code, *last.codes.values()):
                    self._refresh_partitions()
                if last.error_code == 0:
                    remaining = [tp for tp in remaining if last.codes[tp] != 0]
            pause = min(self._backoff(attempt), deadline - time.monotonic())
            if pause <= 0:
                break
            log.debug("%s for group %r: retrying in %.2f s: %s", api, group_id, pause, last_note)
            if self._closed.wait(pause):
                raise ClientClosedError("the commit client was closed while retrying")
        timeout_error = _TIMEOUT_ERRORS[api]
        raise timeout_error(
            ErrorCode.REQUEST_TIMED_OUT,
            codes,
            f"group {group_id!r}: no definite answer within {timeout:g} s"
            + (f" (last: {last_note})" if last is not None else ""),
            group_id=group_id,
            request_ids=request_ids,
        )

    def commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetLike],
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        retention_ms: int = -1,
        timeout_s: float | None = None,
    ) -> CommitResult:
        """Commit ``offsets`` for ``group_id`` and return once they are durable and readable.

        ``offsets`` maps partitions to the next offset to consume (an int) or to an
        OffsetAndMetadata-like value carrying ``offset``, ``metadata`` and ``leader_epoch``.
        ``generation_id``/``member_id``/``group_instance_id`` identify a group member (the
        defaults commit as an admin or standalone consumer, accepted only while the group has
        no members); ``retention_ms`` -1 keeps the broker's ``offsets.retention.minutes``.

        Retries retriable errors (e.g. COORDINATOR_LOAD_IN_PROGRESS) with backoff, resending
        only the partitions that failed, until ``timeout_s`` (default 5 s). Raises
        :class:`CommitFailedError` on a non-retriable error (the other partitions *were*
        committed; see ``partitions``), :class:`CommitTimeoutError` at the deadline,
        ValueError/TypeError for malformed offsets. An empty mapping commits nothing.
        """
        commits = _partition_commits(offsets)
        if not commits:
            return CommitResult(group_id, {})
        by_tp = {TopicPartition(c.topic, c.partition): c for c in commits}

        def make(request_id: str, keys: Sequence[TopicPartition]) -> Request:
            return OffsetCommitRequest(
                request_id=request_id,
                group_id=group_id,
                partitions=tuple(by_tp[tp] for tp in keys),
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                retention_time_ms=retention_ms,
            )

        request_ids = self._execute(Api.OFFSET_COMMIT, group_id, list(by_tp), make, timeout_s)
        return CommitResult(group_id, _committed(commits), request_ids)

    def commit_async(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetLike],
        callback: CommitCallback | None = None,
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        retention_ms: int = -1,
        timeout_s: float | None = None,
    ) -> Future[CommitResult]:
        """Send one commit and return its future at once (Kafka's ``commitAsync``).

        Not retried. The future completes with the :class:`CommitResult`, or with
        :class:`CommitFailedError` (any failing partition), :class:`CommitTimeoutError` (no
        answer within ``timeout_s``), :class:`ClientClosedError`. ``callback(result, None)`` or
        ``callback(None, exception)`` runs afterwards on the callback thread; an exception it
        raises is logged. Malformed ``offsets`` raise at once (ValueError/TypeError).
        """
        commits = _partition_commits(offsets)
        timeout = self.default_timeout_s if timeout_s is None else float(timeout_s)
        if timeout <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        result: Future[CommitResult] = Future()
        result.set_running_or_notify_cancel()
        keys = [TopicPartition(c.topic, c.partition) for c in commits]
        request_id = str(uuid.uuid4())

        def finish(attempt: Future[_Response]) -> None:
            try:
                response = attempt.result()
            except _AttemptTimeout:
                outcome: BaseException | CommitResult = CommitTimeoutError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    dict.fromkeys(keys, ErrorCode.REQUEST_TIMED_OUT),
                    f"group {group_id!r}: no answer within {timeout:g} s",
                    group_id=group_id,
                    request_ids=[request_id],
                )
            except _NotAvailable as exc:
                outcome = CommitFailedError(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE),
                    f"group {group_id!r}: {exc}",
                    group_id=group_id,
                    request_ids=[request_id],
                )
            except BaseException as exc:
                outcome = exc
            else:
                answer = _outcome(response, keys)
                if answer.ok:
                    outcome = CommitResult(group_id, _committed(commits), (request_id,))
                else:
                    outcome = CommitFailedError(
                        answer.main_code(),
                        answer.codes,
                        f"group {group_id!r}: {answer.describe()}",
                        group_id=group_id,
                        request_ids=[request_id],
                    )
            if isinstance(outcome, CommitResult):
                _set_result(result, outcome)
            else:
                _set_exception(result, outcome)
            if callback is not None:
                self._run_callback(callback, outcome)

        if not commits:  # like Kafka's commitAsync of an empty map: done, nothing sent
            empty = CommitResult(group_id, {})
            _set_result(result, empty)
            if callback is not None:
                self._run_callback(callback, empty)
            return result
        request = OffsetCommitRequest(
            request_id=request_id,
            group_id=group_id,
            partitions=tuple(commits),
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            retention_time_ms=retention_ms,
        )
        self._submit(request, time.monotonic() + timeout).add_done_callback(finish)
        return result

    def _run_callback(
        self, callback: CommitCallback, outcome: CommitResult | BaseException
    ) -> None:
        def call() -> None:
            try:
                if isinstance(outcome, CommitResult):
                    callback(outcome, None)
                else:
                    callback(None, outcome)
            except Exception:
                log.exception("commit callback %r raised", callback)

        executor = self._callbacks
        if executor is None:
            call()  # failed before the client started: no callback thread yet
            return
        try:
            executor.submit(call)
        except RuntimeError:  # shut down: run it here rather than drop it
            call()

    def delete_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition | tuple[str, int]],
        *,
        timeout_s: float | None = None,
    ) -> DeleteResult:
        """Delete the group's committed offsets of ``partitions`` (OffsetDelete, KIP-496).

        Kafka's rules apply: the group must exist (GROUP_ID_NOT_FOUND, 69), and partitions of
        topics its members subscribe to are refused (GROUP_SUBSCRIBED_TO_TOPIC, 86). Waits and
        retries like :meth:`commit`; raises :class:`OffsetDeleteFailedError`.
        """
        keys = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))

        def make(request_id: str, asked: Sequence[TopicPartition]) -> Request:
            return OffsetDeleteRequest(request_id, group_id, tuple(asked))

        request_ids = self._execute(Api.OFFSET_DELETE, group_id, keys, make, timeout_s)
        return DeleteResult(group_id, tuple(keys), request_ids)

    def delete_group(self, group_id: str, *, timeout_s: float | None = None) -> DeleteResult:
        """Delete an empty group and all its offsets (DeleteGroups).

        Raises :class:`DeleteGroupFailedError`: NON_EMPTY_GROUP (68) while it has members,
        GROUP_ID_NOT_FOUND (69) when there is no such group.
        """

        def make(request_id: str, _asked: Sequence[TopicPartition]) -> Request:
            return DeleteGroupsRequest(request_id, group_id)

        request_ids = self._execute(Api.DELETE_GROUPS, group_id, [], make, timeout_s)
        return DeleteResult(group_id, (), request_ids)


# --- helpers ----------------------------------------------------------------------------------


def _set_result(future: Future[Any], value: Any) -> None:
    # A future completed twice (a late answer racing its deadline): the first outcome wins.
    with contextlib.suppress(InvalidStateError):
        future.set_result(value)


def _set_exception(future: Future[Any], exc: BaseException) -> None:
    with contextlib.suppress(InvalidStateError):
        future.set_exception(exc)


def _partition_commits(
    offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetLike],
) -> list[PartitionCommit]:
    """Validate and convert the caller's offsets (Kafka's client rejects negative offsets)."""
    commits = []
    for tp, value in offsets.items():
        topic, partition = tp
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise TypeError(f"partition of {topic!r} must be an int, got {partition!r}")
        if isinstance(value, int) and not isinstance(value, bool):
            offset, metadata, epoch = value, "", -1
        elif hasattr(value, "offset") and not isinstance(value, bool):
            offset = value.offset
            metadata = getattr(value, "metadata", "") or ""
            epoch = getattr(value, "leader_epoch", -1)
            epoch = -1 if epoch is None else epoch
        else:
            raise TypeError(f"offset of {topic}-{partition} must be an int, got {value!r}")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f"offset of {topic}-{partition} must be an int, got {offset!r}")
        if offset < 0:
            raise ValueError(f"invalid negative offset {offset} for {topic}-{partition}")
        if not isinstance(metadata, str):
            raise TypeError(f"metadata of {topic}-{partition} must be a str")
        commits.append(PartitionCommit(topic, partition, offset, int(epoch), metadata))
    return commits


def _committed(commits: Iterable[PartitionCommit]) -> dict[TopicPartition, OffsetAndMetadata]:
    return {
        TopicPartition(c.topic, c.partition): OffsetAndMetadata(
            offset=c.offset, leader_epoch=c.leader_epoch, metadata=c.metadata
        )
        for c in commits
    }
