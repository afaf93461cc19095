"""Reading the responses topic: one thread completes the futures of every pending request.

The commit client registers each attempt here (:meth:`ResponseReader.expect`) before sending
it. The reader's thread polls *every* partition of the responses topic with a single consumer
(positioned by the caller at the end offsets taken before the first request was sent), decodes
the answers to registered request ids (``state.formats.response_codec``) and completes their
futures; answers to other clients' requests, and replayed duplicates, are skipped. It also
expires attempts at their deadline with :class:`AttemptTimeout`, so many concurrent calls share
one poll loop and no caller thread polls Kafka.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import threading
import time
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Final

from kafka import KafkaConsumer
from kafka.errors import KafkaError

from connectors.client.errors import AttemptTimeout
from state.formats.response_codec import Response, decode_response

log = logging.getLogger(__name__)

__all__ = ["POLL_INTERVAL_MS", "ResponseReader", "set_exception", "set_result"]

# How often the response thread wakes up to expire deadlines and notice close().
POLL_INTERVAL_MS: Final = 100
# How long the thread waits before polling again after a failed poll.
_POLL_RETRY_S: Final = 0.5


@dataclass(order=True)
class _Pending:
    """One attempt waiting for its answer; ordered by deadline for the expiry heap."""

    deadline: float
    request_id: str = field(compare=False)
    future: Future[Response] = field(compare=False)


class ResponseReader:
    """Completes registered requests' futures from the responses topic, on its own thread.

    ``consumer`` is assigned to every partition of the topic and positioned; the reader owns it
    from :meth:`start` and closes it when the thread ends, which it does once ``closed`` is set.
    If the thread fails, every waiting future fails with that exception and :attr:`failure`
    keeps it, so that later requests are refused rather than left waiting.
    """

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
        """Start the thread (once)."""
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the thread to end (after ``closed`` was set); a no-op on
        the thread itself (``close()`` called from a future's done-callback)."""
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

    # --- the thread -----------------------------------------------------------------------------

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
        """Complete the attempt ``key`` names, if it is one of ours and still waiting.

        Messages without a readable key are skipped: they answer no request of this client.
        """
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
    """Complete ``future`` with ``value`` unless it is done already."""
    # A future completed twice (a late answer racing its deadline): the first outcome wins.
    with contextlib.suppress(InvalidStateError):
        future.set_result(value)


def set_exception(future: Future[Any], exc: BaseException) -> None:
    """Fail ``future`` with ``exc`` unless it is done already."""
    with contextlib.suppress(InvalidStateError):
        future.set_exception(exc)
