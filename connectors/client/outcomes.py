"""Reading an answer against the request: success, a retriable failure, or the typed error.

A response (``state.formats.response_codec.Response``) answers some partitions and maybe the
request as a whole; :func:`outcome` gives every *asked* partition its code, and
:class:`Outcome` says whether the request succeeded, may be retried, and what to raise
otherwise (:func:`request_error`, one of ``connectors.client.errors``).
:func:`async_commit_outcome` does all of that for ``commit_async``'s single attempt.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Final

from connectors.client.deadlines import SentAttempt, timed_out_reason
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
from connectors.client.requests import committed, partitions_of
from connectors.client.results import CommitResult
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.requests import Api, OffsetCommitRequest
from state.formats.response_codec import Response

__all__ = [
    "FAILED_ERRORS",
    "TIMEOUT_ERRORS",
    "Outcome",
    "async_commit_outcome",
    "outcome",
    "request_error",
]

#: What a request of each API raises when it fails for good.
FAILED_ERRORS: Final[dict[Api, type[OffsetsRequestError]]] = {
    Api.OFFSET_COMMIT: CommitFailedError,
    Api.OFFSET_DELETE: OffsetDeleteFailedError,
    Api.DELETE_GROUPS: DeleteGroupFailedError,
}
#: What it raises when no definite answer came before the deadline (only commits have their own).
TIMEOUT_ERRORS: Final[dict[Api, type[OffsetsRequestError]]] = {
    Api.OFFSET_COMMIT: CommitTimeoutError,
    Api.OFFSET_DELETE: OffsetDeleteFailedError,
    Api.DELETE_GROUPS: DeleteGroupFailedError,
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
        code, message = response.partitions.get(tp, (response.error_code, response.error_message))
        codes[tp] = code
        messages[tp] = message
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
    """``error`` for a request of ``group_id``: its code, every partition's code, and a message
    ``group '<id>': <reason>``; a REQUEST_TIMED_OUT also says whether it can still be applied."""
    return error(
        code,
        partitions,
        f"group {group_id!r}: {reason}",
        group_id=group_id,
        request_ids=request_ids,
        will_not_be_applied=will_not_be_applied,
        deadline_ms=deadline_ms,
    )


def async_commit_outcome(
    attempt: Future[Response], request: OffsetCommitRequest, timeout: float, sent: SentAttempt
) -> CommitResult | BaseException:
    """What ``commit_async`` completes with once its one ``attempt`` (of ``request``, ``sent``
    as it was sent) is done: the result; or the error every asked partition failed with,
    ``CommitTimeoutError`` when no answer came within ``timeout`` s, ``CommitFailedError`` when
    the topics were not available or the answer was an error (retriable or not: never retried);
    or the attempt's exception.

    Runs on the response thread, so a timeout does not wait for the job's deadline: it says the
    request will not be applied only if this client's clock has already reached it."""
    group_id, request_id = request.group_id, request.request_id
    keys = partitions_of(request)
    try:
        response = attempt.result()
    except AttemptTimeout:
        code = ErrorCode.REQUEST_TIMED_OUT
        deadline_ms = sent.deadline_ms
        refused = deadline_ms is not None and time.time() * 1000 >= deadline_ms
        return request_error(
            CommitTimeoutError,
            code,
            dict.fromkeys(keys, code),
            group_id,
            timed_out_reason(timeout, sent, refused),
            [request_id],
            will_not_be_applied=refused,
            deadline_ms=deadline_ms,
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
