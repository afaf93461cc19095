"""``reset-offsets``: move a group's offsets to a log position, a time or a shift, as Kafka's
``kafka-consumer-groups.sh --reset-offsets`` does (dry run unless ``--execute``)."""

from __future__ import annotations

from typing import Any

from connectors.client.errors import CommitFailedError, OffsetsError, describe_error
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from streaming.cli.context import Context
from streaming.cli.errors import EXIT_OK, CommandFailed
from streaming.cli.output import Progress, error_json, error_text
from streaming.cli.reset import (
    NO_OFFSET_TO_SHIFT,
    ResetRow,
    ResetTarget,
    parse_topic_spec,
    plan_reset,
    reset_target,
    scope_partitions,
    topic_missing,
)
from streaming.cli.validation import check_group


def _plan(ctx: Context, group: str, target: ResetTarget) -> list[ResetRow]:
    """The reset plan of ``group``'s partitions in scope (``--all-topics``: those it committed),
    from the sink's committed offsets and the broker's log offsets."""
    args = ctx.args
    specs = [parse_topic_spec(t) for t in args.topic or []]
    committed = {o.topic_partition: o.offset for o in ctx.reader.fetch(group)}
    broker = ctx.reader.broker
    if args.all_topics:
        partitions = sorted(committed)
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
    by_time = (
        broker.offsets_for_time(partitions, target.value) if target.kind == "datetime" else None
    )
    progress.update(3)
    progress.finish()
    return plan_reset(target, partitions, committed, earliest, latest, by_time)


def _commit(ctx: Context, group: str, plan: list[ResetRow]) -> CommitFailedError | None:
    """Commit the plan's new offsets in one request; returns the refusal, if any."""
    offsets = {TopicPartition(r.topic, r.partition): r.new_offset for r in plan}
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
    """Why the plan's rows in error cannot be reset, and what to do, on one line: a topic the
    cluster does not have, partitions beyond a topic's, partitions without an offset to shift
    (Kafka's tool refuses the whole reset for those too)."""
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
    """``reset-offsets``: show the plan; with ``--execute`` and no partition in error, commit
    it through the job. A group with members refuses it (UNKNOWN_MEMBER_ID), as in Kafka."""
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
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "current_offset": r.current_offset,
                    "new_offset": r.new_offset,
                    "error": row_error(r),
                    "note": r.note,
                }
                for r in plan
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
    return EXIT_OK
