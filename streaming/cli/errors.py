"""The CLI's exit statuses, the two exceptions that choose between them, and the checks that
refuse before anything is sent what Kafka would refuse (UNKNOWN_TOPIC_OR_PARTITION,
INVALID_GROUP_ID)."""

from __future__ import annotations

from typing import Final

from state.coordinator.errors import ErrorCode
from state.coordinator.rules import (
    MAX_PARTITIONS_PER_TOPIC,
    MAX_RECORD_STRING_BYTES,
    TOPIC_NAME_MAX_LENGTH,
    is_valid_group_id,
    is_valid_partition,
    is_valid_topic,
)

EXIT_OK: Final = 0
#: The operation failed (the Kafka error name and code were printed).
EXIT_FAILURE: Final = 1
#: Bad arguments, configuration or input file.
EXIT_USAGE: Final = 2
#: This process lost the deployment lease: another job of the deployment writes now.
EXIT_LEASE_LOST: Final = 3
#: Interrupted with Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED: Final = 130


class UsageError(Exception):
    """Bad arguments, configuration or input file: exit status 2."""


class CommandFailed(Exception):
    """The operation failed and its details were already printed: exit status 1."""


_TOPIC_RULE = (
    f"Kafka's topic names are 1-{TOPIC_NAME_MAX_LENGTH} characters of a-z, A-Z, 0-9, '.', '_' "
    "and '-', and not '.' or '..'"
)


def check_topic(topic: str, where: str = "--topic") -> str:
    """``topic`` when Kafka could have it, else a UsageError naming ``where`` and the rule."""
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
    """``group`` when Kafka takes it: fits a record, and not empty unless ``empty_allowed``
    (OffsetDelete refuses ``""``)."""
    if is_valid_group_id(group, empty_allowed=empty_allowed):
        return group
    code = ErrorCode.INVALID_GROUP_ID
    if not group:
        raise UsageError(f"{where}: Kafka refuses an empty group id here ({code.name})")
    raise UsageError(
        f"{where}: a group id is at most {MAX_RECORD_STRING_BYTES} bytes of UTF-8, got "
        f"{len(group.encode('utf-8'))} ({code.name})"
    )
