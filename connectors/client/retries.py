"""The retry loop of the commit client's waiting calls (Kafka's ``commitSync``): attempts with
fresh request ids, each carrying what is left of the call's timeout as ``timeoutMs`` (so no older
attempt is applied after a retry), Kafka's exponential backoff between them.
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

from connectors.client.answers import (
    FAILED_ERRORS,
    REFUSAL_WAIT_MAX_S,
    TIMEOUT_ERRORS,
    Outcome,
    SentAttempt,
    attempt_timeout_ms,
    await_refusal,
    outcome,
    request_error,
    timed_out_reason,
)
from connectors.client.errors import (
    AttemptTimeout,
    BrokersNotAvailable,
    ClientClosedError,
    OffsetsRequestError,
    TopicsNotAvailable,
)
from connectors.client.requests import with_timeout
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.requests import Api, Request
from state.formats.response_codec import Response

log = logging.getLogger(__name__)

# Waited past the deadline, which the response thread enforces: a guard against a wedged thread.
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
    """How a call sends attempts (``submit(request, deadline, sent)`` -> the answer's future),
    gives one up, re-reads the ingest partitions after NOT_COORDINATOR, and is stopped."""

    submit: Callable[[Request, float, SentAttempt], Future[Response]]
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
    an attempt for those still to do. Raises ``FAILED_ERRORS[api]`` on a non-retriable answer,
    or with COORDINATOR_NOT_AVAILABLE (15) when the first attempt finds no broker (nothing was
    sent; later ones are retried, as after a restart); ``TIMEOUT_ERRORS[api]``
    (REQUEST_TIMED_OUT) with no definite answer in ``timeout`` s; :class:`ClientClosedError`.
    """
    deadline = time.monotonic() + timeout
    codes: dict[TopicPartition, int] = dict.fromkeys(keys, ErrorCode.REQUEST_TIMED_OUT)
    remaining = list(keys)
    request_ids: list[str] = []
    unanswered: list[SentAttempt] = []
    last: Outcome | None = None
    last_note = "no answer"
    for attempt in itertools.count():
        request_id = str(uuid4())
        request_ids.append(request_id)
        sent = SentAttempt(attempt_timeout_ms(deadline - time.monotonic()))
        request = with_timeout(make(request_id, remaining), sent.timeout_ms)
        future = attempts.submit(request, deadline, sent)
        try:
            response = future.result(max(0.0, deadline - time.monotonic()) + _WEDGED_MARGIN_S)
        except (AttemptTimeout, TimeoutError):
            attempts.forget(request_id)
            unanswered.append(sent)
            break
        except TopicsNotAvailable as exc:
            if attempt == 0 and isinstance(exc, BrokersNotAvailable):
                # A wrong address or Kafka down: waiting out the timeout would only hide why.
                raise request_error(
                    FAILED_ERRORS[api],
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE),
                    group_id,
                    f"{exc} Nothing was sent.",
                    request_ids,
                    will_not_be_applied=True,
                ) from None
            unanswered.append(sent)
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
    raise _timed_out(
        TIMEOUT_ERRORS[api], codes, group_id, timeout, unanswered, last, last_note, request_ids
    )


def _timed_out(
    error: type[OffsetsRequestError],
    codes: dict[TopicPartition, int],
    group_id: str,
    timeout: float,
    unanswered: Sequence[SentAttempt],
    last: Outcome | None,
    last_note: str,
    request_ids: Sequence[str],
) -> OffsetsRequestError:
    """The call's REQUEST_TIMED_OUT, after waiting (up to ``REFUSAL_WAIT_MAX_S``) until the job's
    deadlines of its ``unanswered`` attempts pass on this client's clock."""
    give_up = time.monotonic() + REFUSAL_WAIT_MAX_S
    refused = all(await_refusal(sent, give_up) for sent in unanswered)
    sent_ones = [sent for sent in unanswered if not sent.not_sent]
    if sent_ones:
        reason = timed_out_reason(timeout, sent_ones[-1], refused)
    else:
        reason = f"not sent within {timeout:g} s: it will not be applied"
    deadlines = [sent.deadline_ms for sent in sent_ones]
    known = [d for d in deadlines if d is not None]
    return request_error(
        error,
        ErrorCode.REQUEST_TIMED_OUT,
        codes,
        group_id,
        reason + (f" (last: {last_note})" if last is not None else ""),
        request_ids,
        will_not_be_applied=refused,
        deadline_ms=max(known) if known and len(known) == len(deadlines) else None,
    )
