"""Kafka protocol error codes used by the offset manager (Kafka's ``Errors`` enum)."""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """The Kafka error codes this project answers with, by Kafka's names and numbers."""

    NONE = 0
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    REQUEST_TIMED_OUT = 7
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    UNSTABLE_OFFSET_COMMIT = 88

    @property
    def retriable(self) -> bool:
        """Whether a client should retry the request (Kafka's ``RetriableException`` subclasses)."""
        return self in _RETRIABLE


_RETRIABLE = frozenset(
    {
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
    }
)
