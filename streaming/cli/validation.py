"""What can never succeed, refused before anything is sent (exit 2).

Kafka's own rules (``state.coordinator.rules``): a partition index is never negative (nor at or
past the job's cap, ``MAX_PARTITIONS_PER_TOPIC``), a topic name is 1-249 characters of
``[a-zA-Z0-9._-]`` and neither ``.`` nor ``..``, and a group id fits in a record (and is not
empty where Kafka refuses the empty group: OffsetDelete). The job would answer
UNKNOWN_TOPIC_OR_PARTITION (3) or INVALID_GROUP_ID (24) to such a request; the CLI says so at
once instead of sending it.
"""

from __future__ import annotations

from state.coordinator.errors import ErrorCode
from state.coordinator.rules import (
    MAX_PARTITIONS_PER_TOPIC,
    MAX_RECORD_STRING_BYTES,
    TOPIC_NAME_MAX_LENGTH,
    is_valid_group_id,
    is_valid_partition,
    is_valid_topic,
)
from streaming.cli.errors import UsageError

__all__ = ["check_group", "check_partition", "check_topic"]

_TOPIC_RULE = (
    f"Kafka's topic names are 1-{TOPIC_NAME_MAX_LENGTH} characters of a-z, A-Z, 0-9, '.', '_' "
    "and '-', and not '.' or '..'"
)


def check_topic(topic: str, where: str = "--topic") -> str:
    """``topic`` when Kafka could have such a topic, else a :class:`UsageError` naming
    ``where`` and the rule."""
    if not is_valid_topic(topic):
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        raise UsageError(f"{where} {topic!r} can never exist ({code.name}): {_TOPIC_RULE}")
    return topic


def check_partition(partition: int, where: str = "--partition") -> int:
    """``partition`` when the job takes it (0 up to the cap), else a :class:`UsageError`."""
    if not is_valid_partition(partition):
        bound = ">= 0" if partition < 0 else f"< {MAX_PARTITIONS_PER_TOPIC:,} (the job's cap)"
        raise UsageError(f"{where} must be {bound}, got {partition}")
    return partition


def check_group(group: str, where: str = "--group", *, empty_allowed: bool = True) -> str:
    """``group`` when Kafka takes it in the request: not longer than a record holds, and not
    empty unless ``empty_allowed`` (OffsetCommit and DeleteGroups take the group ``""``,
    OffsetDelete refuses it)."""
    if is_valid_group_id(group, empty_allowed=empty_allowed):
        return group
    code = ErrorCode.INVALID_GROUP_ID
    if not group:
        raise UsageError(f"{where}: Kafka refuses an empty group id here ({code.name})")
    raise UsageError(
        f"{where}: a group id is at most {MAX_RECORD_STRING_BYTES} bytes of UTF-8, got "
        f"{len(group.encode('utf-8'))} ({code.name})"
    )
