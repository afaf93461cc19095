"""The commit client: a request on the ingest topic, answered on the responses topic once its
records are in the offsets topic and the sink, behind Kafka's consumer API shapes: ``commit``
is ``commitSync`` (retried until its timeout), ``commit_async`` is ``commitAsync`` (one attempt:
a retry could land after a newer commit); ``delete_offsets`` and ``delete_group`` retry like
``commit``. Each call: build (``requests``) → send (``connection``) → read the answer
(``answers``), in the ``retries`` loop.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any, Final

from connectors.client.answers import (
    CommitCallback,
    CommitResult,
    DeleteResult,
    SentAttempt,
    async_commit_outcome,
    attempt_timeout_ms,
    committed,
)
from connectors.client.connection import Connection, set_exception, set_result
from connectors.client.errors import (
    ClientClosedError,
    OffsetsError,
    TopicsNotAvailable,
)
from connectors.client.requests import (
    Offsets,
    ingest_message,
    offset_commit,
    partitions_of,
    with_partitions,
    with_timeout,
)
from connectors.client.retries import Attempts, Backoff, MakeRequest, call_with_retries
from connectors.client.settings import ClientConfig, client_settings
from connectors.closing import CloseOnExit
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.requests import (
    Api,
    DeleteGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    Request,
)
from state.formats.response_codec import Response

log = logging.getLogger(__name__)

#: Kafka's ``offsets.commit.timeout.ms`` default (5000 ms): how long a call waits by default.
DEFAULT_TIMEOUT_S: Final = 5.0
#: Kafka's client ``retry.backoff.ms`` and ``retry.backoff.max.ms`` defaults.
DEFAULT_RETRY_BACKOFF_S: Final = 0.1
DEFAULT_RETRY_BACKOFF_MAX_S: Final = 1.0
#: How long close() waits for the response thread and producer, and how often it looks whether
#: in-flight requests were answered.
_CLOSE_JOIN_S: Final = 5.0
_CLOSE_POLL_S: Final = 0.02


class OffsetCommitClient(CloseOnExit):
    """Commits, deletes offsets and deletes groups through the offset manager's topics.

    Built from a :class:`ClientConfig` (e.g. ``JobConfig``) and/or keywords (which win); a
    ``tenant``'s client uses its topics, and what its ACLs refuse fails with
    GROUP_AUTHORIZATION_FAILED (30) or TOPIC_AUTHORIZATION_FAILED (29), as Kafka answers.
    Thread-safe: share one per process. Connects on first use (or :meth:`start`).
    :meth:`commit_async` futures complete on the response thread, where done-callbacks must not
    block; its ``callback`` runs on a thread of its own.
    """

    def __init__(
        self,
        config: ClientConfig | None = None,
        *,
        bootstrap_servers: str | Sequence[str] | None = None,
        ingest_topic: str | None = None,
        responses_topic: str | None = None,
        kafka_options: Mapping[str, Any] | None = None,
        tenant: str | None = None,
        client_id: str = "consumer-offsets-client",
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        retry_backoff_max_s: float = DEFAULT_RETRY_BACKOFF_MAX_S,
    ) -> None:
        settings = client_settings(
            config,
            bootstrap_servers=bootstrap_servers,
            ingest_topic=ingest_topic,
            responses_topic=responses_topic,
            kafka_options=kafka_options,
            tenant=tenant,
        )
        if default_timeout_s <= 0:
            raise ValueError(f"default_timeout_s must be > 0, got {default_timeout_s}")
        self.ingest_topic = settings.ingest_topic
        self.responses_topic = settings.responses_topic
        self.client_id = client_id
        self.default_timeout_s = float(default_timeout_s)
        self._options = settings.options

        self._start_lock = threading.Lock()
        self._closed = threading.Event()
        self._connection: Connection | None = None
        self._callbacks = CallbackThread(client_id)
        self._attempts = Attempts(
            submit=self._submit,
            forget=self._forget,
            refresh_partitions=self._refresh_partitions,
            closed=self._closed,
            backoff=Backoff(float(retry_backoff_s), float(retry_backoff_max_s)),
        )

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout_s: float | None = None) -> None:
        """Connect now (otherwise the first request does), waiting up to ``timeout_s`` for the
        topics: :class:`OffsetsError` COORDINATOR_NOT_AVAILABLE (15) when they do not exist,
        :class:`ClientClosedError` after :meth:`close`."""
        deadline = time.monotonic() + (self.default_timeout_s if timeout_s is None else timeout_s)
        try:
            self._ensure_started(deadline)
        except TopicsNotAvailable as exc:
            raise OffsetsError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from None

    def _ensure_started(self, deadline: float) -> Connection:
        """The open connection, opened now (waiting up to ``deadline``) on first use; raises
        :class:`TopicsNotAvailable`, or :class:`ClientClosedError` after :meth:`close`."""
        connection = self._connection
        if connection is not None and not self._closed.is_set():
            return connection
        with self._start_lock:
            if self._closed.is_set():
                raise ClientClosedError("the commit client is closed")
            if self._connection is not None:
                return self._connection
            connection = Connection.open(
                client_id=self.client_id,
                options=self._options,
                ingest_topic=self.ingest_topic,
                responses_topic=self.responses_topic,
                max_block_ms=max(1000, int(self.default_timeout_s * 1000)),
                closed=self._closed,
                deadline=deadline,
            )
            self._callbacks.start()
            self._connection = connection
            return connection

    def close(self, timeout_s: float | None = None) -> None:
        """Wait up to ``timeout_s`` (default: the client's timeout) for in-flight requests to be
        answered, then fail the rest with :class:`ClientClosedError`, stop the response thread
        and close the Kafka clients. Idempotent."""
        wait = self.default_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and self._connection is not None:
            if not self._connection.reader.has_pending():
                break
            time.sleep(_CLOSE_POLL_S)
        self._closed.set()
        connection = self._connection
        if connection is not None:
            connection.reader.join(_CLOSE_JOIN_S)
            connection.reader.fail_all(
                ClientClosedError("the commit client was closed before an answer came")
            )
        self._callbacks.shutdown()
        if connection is not None:
            connection.producer.close(timeout=_CLOSE_JOIN_S)

    # --- one attempt --------------------------------------------------------------------------

    def _submit(self, request: Request, deadline: float, sent: SentAttempt) -> Future[Response]:
        """Send ``request``: the future of its response (or ``AttemptTimeout`` at ``deadline``,
        ``ClientClosedError``, ``TopicsNotAvailable``); ``sent`` learns its timestamp."""
        message = ingest_message(request)  # ValueError for invalid Unicode, before sending
        try:
            connection = self._ensure_started(deadline)
        except (TopicsNotAvailable, ClientClosedError) as exc:
            sent.not_sent = True
            future: Future[Response] = Future()
            future.set_exception(exc)
            return future
        return connection.submit(message, deadline, sent.appended)

    def _timeout(self, timeout_s: float | None) -> float:
        """A call's timeout: ``timeout_s``, or the client's default; ValueError unless > 0."""
        timeout = self.default_timeout_s if timeout_s is None else float(timeout_s)
        if timeout <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        return timeout

    def _call(
        self,
        api: Api,
        group_id: str,
        keys: Sequence[TopicPartition],
        make: MakeRequest,
        timeout_s: float | None,
    ) -> tuple[str, ...]:
        """``retries.call_with_retries`` within ``timeout_s`` (default: the client's)."""
        timeout = self._timeout(timeout_s)
        return call_with_retries(self._attempts, api, group_id, keys, make, timeout)

    def _forget(self, request_id: str) -> None:
        """Stop waiting for ``request_id`` (a caller gave up on it)."""
        if self._connection is not None:
            self._connection.reader.forget(request_id)

    def _refresh_partitions(self) -> None:
        """Re-read the ingest topic's partition count (after NOT_COORDINATOR)."""
        if self._connection is not None:
            self._connection.refresh_partitions()

    # --- the calls ----------------------------------------------------------------------------

    def commit(
        self,
        group_id: str,
        offsets: Offsets,
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        retention_ms: int = -1,
        timeout_s: float | None = None,
    ) -> CommitResult:
        """Commit ``offsets`` for ``group_id``; return once they are durable and readable.

        ``offsets`` maps partitions to the next offset to consume, an int or an
        OffsetAndMetadata-like value. The member fields default to an admin's commit (accepted
        only while the group has no members); ``retention_ms`` -1 keeps the broker's retention.
        Retries the partitions that failed retriably until ``timeout_s``. Raises
        :class:`CommitFailedError` on a non-retriable error (see ``partitions`` for those
        committed) or at once when no broker answers, :class:`CommitTimeoutError` at the
        deadline, ValueError/TypeError for malformed offsets.
        """
        request = offset_commit(
            group_id,
            offsets,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            retention_ms=retention_ms,
        )
        if not request.partitions:
            return CommitResult(group_id, {})
        make = partial(with_partitions, request)
        keys = partitions_of(request)
        request_ids = self._call(Api.OFFSET_COMMIT, group_id, keys, make, timeout_s)
        return CommitResult(group_id, committed(request.partitions), request_ids)

    def commit_async(
        self,
        group_id: str,
        offsets: Offsets,
        callback: CommitCallback | None = None,
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        retention_ms: int = -1,
        timeout_s: float | None = None,
    ) -> Future[CommitResult]:
        """Send one commit, never retried, and return its future at once (``commitAsync``): it
        completes with the :class:`CommitResult` or the error (:func:`async_commit_outcome`),
        then ``callback(result, exception)`` runs on the callback thread. Malformed ``offsets``
        raise at once."""
        request = offset_commit(
            group_id,
            offsets,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            retention_ms=retention_ms,
        )
        timeout = self._timeout(timeout_s)
        result: Future[CommitResult] = Future()
        result.set_running_or_notify_cancel()
        sent = SentAttempt(attempt_timeout_ms(timeout))
        request = with_timeout(replace(request, request_id=str(uuid.uuid4())), sent.timeout_ms)
        assert isinstance(request, OffsetCommitRequest)

        def complete(done: CommitResult | BaseException) -> None:
            if isinstance(done, CommitResult):
                set_result(result, done)
            else:
                set_exception(result, done)
            if callback is not None:
                self._callbacks.run(callback, done)

        if not request.partitions:  # like Kafka's commitAsync of an empty map: nothing sent
            complete(CommitResult(group_id, {}))
            return result
        self._submit(request, time.monotonic() + timeout, sent).add_done_callback(
            lambda attempt: complete(async_commit_outcome(attempt, request, timeout, sent))
        )
        return result

    def delete_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition | tuple[str, int]],
        *,
        timeout_s: float | None = None,
    ) -> DeleteResult:
        """Delete the group's committed offsets of ``partitions`` (OffsetDelete, KIP-496),
        retried like :meth:`commit`. Raises :class:`OffsetDeleteFailedError`: GROUP_ID_NOT_FOUND
        (69), GROUP_SUBSCRIBED_TO_TOPIC (86) for a topic its members subscribe to."""
        keys = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))

        def make(request_id: str, asked: Sequence[TopicPartition]) -> Request:
            return OffsetDeleteRequest(request_id, group_id, tuple(asked))

        request_ids = self._call(Api.OFFSET_DELETE, group_id, keys, make, timeout_s)
        return DeleteResult(group_id, tuple(keys), request_ids)

    def delete_group(self, group_id: str, *, timeout_s: float | None = None) -> DeleteResult:
        """Delete an empty group and all its offsets (DeleteGroups). Raises
        :class:`DeleteGroupFailedError`: NON_EMPTY_GROUP (68), GROUP_ID_NOT_FOUND (69)."""

        def make(request_id: str, _asked: Sequence[TopicPartition]) -> Request:
            return DeleteGroupsRequest(request_id, group_id)

        request_ids = self._call(Api.DELETE_GROUPS, group_id, [], make, timeout_s)
        return DeleteResult(group_id, (), request_ids)


class CallbackThread:
    """Runs ``commit_async`` callbacks in completion order on a thread of their own (the response
    thread must never block; a callback may). One that raises is logged."""

    def __init__(self, client_id: str) -> None:
        self._name = f"{client_id}-cb"
        self._executor: ThreadPoolExecutor | None = None

    def start(self) -> None:
        """Create the thread's executor (when the client connects)."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=self._name)

    def run(self, callback: CommitCallback, outcome: CommitResult | BaseException) -> None:
        """Queue ``callback`` with ``outcome``; without a thread (not started, or shut down) run
        it here rather than drop it."""

        def call() -> None:
            try:
                if isinstance(outcome, CommitResult):
                    callback(outcome, None)
                else:
                    callback(None, outcome)
            except Exception:
                log.exception("commit callback %r raised", callback)

        executor = self._executor
        if executor is None:
            call()
            return
        try:
            executor.submit(call)
        except RuntimeError:  # shut down
            call()

    def shutdown(self) -> None:
        """Run the queued callbacks, then stop the thread (if it was started)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
