"""The commit client: how committers store, delete and drop offsets through the offset manager.

A committer writes a request to the ingest topic and the streaming job answers it on the
responses topic once its records are in the offsets topic (``acks=all``) and the sink.
:class:`OffsetCommitClient` hides that round trip behind Kafka's consumer API shapes:
:meth:`~OffsetCommitClient.commit` is ``commitSync`` (retried until its timeout, 5 s by
default, like ``offsets.commit.timeout.ms``), :meth:`~OffsetCommitClient.commit_async` is
``commitAsync`` (one attempt, never retried: a retry could land after a newer commit), and
:meth:`~OffsetCommitClient.delete_offsets` (OffsetDelete) and
:meth:`~OffsetCommitClient.delete_group` (DeleteGroups) wait and retry like ``commit``.

Each call goes build → send → read the answer: ``requests`` builds the request, ``connection``
sends it and reads its answer, ``answers`` reads that answer (or its absence) against the
request; ``retries`` holds the ``commitSync`` loop over those steps. A call that timed out says
whether its request can still be applied (``answers``, after the job's own deadline rule).
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

__all__ = ["DEFAULT_TIMEOUT_S", "ClientConfig", "OffsetCommitClient"]

#: Kafka's ``offsets.commit.timeout.ms`` default (5000 ms): how long a call waits by default.
DEFAULT_TIMEOUT_S: Final = 5.0
#: Kafka's client ``retry.backoff.ms`` and ``retry.backoff.max.ms`` defaults.
DEFAULT_RETRY_BACKOFF_S: Final = 0.1
DEFAULT_RETRY_BACKOFF_MAX_S: Final = 1.0
# How long close() waits for the response thread and producer.
_CLOSE_JOIN_S: Final = 5.0
# How often close() looks whether in-flight requests were answered.
_CLOSE_POLL_S: Final = 0.02


class OffsetCommitClient(CloseOnExit):
    """Commits, deletes offsets and deletes groups through the offset manager's topics.

    Built from the job's configuration (:class:`ClientConfig`, e.g. ``JobConfig``) and/or the
    same values as keywords (keywords win). A ``tenant``'s client uses that tenant's topics; what
    its ACLs refuse fails with GROUP_AUTHORIZATION_FAILED (30) or TOPIC_AUTHORIZATION_FAILED
    (29), as Kafka answers. Thread-safe: share one per process. Connects on first use (or
    :meth:`start`); :meth:`close` (or ``with``) releases the connections.

    :meth:`commit_async` futures complete on the response thread, where done-callbacks must not
    block; its ``callback`` argument runs on a callback thread of its own instead.
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
        """Connect and start the response thread now (otherwise the first request does).

        Waits up to ``timeout_s`` for the ingest and responses topics to exist; raises
        :class:`OffsetsError` with COORDINATOR_NOT_AVAILABLE (15) when they do not (the job has
        not created them yet), :class:`ClientClosedError` after :meth:`close`.
        """
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
        """Send ``request`` and return the future of its response (or of its failure:
        ``AttemptTimeout`` at ``deadline``, ``ClientClosedError``, ``TopicsNotAvailable``);
        ``sent`` learns the message's timestamp once the broker acknowledged it."""
        # Raises ValueError for text that is not valid Unicode, before anything is registered.
        message = ingest_message(request)
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
        """A waiting call (``retries.call_with_retries``) within ``timeout_s`` (default: the
        client's): sends ``make(request_id, partitions still to do)`` until answered."""
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
        OffsetAndMetadata-like value (``offset``, ``metadata``, ``leader_epoch``). The member
        fields default to an admin's commit (accepted only while the group has no members);
        ``retention_ms`` -1 keeps the broker's retention.

        Retries retriable errors, resending the partitions that failed, until ``timeout_s``.
        Raises :class:`CommitFailedError` on a non-retriable error (other partitions *were*
        committed: see ``partitions``) or at once when no broker answers (nothing sent),
        :class:`CommitTimeoutError` at the deadline, ValueError/TypeError for malformed offsets.
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
        """Send one commit, never retried, and return its future at once (``commitAsync``).

        The future completes with the :class:`CommitResult` or the error
        (:func:`async_commit_outcome`); ``callback(result, exception)`` then runs on the callback
        thread. Malformed ``offsets`` raise at once.
        """
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

        def finish(attempt: Future[Response]) -> None:
            done = async_commit_outcome(attempt, request, timeout, sent)
            if isinstance(done, CommitResult):
                set_result(result, done)
            else:
                set_exception(result, done)
            if callback is not None:
                self._callbacks.run(callback, done)

        if not request.partitions:  # like Kafka's commitAsync of an empty map: nothing sent
            empty = CommitResult(group_id, {})
            set_result(result, empty)
            if callback is not None:
                self._callbacks.run(callback, empty)
            return result
        self._submit(request, time.monotonic() + timeout, sent).add_done_callback(finish)
        return result

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

        request_ids = self._call(Api.OFFSET_DELETE, group_id, keys, make, timeout_s)
        return DeleteResult(group_id, tuple(keys), request_ids)

    def delete_group(self, group_id: str, *, timeout_s: float | None = None) -> DeleteResult:
        """Delete an empty group and all its offsets (DeleteGroups).

        Raises :class:`DeleteGroupFailedError`: NON_EMPTY_GROUP (68) while it has members,
        GROUP_ID_NOT_FOUND (69) when there is no such group.
        """

        def make(request_id: str, _asked: Sequence[TopicPartition]) -> Request:
            return DeleteGroupsRequest(request_id, group_id)

        request_ids = self._call(Api.DELETE_GROUPS, group_id, [], make, timeout_s)
        return DeleteResult(group_id, (), request_ids)


class CallbackThread:
    """Runs ``commit_async`` callers' callbacks on one thread of their own, in completion order:
    futures complete on the response thread, which must never block, and a callback may. A
    callback that raises is logged (the commit's outcome is already decided)."""

    def __init__(self, client_id: str) -> None:
        self._name = f"{client_id}-cb"
        self._executor: ThreadPoolExecutor | None = None

    def start(self) -> None:
        """Create the thread's executor (when the client connects)."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=self._name)

    def run(self, callback: CommitCallback, outcome: CommitResult | BaseException) -> None:
        """Queue ``callback`` with ``outcome``; run it here when there is no thread (not started
        yet, or shut down) rather than drop it."""

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
