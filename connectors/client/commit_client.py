"""The commit client: a request on the ingest topic, answered on the responses topic once its
records are in the offsets topic and the sink. ``commit`` is ``commitSync`` (retried until its
timeout), ``commit_async`` is ``commitAsync`` (one attempt: a retry could land after a newer
commit). Each call: build (``requests``) → send (``connection``) → read the answer (``answers``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from functools import partial
from typing import Any, Final, Protocol

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
    AttemptTimeout,
    ClientClosedError,
    NotConnectedInTime,
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
from connectors.closing import CloseOnExit
from connectors.kafka.admin import (
    DEFAULT_BOOTSTRAP_SERVERS,
    DEFAULT_INGEST_TOPIC,
    DEFAULT_RESPONSES_TOPIC,
)
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
#: How long close() waits for the response thread and producer; how often it polls in-flight.
_CLOSE_JOIN_S: Final = 5.0
_CLOSE_POLL_S: Final = 0.02
#: How long past its deadline a call waits for a connection still opening: one that fails at
#: that deadline (a topic that does not exist) says why, rather than "not connected in time".
_OPEN_MARGIN_S: Final = 0.1


class ClientConfig(Protocol):
    """What the client reads from a deployment's configuration (``JobConfig`` has these)."""

    @property
    def ingest_topic(self) -> str: ...

    @property
    def responses_topic(self) -> str: ...

    def kafka_python_options(self) -> dict[str, Any]: ...


def client_settings(
    config: ClientConfig | None,
    bootstrap_servers: str | Sequence[str] | None,
    ingest_topic: str | None,
    responses_topic: str | None,
    kafka_options: Mapping[str, Any] | None,
    tenant: str | None,
) -> tuple[str, str, dict[str, Any]]:
    """The ingest topic, responses topic and kafka-python options: keywords over ``config`` over
    the defaults. ``bootstrap_servers`` may be comma-separated; ``kafka_options``' dotted names
    become kafka-python's; ``tenant`` names one of ``config``'s tenants, whose topics become the
    defaults (ValueError naming those known)."""
    if tenant is not None:
        tenants = getattr(config, "tenants", ()) or ()
        found = next((t for t in tenants if t.name == tenant), None)
        if found is None:
            known = ", ".join(t.name for t in tenants) or "none configured"
            raise ValueError(f"tenant {tenant!r} is not in the configuration's tenants ({known})")
        ingest_topic = ingest_topic or found.ingest_topic
        responses_topic = responses_topic or found.responses_topic
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
    return (
        ingest_topic or (config.ingest_topic if config else DEFAULT_INGEST_TOPIC),
        responses_topic or (config.responses_topic if config else DEFAULT_RESPONSES_TOPIC),
        options,
    )


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
        self.ingest_topic, self.responses_topic, self._options = client_settings(
            config, bootstrap_servers, ingest_topic, responses_topic, kafka_options, tenant
        )
        if default_timeout_s <= 0:
            raise ValueError(f"default_timeout_s must be > 0, got {default_timeout_s}")
        self.client_id = client_id
        self.default_timeout_s = float(default_timeout_s)

        self._start_lock = threading.Lock()
        self._closed = threading.Event()
        self._connection: Connection | None = None
        #: The connection being opened (on a thread of its own), until it is open or failed.
        self._opening: Future[Connection] | None = None
        # commit_async callbacks, in completion order: the response thread must never block.
        self._callbacks: ThreadPoolExecutor | None = None
        self._attempts = Attempts(
            submit=self._submit,
            forget=self._forget,
            refresh_partitions=self._refresh_partitions,
            closed=self._closed,
            backoff=Backoff(float(retry_backoff_s), float(retry_backoff_max_s)),
        )

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
        """The connection, opened on first use on a thread of its own and waited for until
        ``deadline``: a call's timeout bounds the connecting too (as ``commitSync(timeout)``'s
        bounds finding the coordinator), so a short one fails in its time, not the seconds a
        first connection takes. :class:`NotConnectedInTime` (still opening: the next call may
        find it open), TopicsNotAvailable, ClientClosedError."""
        connection = self._connection
        if connection is not None and not self._closed.is_set():
            return connection
        with self._start_lock:
            if self._closed.is_set():
                raise ClientClosedError("the commit client is closed")
            if self._connection is not None:
                return self._connection
            if self._opening is None or self._opening.done():  # none yet, or the last failed
                self._opening = Future()
                threading.Thread(
                    target=self._open,
                    args=(self._opening, deadline),
                    name=f"{self.client_id}-connect",
                    daemon=True,
                ).start()
            opening = self._opening
        try:
            return opening.result(max(0.0, deadline - time.monotonic()) + _OPEN_MARGIN_S)
        except FutureTimeout:
            servers = ",".join(self._options.get("bootstrap_servers", []))
            raise NotConnectedInTime(f"not connected to Kafka at {servers} yet") from None

    def _open(self, opening: Future[Connection], deadline: float) -> None:
        """Open the connection (waiting for the topics until ``deadline``) and complete
        ``opening`` with it or its failure; closed at once if the client was closed meanwhile."""
        try:
            connection = Connection.open(
                client_id=self.client_id,
                options=self._options,
                ingest_topic=self.ingest_topic,
                responses_topic=self.responses_topic,
                max_block_ms=max(1000, int(self.default_timeout_s * 1000)),
                closed=self._closed,
                deadline=deadline,
            )
        except BaseException as exc:
            opening.set_exception(exc)
            return
        with self._start_lock:
            closed = self._closed.is_set()
            if not closed:
                self._callbacks = ThreadPoolExecutor(1, thread_name_prefix=f"{self.client_id}-cb")
                self._connection = connection
        if closed:  # the reader stops by itself: it sees the closed event
            connection.producer.close(timeout=_CLOSE_JOIN_S)
            opening.set_exception(ClientClosedError("the commit client is closed"))
            return
        opening.set_result(connection)

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
        with self._start_lock:  # a connection opening now sees the client closed
            self._closed.set()
            connection = self._connection
        if connection is not None:
            connection.reader.join(_CLOSE_JOIN_S)
            connection.reader.fail_all(
                ClientClosedError("the commit client was closed before an answer came")
            )
        if self._callbacks is not None:
            self._callbacks.shutdown(wait=True)  # runs the queued callbacks first
        if connection is not None:
            connection.producer.close(timeout=_CLOSE_JOIN_S)

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
        if time.monotonic() >= deadline:  # connecting took the call's time: too late to send
            sent.not_sent = True
            late: Future[Response] = Future()
            late.set_exception(AttemptTimeout())
            return late
        return connection.submit(message, deadline, sent.appended)

    def _run_callback(
        self, callback: CommitCallback, outcome: CommitResult | BaseException
    ) -> None:
        """Queue ``callback(result, exception)`` on the callback thread, or run it here without
        one (not started, or closed); one that raises is logged."""

        def call() -> None:
            try:
                if isinstance(outcome, CommitResult):
                    callback(outcome, None)
                else:
                    callback(None, outcome)
            except Exception:
                log.exception("commit callback %r raised", callback)

        if self._callbacks is not None:
            with contextlib.suppress(RuntimeError):  # shut down: run it here
                self._callbacks.submit(call)
                return
        call()

    def _timeout(self, timeout_s: float | None) -> float:
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
        timeout = self._timeout(timeout_s)
        return call_with_retries(self._attempts, api, group_id, keys, make, timeout)

    def _forget(self, request_id: str) -> None:
        if self._connection is not None:
            self._connection.reader.forget(request_id)

    def _refresh_partitions(self) -> None:
        if self._connection is not None:
            self._connection.refresh_partitions()

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
        """Commit ``offsets`` (partition -> next offset, int or OffsetAndMetadata-like) for
        ``group_id``; return once durable and readable. Member fields default to an admin's commit;
        ``retention_ms`` -1 keeps the broker's. Raises :class:`CommitFailedError` (non-retriable,
        or no broker), :class:`CommitTimeoutError` at ``timeout_s``, ValueError/TypeError."""
        request = offset_commit(
            group_id, offsets, generation_id, member_id, group_instance_id, retention_ms
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
            group_id, offsets, generation_id, member_id, group_instance_id, retention_ms
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
                self._run_callback(callback, done)

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
