"""``reset-offsets`` planning without any service: topic specs, reset targets and the new
offset of every partition, as Kafka's ``ResetOffsetsCommand`` computes them.

The commands feed these functions with what the sink and the broker answered; nothing here
reads or writes anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from connectors.client.errors import OffsetsError, describe_error
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from streaming.cli.errors import UsageError
from streaming.cli.validation import check_topic


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """``--topic T`` (all partitions: ``partitions`` None) or ``--topic T:0,2``."""

    topic: str
    partitions: tuple[int, ...] | None = None


def parse_topic_spec(text: str) -> TopicSpec:
    """Parse ``T`` or ``T:P,P``. Kafka topic names cannot contain ``:``; a name no Kafka topic
    can have is a :class:`UsageError` (``streaming.cli.validation``)."""
    topic, sep, rest = text.partition(":")
    if not topic:
        raise UsageError(f"--topic {text!r}: missing topic name")
    check_topic(topic)
    if not sep:
        return TopicSpec(topic)
    parts = []
    for raw in rest.split(","):
        raw = raw.strip()
        if not raw.isdigit():
            raise UsageError(
                f"--topic {text!r}: partitions must be non-negative integers, got {raw!r}"
            )
        parts.append(int(raw))
    return TopicSpec(topic, tuple(dict.fromkeys(parts)))


def topic_missing(topic: str, cluster: str, also: str = "") -> str:
    """What to do about a topic the Kafka cluster at ``cluster`` does not have (``also``: more
    of what is known about it)."""
    tool = f"kafka-topics.sh --bootstrap-server {cluster or 'HOST:PORT'}"
    where = f" at {cluster}" if cluster else ""
    return (
        f"topic {topic!r} does not exist on the Kafka cluster{where}{also}: check its name "
        f"({tool} --list) or create it ({tool} --create --topic {topic} --partitions N)"
    )


def scope_partitions(
    specs: Sequence[TopicSpec],
    committed: Sequence[TopicPartition],
    partitions_for: Callable[[str], Sequence[int]],
    *,
    committed_first: bool = False,
    cluster: str = "",
) -> list[TopicPartition]:
    """The partitions a ``--topic`` list names, each once, in order: the listed ones; for a
    whole topic all the broker has (``partitions_for``), else the group's ``committed`` ones
    (a topic the broker no longer knows). ``committed_first`` prefers the group's committed
    ones, as ``delete-offsets`` does: those are the offsets a deletion can touch.
    Raises UNKNOWN_TOPIC_OR_PARTITION for a topic neither the broker nor the group knows,
    saying what to do (``cluster``: the bootstrap servers, for the commands it names)."""
    result: list[TopicPartition] = []
    for spec in specs:
        if spec.partitions is not None:
            result.extend(TopicPartition(spec.topic, p) for p in spec.partitions)
            continue
        known = [tp for tp in committed if tp.topic == spec.topic]
        if committed_first and known:
            result.extend(known)
            continue
        on_broker = partitions_for(spec.topic)
        if on_broker:
            result.extend(TopicPartition(spec.topic, p) for p in on_broker)
        elif known:
            result.extend(known)
        else:
            raise OffsetsError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                topic_missing(spec.topic, cluster, " and the group has no offsets for it"),
            )
    return list(dict.fromkeys(result))


def parse_datetime(text: str) -> int:
    """An ISO 8601 date-time (``2024-05-01T12:00:00``, ``...Z``, ``...+02:00``, fractional
    seconds allowed) as epoch ms. Without a zone it is local time, as in Kafka's tool."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"cannot parse date-time {text!r}: expected ISO 8601, e.g. 2024-05-01T12:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # local time zone
    return int(parsed.timestamp() * 1000)


ResetKind = Literal["earliest", "latest", "current", "offset", "shift", "datetime"]


@dataclass(frozen=True, slots=True)
class ResetTarget:
    """Where ``reset-offsets`` moves each partition. ``value`` is N for ``offset``/``shift``
    and epoch ms for ``datetime``."""

    kind: ResetKind
    value: int = 0


def reset_target(args: argparse.Namespace) -> ResetTarget:
    """The target of the one ``--to-*``/``--shift-by`` flag given (argparse requires one)."""
    if args.to_earliest:
        return ResetTarget("earliest")
    if args.to_latest:
        return ResetTarget("latest")
    if args.to_current:
        return ResetTarget("current")
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise UsageError(f"--to-offset must be >= 0, got {args.to_offset}")
        return ResetTarget("offset", args.to_offset)
    if args.shift_by is not None:
        return ResetTarget("shift", args.shift_by)
    return ResetTarget("datetime", parse_datetime(args.to_datetime))


#: A ``shift`` row's error where the group has no committed offset (Kafka: "Cannot shift offset
#: for partition ... since there is no current committed offset", and nothing is reset).
NO_OFFSET_TO_SHIFT = "no committed offset to shift"


@dataclass(frozen=True, slots=True)
class ResetRow:
    """One partition of a reset plan: ``new_offset`` None with ``error`` set when it cannot be
    reset; ``note`` says when Kafka's range check moved the requested offset."""

    topic: str
    partition: int
    current_offset: int
    new_offset: int | None
    error: str | None = None
    note: str | None = None


def plan_reset(
    target: ResetTarget,
    partitions: Sequence[TopicPartition],
    current: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int | None] | None = None,
) -> list[ResetRow]:
    """The new offset of every partition, as Kafka's ``ResetOffsetsCommand`` computes it.

    ``current`` holds committed offsets (missing or -1: none); ``earliest``/``latest`` the
    log-start and log-end offsets (a partition missing there is unknown to the broker:
    UNKNOWN_TOPIC_OR_PARTITION); ``by_time`` the offsets for ``datetime`` (None: no message
    that recent, so the log end). ``offset`` and ``shift`` are clamped into
    ``[earliest, latest]`` with a note, as Kafka's range check does; ``shift`` needs a
    committed offset (Kafka's tool refuses the whole reset without one: ``NO_OFFSET_TO_SHIFT``
    rows), ``current`` without one takes the log end offset, as Kafka's tool does. One row per
    partition, in ``partitions`` order.
    """
    rows = []
    for tp in partitions:
        now = current.get(tp, -1)
        if now is None:
            now = -1
        row = ResetRow(tp.topic, tp.partition, now, None)
        if tp not in earliest or tp not in latest:
            error = describe_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            rows.append(replace(row, error=error))
            continue
        low, high = earliest[tp], latest[tp]
        requested: int
        if target.kind == "earliest":
            rows.append(replace(row, new_offset=low))
            continue
        if target.kind == "latest":
            rows.append(replace(row, new_offset=high))
            continue
        if target.kind == "datetime":
            found = (by_time or {}).get(tp)
            rows.append(replace(row, new_offset=high if found is None else found))
            continue
        if target.kind == "current":
            if now < 0:
                note = f"no committed offset: using the log end offset {high}, as Kafka does"
                rows.append(replace(row, new_offset=high, note=note))
            else:
                rows.append(replace(row, new_offset=now))
            continue
        if target.kind == "offset":
            requested = target.value
        elif target.kind == "shift":
            if now < 0:
                rows.append(replace(row, error=NO_OFFSET_TO_SHIFT))
                continue
            requested = now + target.value
        else:  # pragma: no cover - argparse only produces the kinds above
            raise ValueError(f"unknown reset kind {target.kind!r}")
        if requested > high:
            note = f"{requested} is after the log end offset {high}: using {high}"
            rows.append(replace(row, new_offset=high, note=note))
        elif requested < low:
            note = f"{requested} is before the log start offset {low}: using {low}"
            rows.append(replace(row, new_offset=low, note=note))
        else:
            rows.append(replace(row, new_offset=requested))
    return rows
