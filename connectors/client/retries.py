"""The retry loop of the commit client's waiting calls (Kafka's ``commitSync`` semantics).

One call is a series of attempts, each a request with a fresh uuid4 request id, until one
succeeds, one fails for good, or the deadline passes. Attempts that fail retriably are retried
with Kafka's exponential backoff, resending only the partitions that failed (the whole request
when the error was request-level); a timeout is ambiguous, as in Kafka, so the error says the
last attempt may still be applied.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Final
from uuid import uuid4

from connectors.client.errors import AttemptTimeout, ClientClosedError, TopicsNotAvailable
from connectors.client.outcomes import (
    FAILED_ERRORS,
    TIMEOUT_ERRORS,
    Outcome,
    outcome,
    request_error,
)
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.requests import Api, Request
from state.formats.response_codec import Response

log = logging.getLogger(__name__)

__all__ = ["Attempts", "Backoff", "MakeRequest", "call_with_retries"]

# The margin a caller waits past the deadline: the response thread enforces the deadline, the
# margin only guards against a wedged thread.
_WEDGED_MARGIN_S: Final = 2.0


#: ``make(request_id, partitions)``: one attempt of a call, for the partitions still to do.
MakeRequest = Callable[[str, Sequence[TopicPartition]], Request]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Kafka's client ``retry.backoff.ms`` and ``retry.backoff.max.ms``, in seconds."""

    initial_s: float
    max_s: float

    def pause(self, attempt: int) -> float:
        """Exponential backoff with 20% jitter: initial, twice that, ... up to the max."""
        base = min(self.max_s, self.initial_s * (2**attempt))
        return base * random.uniform(0.8, 1.2)


@dataclass(frozen=True, slots=True)
class Attempts:
    """How a call sends attempts: ``submit(request, deadline)`` returns the future of its
    answer, ``forget(request_id)`` stops waiting for one, ``refresh_partitions()`` re-reads the
    ingest topic's partitions after NOT_COORDINATOR, ``closed`` stops the retries."""

    submit: Callable[[Request, float], Future[Response]]
    forget: Callable[[str], None]
    refresh_partitions: Callable[[], None]
    closed: threading.Event
    backoff: Backoff


def call_with_retries(
    attempts: Attempts,
    api: Api,
    group_id: str,
    keys: Sequence[TopicPartition],
    make: MakeRequest,
    timeout: float,
) -> tuple[str, ...]:
    """Send, wait, retry the partitions that failed retriably; return the request ids.

    ``keys`` are the request's partitions ([] for DeleteGroups, retried whole); ``make`` builds
    the attempt with a request id for the partitions still to do. Raises ``FAILED_ERRORS[api]``
    on a non-retriable answer, ``TIMEOUT_ERRORS[api]`` (REQUEST_TIMED_OUT) when no definite
    answer came within ``timeout`` seconds, :class:`ClientClosedError` when closed meanwhile.
    """
    deadline = time.monotonic() + timeout
    codes: dict[TopicPartition, int] = dict.fromkeys(keys, ErrorCode.REQUEST_TIMED_OUT)
    remaining = list(keys)
    request_ids: list[str] = []
    last: Outcome | None = None
    last_note = "no answer"
    for attempt in itertools.count():
        request_id = str(uuid4())
        request_ids.append(request_id)
        future = attempts.submit(make(request_id, remaining), deadline)
        try:
            response = future.result(max(0.0, deadline - time.monotonic()) + _WEDGED_MARGIN_S)
        except (AttemptTimeout, TimeoutError):
            attempts.forget(request_id)
            break
        except TopicsNotAvailable as exc:
            last_note = str(exc)
            last = Outcome(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc), {}, {})
        else:
            last = outcome(response, remaining)
            codes.update(last.codes)
            if last.ok:
                return tuple(request_ids)
            if not last.retriable:
                raise request_error(
                    FAILED_ERRORS[api],
                    last.main_code(),
                    codes,
                    group_id,
                    last.describe(),
                    request_ids,
                )
            last_note = last.describe()
            if ErrorCode.NOT_COORDINATOR in (last.error_code, *last.codes.values()):
                attempts.refresh_partitions()
            if last.error_code == 0:
                remaining = [tp for tp in remaining if last.codes[tp] != 0]
        pause = min(attempts.backoff.pause(attempt), deadline - time.monotonic())
        if pause <= 0:
            break
        log.debug("%s for group %r: retrying in %.2f s: %s", api, group_id, pause, last_note)
        if attempts.closed.wait(pause):
            raise ClientClosedError("the commit client was closed while retrying")
    raise request_error(
        TIMEOUT_ERRORS[api],
        ErrorCode.REQUEST_TIMED_OUT,
        codes,
        group_id,
        f"no definite answer within {timeout:g} s"
        + (f" (last: {last_note})" if last is not None else ""),
        request_ids,
    )
