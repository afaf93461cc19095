"""``reset-offsets``: move a group's offsets to a log position, a time or a shift, as Kafka's
``kafka-consumer-groups.sh --reset-offsets`` does (dry run unless ``--execute``), or back to
the offsets it had committed at a time (``--to-committed-at``, from the sink's history)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from connectors.client.errors import CommitFailedError, OffsetsError, describe_error
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from streaming.cli.context import Context
from streaming.cli.errors import EXIT_OK, CommandFailed, UsageError, check_group, check_topic
from streaming.cli.output import (
    Progress,
    attributes,
    error_json,
    error_text,
    format_timestamp,
)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """``--topic T`` (all partitions: ``partitions`` None) or ``--topic T:0,2``."""

    topic: str
    partitions: tuple[int, ...] | None = None


def parse_topic_spec(text: str) -> TopicSpec:
    """Parse ``T`` or ``T:P,P`` (topic names cannot hold ``:``); a bad one is a UsageError."""
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
    """What to do about a topic the Kafka cluster at ``cluster`` does not have."""
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
    """The partitions a ``--topic`` list names, each once, in order; for a whole topic all the
    broker has, else the group's ``committed`` ones (``committed_first``: those first, as
    ``delete-offsets`` wants). UNKNOWN_TOPIC_OR_PARTITION for a topic neither knows."""
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
    """An ISO 8601 date-time as epoch ms; without a zone, local time (as Kafka's tool)."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"cannot parse date-time {text!r}: expected ISO 8601, e.g. 2024-05-01T12:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # local time zone
    return int(parsed.timestamp() * 1000)


def parse_time(text: str, flag: str) -> int:
    """``flag``'s TIME: epoch milliseconds, or an ISO 8601 date-time (no zone: local time,
    as ``--to-datetime``); a UsageError naming the flag otherwise."""
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    try:
        return parse_datetime(stripped)
    except UsageError:
        raise UsageError(
            f"{flag} {text!r}: expected epoch milliseconds or ISO 8601, e.g. 2024-05-01T12:00:00Z"
        ) from None


ResetKind = Literal["earliest", "latest", "current", "offset", "shift", "datetime", "committed_at"]
#: ``--to-committed-at``'s partitions without a commit then: left alone, or a fallback.
Fallback = Literal["earliest", "latest"] | None


@dataclass(frozen=True, slots=True)
class ResetTarget:
    """Where ``reset-offsets`` moves each partition: ``value`` is N, or epoch ms (datetime,
    committed_at); ``fallback``: committed_at's partitions without a commit then."""

    kind: ResetKind
    value: int = 0
    fallback: Fallback = None


def reset_target(args: argparse.Namespace) -> ResetTarget:
    """The target of the one ``--to-*``/``--shift-by`` flag given (argparse requires one)."""
    for fallback_flag in ("or_earliest", "or_latest"):
        if getattr(args, fallback_flag, False) and getattr(args, "to_committed_at", None) is None:
            flag = "--" + fallback_flag.replace("_", "-")
            raise UsageError(f"{flag} goes with --to-committed-at")
    for kind in ("earliest", "latest", "current"):
        if getattr(args, f"to_{kind}"):
            return ResetTarget(kind)  # type: ignore[arg-type]
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise UsageError(f"--to-offset must be >= 0, got {args.to_offset}")
        return ResetTarget("offset", args.to_offset)
    if args.shift_by is not None:
        return ResetTarget("shift", args.shift_by)
    fallback: Fallback = (
        "earliest"
        if getattr(args, "or_earliest", False)
        else "latest"
        if getattr(args, "or_latest", False)
        else None
    )
    if getattr(args, "to_committed_at", None) is not None:
        at = parse_time(args.to_committed_at, "--to-committed-at")
        return ResetTarget("committed_at", at, fallback)
    return ResetTarget("datetime", parse_datetime(args.to_datetime))


#: JSON keys of a row of the plan (then its ``error`` and ``note``).
ROW_KEYS = ("topic", "partition", "current_offset", "new_offset")
#: A ``shift`` row's error without a committed offset (Kafka refuses the whole reset).
NO_OFFSET_TO_SHIFT = "no committed offset to shift"
#: A ``committed_at`` row without a commit then and no fallback: not reset.
NO_COMMIT_THEN = "no commit at or before that time: left alone (--or-earliest, --or-latest)"


@dataclass(frozen=True, slots=True)
class ResetRow:
    """One partition of a reset plan (``error``: it cannot be reset; ``note``: moved into the
    log's range, or how it was found; ``new_offset`` None without an error: left alone)."""

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
    """One row per partition with its new offset, as Kafka's ``ResetOffsetsCommand`` computes
    it (``current`` missing or -1: none; not in ``earliest``/``latest``:
    UNKNOWN_TOPIC_OR_PARTITION; ``by_time`` None: the log end)."""
    rows = []
    for tp in partitions:
        now = current.get(tp, -1)
        now = -1 if now is None else now
        row = ResetRow(tp.topic, tp.partition, now, None)
        if tp not in earliest or tp not in latest:
            error = describe_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            rows.append(replace(row, error=error))
        elif target.kind == "shift" and now < 0:
            rows.append(replace(row, error=NO_OFFSET_TO_SHIFT))
        elif target.kind == "committed_at" and (by_time or {}).get(tp) is None:
            if target.fallback is None:
                rows.append(replace(row, note=NO_COMMIT_THEN))
            else:
                offset = earliest[tp] if target.fallback == "earliest" else latest[tp]
                note = f"no commit at or before that time: the log {target.fallback} offset"
                rows.append(replace(row, new_offset=offset, note=note))
        else:
            offset, note = _new_offset(
                target, now, earliest[tp], latest[tp], (by_time or {}).get(tp)
            )
            rows.append(replace(row, new_offset=offset, note=note))
    return rows


def _new_offset(
    target: ResetTarget, now: int, low: int, high: int, found: int | None
) -> tuple[int, str | None]:
    """One partition's new offset and, when it is not the one asked for, why."""
    if target.kind == "earliest":
        return low, None
    if target.kind == "latest":
        return high, None
    if target.kind == "datetime":
        return (high if found is None else found), None
    if target.kind == "current":
        if now < 0:
            return high, f"no committed offset: using the log end offset {high}, as Kafka does"
        return now, None
    if target.kind == "committed_at":
        requested = found if found is not None else now
    else:
        requested = target.value if target.kind == "offset" else now + target.value
    if requested > high:
        return high, f"{requested} is after the log end offset {high}: using {high}"
    if requested < low:
        return low, f"{requested} is before the log start offset {low}: using {low}"
    return requested, None


def _plan(ctx: Context, group: str, target: ResetTarget) -> list[ResetRow]:
    """The reset plan of ``group``'s partitions in scope (``--all-topics``: those it committed)."""
    args = ctx.args
    specs = [parse_topic_spec(t) for t in args.topic or []]
    committed = {o.topic_partition: o.offset for o in ctx.reader.fetch(group)}
    broker = ctx.reader.broker
    then: dict[TopicPartition, int | None] = {}
    if target.kind == "committed_at":
        for answer in ctx.reader.committed_as_of(group, target.value):
            then[answer.topic_partition] = answer.offset
            if not answer.exact:
                ctx.err(
                    f"note: {answer.topic}-{answer.partition}: the history is thinned there:"
                    f" offset {answer.offset} is the group's last commit as of"
                    f" {format_timestamp(answer.exact_as_of_ms)}"
                )
    if args.all_topics:
        partitions = sorted({*committed, *then})
        if not partitions:
            raise OffsetsError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"group {group!r} has no committed offsets: name the topics with --topic",
            )
    else:
        partitions = scope_partitions(
            specs, list(committed), broker.partitions_for, cluster=ctx.config.bootstrap_servers
        )
    progress = Progress("resolving offsets", 3, ctx.stderr)
    earliest = broker.beginning_offsets(partitions)
    progress.update(1)
    latest = broker.end_offsets(partitions)
    progress.update(2)
    by_time: Mapping[TopicPartition, int | None] | None = (
        broker.offsets_for_time(partitions, target.value) if target.kind == "datetime" else then
    )
    progress.update(3)
    progress.finish()
    return plan_reset(target, partitions, committed, earliest, latest, by_time)


def _commit(ctx: Context, group: str, plan: list[ResetRow]) -> CommitFailedError | None:
    """Commit the plan's new offsets in one request; returns the refusal, if any."""
    offsets = {
        TopicPartition(r.topic, r.partition): r.new_offset for r in plan if r.new_offset is not None
    }
    spinner = Progress(f"committing {len(offsets)} partition(s)", len(offsets), ctx.stderr)
    spinner.update(0)
    try:
        ctx.client.commit(group, offsets, timeout_s=ctx.timeout_s)  # type: ignore[arg-type]
    except CommitFailedError as exc:
        return exc
    finally:
        spinner.finish()
    return None


def _topic_flags(rows: list[ResetRow]) -> str:
    """``--topic T:P,P`` flags naming the partitions of ``rows``."""
    by_topic: dict[str, list[str]] = {}
    for r in rows:
        by_topic.setdefault(r.topic, []).append(str(r.partition))
    return " ".join(f"--topic {topic}:{','.join(ps)}" for topic, ps in by_topic.items())


def _why(ctx: Context, plan: list[ResetRow]) -> str:
    """Why the plan's rows in error cannot be reset, and what to do, on one line."""
    reasons = []
    unknown = describe_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    for topic in dict.fromkeys(r.topic for r in plan if r.error == unknown):
        existing = ctx.reader.broker.partitions_for(topic)
        if not existing:
            reasons.append(topic_missing(topic, ctx.config.bootstrap_servers))
            continue
        missing = [r for r in plan if r.topic == topic and r.error == unknown]
        reasons.append(
            f"{', '.join(f'{r.topic}-{r.partition}' for r in missing)}: no such partition "
            f"(topic {topic!r} has partitions 0-{max(existing)})"
        )
    unshifted = [r for r in plan if r.error == NO_OFFSET_TO_SHIFT]
    if unshifted:
        names = ", ".join(f"{r.topic}-{r.partition}" for r in unshifted)
        reason = (
            f"the group has no committed offset on {names} to shift: give those one first "
            f"({_topic_flags(unshifted)} --to-earliest, --to-latest or --to-offset N)"
        )
        shiftable = [r for r in plan if r.error is None]
        if shiftable:
            reason += f", or shift only the others ({_topic_flags(shiftable)})"
        reasons.append(reason)
    return "; ".join(reasons)


def cmd_reset_offsets(ctx: Context) -> int:
    """``reset-offsets``: show the plan; with ``--execute`` and no row in error, commit it
    (a group with members refuses it: UNKNOWN_MEMBER_ID, as in Kafka)."""
    args = ctx.args
    target = reset_target(args)
    group = check_group(args.group)
    for spec in args.topic or []:
        parse_topic_spec(spec)  # a usage error before anything is read or sent
    if args.execute:
        ctx.require_live_job()
    plan = _plan(ctx, group, target)
    errors = [r for r in plan if r.error]
    for r in plan:
        if r.note:
            ctx.err(f"warning: {r.topic}-{r.partition}: {r.note}")
    if not any(r.new_offset is not None for r in plan) and not errors:
        ctx.err(f"error: group {group!r}: no partition to reset")
        raise CommandFailed
    listing = ctx.reader.group(group)
    if listing is not None and listing.members:
        ctx.err(
            f"warning: group {group!r} has {listing.members} member(s): Kafka resets offsets "
            "only while a group is inactive, so --execute will fail with "
            f"{describe_error(ErrorCode.UNKNOWN_MEMBER_ID)}"
        )
    executed = False
    failure: CommitFailedError | None = None
    if args.execute and not errors:
        failure = _commit(ctx, group, plan)
        executed = failure is None
    codes = failure.partitions if failure is not None else {}

    def row_error(r: ResetRow) -> str | None:
        code = codes.get(TopicPartition(r.topic, r.partition), 0)
        return r.error or (describe_error(code) if code else None)

    if ctx.json:
        data: dict[str, Any] = {
            "group": group,
            "executed": executed,
            "partitions": [
                {**attributes(r, ROW_KEYS), "error": row_error(r), "note": r.note} for r in plan
            ],
        }
        if failure is not None:
            data["error"] = error_json(failure)
        ctx.emit_json(data)
    else:
        ctx.table(
            ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
            [(group, r.topic, r.partition, r.current_offset, r.new_offset) for r in plan],
            [row_error(r) for r in plan] if errors or failure is not None else None,
        )
    if errors:
        ctx.err(
            f"error: {len(errors)} partition(s) cannot be reset, nothing was committed: "
            + _why(ctx, plan)
        )
        raise CommandFailed
    if failure is not None:
        hint = ""
        if failure.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            hint = f" (offsets can only be reset while group {group!r} is inactive)"
        ctx.err(f"error: {error_text(failure)}{hint}")
        raise CommandFailed
    if not args.execute:
        ctx.dry_run_note()
    elif not ctx.json:
        ctx.err(f"committed: {len(plan)} partition(s) of group {group!r} reset, as above")
    return EXIT_OK
