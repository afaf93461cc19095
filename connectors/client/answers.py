"""Reading an answer against its request: success, a retriable failure, the typed error; or,
with no answer, whether it can still be applied: the job refuses an attempt from its message's
append time plus its ``timeoutMs`` on (``state.coordinator.deadlines``); unacknowledged, it may.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Final

from connectors.client.errors import (
    AttemptTimeout,
    CommitFailedError,
    CommitTimeoutError,
    DeleteGroupFailedError,
    OffsetDeleteFailedError,
    OffsetsRequestError,
    TopicsNotAvailable,
    describe_error,
    is_retriable,
)
from connectors.client.requests import partitions_of
from connectors.sinks.values import now_ms
from state.coordinator.config import CoordinatorConfig
from state.coordinator.deadlines import format_utc_ms, is_timed_out, request_deadline_ms
from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetAndMetadata, TopicPartition
from state.coordinator.requests import Api, OffsetCommitRequest, PartitionCommit
from state.formats.response_codec import Response

#: What a request of each API raises when it fails for good.
FAILED_ERRORS: Final[dict[Api, type[OffsetsRequestError]]] = {
    Api.OFFSET_COMMIT: CommitFailedError,
    Api.OFFSET_DELETE: OffsetDeleteFailedError,
    Api.DELETE_GROUPS: DeleteGroupFailedError,
}
#: What it raises with no definite answer by the deadline (only commits have their own).
TIMEOUT_ERRORS: Final[dict[Api, type[OffsetsRequestError]]] = {
    **FAILED_ERRORS,
    Api.OFFSET_COMMIT: CommitTimeoutError,
}
#: The longest a call waits past its own timeout for the job's deadline of its last attempt.
REFUSAL_WAIT_MAX_S: Final = 2.0
#: Kafka's request timeouts are int32 milliseconds.
_INT32_MAX: Final = 2**31 - 1
#: The job's rules (their default ``timeoutMs`` unused: every attempt carries its own).
_JOB_RULES: Final = CoordinatorConfig()


@dataclass(frozen=True, slots=True)
class CommitResult:
    """A successful commit: every partition of ``offsets`` is in the offsets topic and the sink;
    ``request_ids`` has one id per attempt."""

    group_id: str
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    request_ids: tuple[str, ...] = ()

    @property
    def attempts(self) -> int:
        """How many requests the commit took (0 for an empty commit, which sends none)."""
        return len(self.request_ids)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """A successful OffsetDelete (``partitions`` as requested) or DeleteGroups (``()``)."""

    group_id: str
    partitions: tuple[TopicPartition, ...] = ()
    request_ids: tuple[str, ...] = ()


#: ``callback(result, exception)``: exactly one of the two is None.
CommitCallback = Callable[[CommitResult | None, BaseException | None], None]


def committed(commits: Iterable[PartitionCommit]) -> dict[TopicPartition, OffsetAndMetadata]:
    """The offsets a successful commit of ``commits`` stored, as a result reports them."""
    return {
        TopicPartition(c.topic, c.partition): OffsetAndMetadata(
            c.offset, c.leader_epoch, c.metadata
        )
        for c in commits
    }


@dataclass(frozen=True, slots=True)
class Outcome:
    """A response read against the partitions that were asked for."""

    error_code: int  # top-level code
    error_message: str | None
    codes: dict[TopicPartition, int]
    messages: dict[TopicPartition, str | None]

    @property
    def ok(self) -> bool:
        """No error at the top nor on any asked partition."""
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
        """Every error in it, by Kafka name and code, with the job's reasons."""
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


def outcome(response: Response, asked: Sequence[TopicPartition]) -> Outcome:
    """Per asked partition, its code: its own entry, else the top-level code (a request-level
    rejection such as INVALID_REQUEST answers every partition)."""
    codes: dict[TopicPartition, int] = {}
    messages: dict[TopicPartition, str | None] = {}
    for tp in asked:
        codes[tp], messages[tp] = response.partitions.get(
            tp, (response.error_code, response.error_message)
        )
    return Outcome(response.error_code, response.error_message, codes, messages)


def request_error(
    error: type[OffsetsRequestError],
    code: int,
    partitions: Mapping[TopicPartition, int],
    group_id: str,
    reason: str,
    request_ids: Sequence[str],
    *,
    will_not_be_applied: bool = False,
    deadline_ms: int | None = None,
) -> OffsetsRequestError:
    """``error(code, partitions, "group '<id>': <reason>")`` with the request's ids."""
    return error(
        code,
        partitions,
        f"group {group_id!r}: {reason}",
        group_id=group_id,
        request_ids=request_ids,
        will_not_be_applied=will_not_be_applied,
        deadline_ms=deadline_ms,
    )


def attempt_timeout_ms(remaining_s: float) -> int:
    """The ``timeoutMs`` of an attempt sent ``remaining_s`` seconds before its call's deadline:
    rounded up, at least 1 ms, at most int32."""
    return max(1, min(_INT32_MAX, math.ceil(remaining_s * 1000)))


@dataclass
class SentAttempt:
    """One attempt's ``timeoutMs`` and, once the broker acknowledged it, its timestamp."""

    timeout_ms: int
    appended_ms: int | None = None
    #: Never handed to the producer (the client could not start): nothing to apply.
    not_sent: bool = False
    _acknowledged: threading.Event = field(default_factory=threading.Event, repr=False)

    def appended(self, timestamp_ms: int) -> None:
        """The producer's acknowledgement: the message's timestamp (its append time)."""
        self.appended_ms = timestamp_ms
        self._acknowledged.set()

    def wait_appended(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the acknowledgement; whether it came."""
        return self._acknowledged.wait(max(0.0, timeout_s))

    @property
    def deadline_ms(self) -> int | None:
        """The job's deadline for this attempt (ms since the epoch), None until acknowledged."""
        if self.appended_ms is None:
            return None
        return request_deadline_ms(self.appended_ms, self.timeout_ms, _JOB_RULES)

    def refused_at(self, now_ms: int) -> bool:
        """Whether a micro-batch of time ``now_ms`` refuses it (the job's rule): False while
        its timestamp is unknown."""
        if self.appended_ms is None:
            return False
        return is_timed_out(self.appended_ms, self.timeout_ms, now_ms, _JOB_RULES)


def await_refusal(sent: SentAttempt, give_up: float) -> bool:
    """Wait (until ``give_up``, monotonic, at the latest) until this client's clock reaches
    the job's deadline for unanswered ``sent``; whether it did. Never sent: refused at once."""
    if sent.not_sent:
        return True
    if not sent.wait_appended(give_up - time.monotonic()):
        return False
    deadline_ms = sent.deadline_ms
    assert deadline_ms is not None
    while not sent.refused_at(now_ms()):
        left_s = deadline_ms / 1000 - time.time()
        if time.monotonic() + left_s > give_up:
            return False
        time.sleep(max(0.0, left_s))
    return True


def timed_out_reason(timeout_s: float, sent: SentAttempt, refused: bool) -> str:
    """What a REQUEST_TIMED_OUT says of an unanswered attempt: whether it can still be applied
    (``refused``: this client's clock reached its deadline at the job)."""
    head = f"no answer within {timeout_s:g} s"
    if sent.not_sent:
        return f"{head}: the request was not sent, so it will not be applied"
    deadline_ms = sent.deadline_ms
    if deadline_ms is None:
        return f"{head}; the broker had not acknowledged the request, so it may still be applied"
    deadline = format_utc_ms(deadline_ms)
    if refused:
        return (
            f"{head}: it will not be applied (the job refuses it from {deadline}, its deadline; "
            "only a micro-batch planned before then, still running or replayed after a crash, "
            "could apply it)"
        )
    return f"{head}; it may still be applied until {deadline} (its deadline at the job)"


def async_commit_outcome(
    attempt: Future[Response], request: OffsetCommitRequest, timeout: float, sent: SentAttempt
) -> CommitResult | BaseException:
    """What ``commit_async`` completes with once its one ``attempt`` is done: the result,
    ``CommitTimeoutError``, ``CommitFailedError`` (never retried) or the attempt's exception;
    on the response thread, so a timeout does not wait for the job's deadline."""
    group_id, request_id = request.group_id, request.request_id
    keys = partitions_of(request)
    try:
        response = attempt.result()
    except AttemptTimeout:
        code = ErrorCode.REQUEST_TIMED_OUT
        refused = sent.not_sent or sent.refused_at(now_ms())
        return request_error(
            CommitTimeoutError,
            code,
            dict.fromkeys(keys, code),
            group_id,
            timed_out_reason(timeout, sent, refused),
            [request_id],
            will_not_be_applied=refused,
            deadline_ms=sent.deadline_ms,
        )
    except TopicsNotAvailable as exc:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return request_error(
            CommitFailedError, code, dict.fromkeys(keys, code), group_id, str(exc), [request_id]
        )
    except BaseException as exc:
        return exc
    answer = outcome(response, keys)
    if answer.ok:
        return CommitResult(group_id, committed(request.partitions), (request_id,))
    return request_error(
        CommitFailedError,
        answer.main_code(),
        answer.codes,
        group_id,
        answer.describe(),
        [request_id],
    )
