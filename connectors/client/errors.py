"""The one error hierarchy of the client side: the commit client, the reader and the CLI.

Every error carries a Kafka error code (``state.coordinator.errors.ErrorCode``); an unknown code
(a newer job) stays a bare int. ``retriable`` follows Kafka's ``RetriableException``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition


def error_code_of(code: int) -> ErrorCode | int:
    """``ErrorCode(code)`` when the code is known, else the bare int (a newer job may answer
    codes this client does not name)."""
    try:
        return ErrorCode(code)
    except ValueError:
        return int(code)


def describe_error(code: int) -> str:
    """Kafka's name and number of an error code, e.g. ``OFFSET_METADATA_TOO_LARGE (12)``."""
    known = error_code_of(code)
    name = known.name if isinstance(known, ErrorCode) else "UNKNOWN_ERROR_CODE"
    return f"{name} ({int(code)})"


def is_retriable(code: int) -> bool:
    """Whether Kafka retries a request that failed with ``code`` (unknown codes: no)."""
    known = error_code_of(code)
    return isinstance(known, ErrorCode) and known.retriable


class OffsetsError(Exception):
    """An error the offset manager answered (or a client-side condition named like one);
    ``str()`` starts with ``NAME (code)`` of ``error_code``."""

    def __init__(self, error_code: int, message: str = "") -> None:
        self.error_code: ErrorCode | int = error_code_of(error_code)
        self.message = message
        super().__init__(f"{describe_error(error_code)}" + (f": {message}" if message else ""))

    @property
    def retriable(self) -> bool:
        """Whether retrying the same request may succeed (Kafka's ``RetriableException``)."""
        return is_retriable(self.error_code)


class OffsetsRequestError(OffsetsError):
    """A request failed: ``error_code`` is the top-level code, else the first failing
    partition's (non-retriable first); ``partitions`` maps each partition to its code
    (``ErrorCode.NONE``: applied). For REQUEST_TIMED_OUT, ``will_not_be_applied`` is True when
    the failed partitions cannot be applied later (every attempt answered, or the client's clock
    reached the job's deadline ``deadline_ms`` for the last: ``connectors.client.answers``)."""

    def __init__(
        self,
        error_code: int,
        partitions: Mapping[TopicPartition, int] | None = None,
        message: str = "",
        *,
        group_id: str = "",
        request_ids: Sequence[str] = (),
        will_not_be_applied: bool = False,
        deadline_ms: int | None = None,
    ) -> None:
        self.partitions: dict[TopicPartition, ErrorCode | int] = {
            TopicPartition(*tp): error_code_of(c) for tp, c in (partitions or {}).items()
        }
        self.group_id = group_id
        self.request_ids = tuple(request_ids)
        self.will_not_be_applied = will_not_be_applied
        self.deadline_ms = deadline_ms
        super().__init__(error_code, message)

    @property
    def failed_partitions(self) -> dict[TopicPartition, ErrorCode | int]:
        """The partitions that were not applied, with their codes."""
        return {tp: c for tp, c in self.partitions.items() if c != ErrorCode.NONE}


class CommitFailedError(OffsetsRequestError):
    """An OffsetCommit was not (fully) applied; see ``partitions`` for which were."""


class CommitTimeoutError(CommitFailedError):
    """No definite answer to an OffsetCommit before the deadline (REQUEST_TIMED_OUT, 7);
    ``partitions`` holds the last codes seen."""


class OffsetDeleteFailedError(OffsetsRequestError):
    """An OffsetDelete failed for the group or for some partitions (``partitions``)."""


class DeleteGroupFailedError(OffsetsRequestError):
    """A DeleteGroups request failed, e.g. NON_EMPTY_GROUP (68) or GROUP_ID_NOT_FOUND (69)."""


class ClientClosedError(RuntimeError):
    """The client was closed before the request was answered (or a request came after close)."""


class CoordinatorLoadInProgressError(OffsetsError):
    """The job is rebuilding its state (sink status LOADING): retry later (retriable, 14)."""

    def __init__(self, message: str = "the offsets job is loading its state; retry later") -> None:
        super().__init__(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, message)


# --- signals between the commit client's modules; callers see the errors above instead ----------


class AttemptTimeout(Exception):
    """No response to one attempt before its deadline (the caller's REQUEST_TIMED_OUT, 7)."""


class TopicsNotAvailable(Exception):
    """The job's topics cannot be reached or do not exist (COORDINATOR_NOT_AVAILABLE, 15)."""


class NotConnectedInTime(TopicsNotAvailable):
    """The connection to the job's topics was still opening at the call's deadline: nothing was
    sent (it goes on opening, for the next call)."""


class BrokersNotAvailable(TopicsNotAvailable):
    """No broker answered at the bootstrap servers: a wrong address, or Kafka down."""
