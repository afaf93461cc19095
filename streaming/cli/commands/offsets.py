"""Reading and committing one group's offsets: ``list``, ``describe``, ``commit``, ``history``
and ``status``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from connectors.client.errors import describe_error
from connectors.client.liveness import liveness
from connectors.sinks import Lease, Standby, redact_url
from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetAndMetadata, TopicPartition
from streaming.cli.context import Context
from streaming.cli.errors import (
    EXIT_FAILURE,
    EXIT_OK,
    UsageError,
    check_group,
    check_partition,
    check_topic,
)
from streaming.cli.failures import kafka_unreachable
from streaming.cli.output import GROUP_ID, attributes, format_timestamp, short_metadata

if TYPE_CHECKING:
    from connectors.sinks import Sink

#: JSON keys of ``list``, of a ``describe`` group and of each of its partitions.
LIST_KEYS: Final = ("group", "partitions", "generation", "members")
GROUP_KEYS: Final = ("group", "exists", "generation", "members", "total_lag", "max_lag_seconds")
# fmt: off
PARTITION_KEYS: Final = (
    "topic", "partition", "committed_offset", "log_end_offset", "lag", "lag_seconds",
    "lag_seconds_bounded", "leader_epoch", "metadata", "commit_timestamp_ms", "expire_timestamp_ms",
    "error_code",
)
#: Table headers of ``describe`` (those of ``kafka-consumer-groups.sh --describe``, plus two).
DESCRIBE_HEADERS: Final = (
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LAG-SECONDS",
    "COMMITTED-AT", "METADATA",
)
#: JSON keys of a ``history`` entry and of ``status``'s last batch.
HISTORY_KEYS: Final = (
    "group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp_ms",
    "batch_id",
)
PROGRESS_KEYS: Final = (
    "batch_id", "input_rows", "commits_applied", "rejected", "tombstones", "state_keys",
    "duration_ms", "timestamp_ms",
)
#: JSON keys of ``status``'s leases and of each one's standbys.
LEASE_KEYS: Final = (
    "name", "holder", "epoch", "renewed_at_ms", "renewed_age_ms", "expires_at_ms", "expires_in_ms",
)
STANDBY_KEYS: Final = ("holder", "state", "heartbeat_at_ms", "heartbeat_age_ms")
# fmt: on


def cmd_list(ctx: Context) -> int:
    """``list``: the groups the sink knows, their partition and member counts and largest lag
    in seconds (as ``describe`` figures it); ``--tenant``: what it may DESCRIBE."""
    groups = ctx.reader.list_groups()
    viewer = ctx.viewer
    if viewer is not None:
        groups = [
            replace(g, partitions=len(viewer.partitions(ctx.reader.fetch(g.group_id))))
            for g in groups
            if viewer.may_see_group(g.group_id)
        ]
    topics = None if viewer is None else viewer.may_see_topic
    behind = _max_lag_seconds(ctx, [g.group_id for g in groups], topics)
    if ctx.json:
        ctx.emit_json(
            [
                {
                    **attributes(g, LIST_KEYS, GROUP_ID),
                    "max_lag_seconds": behind[g.group_id],
                }
                for g in groups
            ]
        )
        return EXIT_OK
    ctx.check_status_note()
    ctx.table(
        ("GROUP", "PARTITIONS", "GENERATION", "MEMBERS", "LAG-SECONDS"),
        [
            (
                g.group_id,
                g.partitions,
                g.generation,
                g.members,
                _seconds(behind[g.group_id], False),
            )
            for g in groups
        ],
    )
    return EXIT_OK


def _max_lag_seconds(
    ctx: Context, groups: list[str], topics: Callable[[str], bool] | None
) -> dict[str, float | None]:
    """Each group's largest lag in seconds as ``describe`` figures it; Kafka unreachable: from
    the sink's log-end samples alone, and a warning."""
    from kafka.errors import KafkaError

    try:
        return ctx.reader.max_lag_seconds(groups, topics)
    except KafkaError as exc:
        reason = kafka_unreachable(ctx.config.bootstrap_servers, exc)
        ctx.err(f"warning: {reason}: lag in seconds from the sink's samples alone")
        return ctx.reader.max_lag_seconds(groups, topics, ask_broker=False)


def _seconds(value: float | None, bounded: bool) -> str | None:
    """A lag in seconds as shown: one decimal, ">=" where it is only a lower bound."""
    if value is None:
        return None
    return f"{'>=' if bounded else ''}{value:.1f}"


def cmd_describe(ctx: Context) -> int:
    """``describe``: committed offset, log-end offset and lag of the groups' partitions; a
    group missing (GROUP_ID_NOT_FOUND) or hidden from ``--tenant`` is exit 1, the others shown;
    ``--require-stable``: a partition a transaction holds an offset of is UNSTABLE_OFFSET_COMMIT
    (88, offset -1, exit 1), as Kafka's OffsetFetch with RequireStable answers."""
    if getattr(ctx.args, "as_of", None) is not None:
        from streaming.cli.commands.as_of import cmd_describe_as_of

        return cmd_describe_as_of(ctx)
    if getattr(ctx.args, "starting_offsets", False):
        if ctx.args.tenant:
            raise UsageError("--tenant does not go with --starting-offsets")
        return _starting_offsets(ctx)
    if getattr(ctx.args, "topic", None):
        raise UsageError("--topic goes with --starting-offsets")
    asked = ctx.groups()
    shown_groups = ctx.refuse_hidden_groups(asked)
    descriptions = _describe_all(ctx, shown_groups)
    if ctx.viewer is not None:
        descriptions = [
            replace(d, partitions=tuple(ctx.viewer.partitions(d.partitions))) for d in descriptions
        ]
    missing = [d.group_id for d in descriptions if not d.exists]
    unstable = [(d.group_id, p) for d in descriptions for p in d.partitions if p.error_code]
    if ctx.json:
        ctx.emit_json(
            [
                {
                    **attributes(d, GROUP_KEYS, GROUP_ID),
                    "partitions": [attributes(p, PARTITION_KEYS) for p in d.partitions],
                }
                for d in descriptions
            ]
        )
    else:
        ctx.check_status_note()
        shown = [d for d in descriptions if d.exists]
        for d in shown:
            if d.members is not None:
                ctx.err(f"group {d.group_id!r}: generation {d.generation}, {d.members} member(s)")
            if not d.partitions:
                ctx.err(f"group {d.group_id!r} has no committed offsets")
        rows = [
            (
                d.group_id,
                p.topic,
                p.partition,
                None if p.error_code else p.committed_offset,
                p.log_end_offset,
                p.lag,
                _seconds(p.lag_seconds, p.lag_seconds_bounded),
                format_timestamp(p.commit_timestamp_ms),
                short_metadata(p.metadata),
            )
            for d in shown
            for p in d.partitions
        ]
        if rows:
            ctx.table(DESCRIBE_HEADERS, rows)
    for group in missing:
        ctx.err(
            f"error: {describe_error(ErrorCode.GROUP_ID_NOT_FOUND)}: group {group!r} does not exist"
        )
    for group, p in unstable:
        ctx.err(
            f"error: {describe_error(p.error_code)}: group {group!r}, {p.topic}-{p.partition}: "
            "a transaction holds an offset not applied yet; retry"
        )
    failed = missing or unstable or len(shown_groups) < len(asked)
    return EXIT_FAILURE if failed else EXIT_OK


def _starting_offsets(ctx: Context) -> int:
    """``describe --starting-offsets``: the group's offsets as a Spark Kafka query's
    ``startingOffsets``, once the job applied every commit the group sent (a mirror's sink:
    as it is, with a note)."""
    groups = list(dict.fromkeys(ctx.args.group or []))
    if getattr(ctx.args, "all_groups", False) or len(groups) != 1:
        raise UsageError("--starting-offsets takes exactly one --group")
    group = groups[0]
    reader = ctx.reader
    if reader.sink.source_cluster() is not None:
        ctx.err("note: a mirror's sink: showing the offsets it last copied")
    else:
        from connectors.client import wait_until_applied  # on use: other commands start faster

        wait_until_applied(
            reader,
            group,
            ingest_topic=ctx.config.ingest_topic,
            tenant_topics=[t.ingest_topic for t in ctx.config.tenants],
            timeout_s=ctx.timeout_s,
        )
    try:
        text = reader.spark_starting_offsets(
            group, ctx.args.topic or None, require_stable=ctx.args.require_stable
        )
    except ValueError as exc:  # a group without committed offsets and no --topic
        raise UsageError(str(exc).replace("give topics", "give --topic")) from None
    if ctx.json:
        ctx.emit_json(json.loads(text))
    else:
        ctx.out(text)
    return EXIT_OK


def _describe_all(ctx: Context, groups: list[str]) -> list[Any]:
    """Each group's description; Kafka unreachable: the sink's log-end offsets and a warning."""
    from kafka.errors import KafkaError

    stable = ctx.args.require_stable
    try:
        return [ctx.reader.describe(g, require_stable=stable) for g in groups]
    except KafkaError as exc:
        ctx.err(f"warning: {kafka_unreachable(ctx.config.bootstrap_servers, exc)}: lag unknown")
        return [ctx.reader.describe(g, ask_broker=False) for g in groups]


def cmd_commit(ctx: Context) -> int:
    """``commit``: one offset, synchronously, through the job (invalid values are usage errors,
    refused before anything is sent)."""
    args = ctx.args
    check_group(args.group)
    check_topic(args.topic)
    check_partition(args.partition)
    if args.offset < 0:
        raise UsageError(f"--offset must be >= 0 (a negative offset), got {args.offset}")
    ctx.require_live_job()
    tp = TopicPartition(args.topic, args.partition)
    value = OffsetAndMetadata(args.offset, leader_epoch=args.leader_epoch, metadata=args.metadata)
    try:
        result = ctx.client.commit(args.group, {tp: value}, timeout_s=ctx.timeout_s)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if ctx.json:
        ctx.emit_json(
            {
                "group": args.group,
                "topic": tp.topic,
                "partition": tp.partition,
                "offset": args.offset,
                "leader_epoch": args.leader_epoch,
                "metadata": args.metadata,
                "request_ids": list(result.request_ids),
            }
        )
    else:
        ctx.out(
            f"Committed offset {args.offset} for {tp.topic}-{tp.partition} of group {args.group!r}."
        )
    return EXIT_OK


def cmd_history(ctx: Context) -> int:
    """``history``: a group's applied commits, newest first (kept only with keep_history),
    each with how much of the history around it is kept (KEPT: all, or one per bucket where it
    is thinned, ``state.commit_history``)."""
    args = ctx.args
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition requires --topic")
    if args.topic is not None:
        check_topic(args.topic)
    if args.partition is not None:
        check_partition(args.partition)
    if args.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {args.limit}")
    from connectors.sinks.values import now_ms
    from state.commit_history import kept_one_per

    entries = ctx.reader.history(args.group, args.topic, args.partition, args.limit)
    now = now_ms()
    kept = [kept_one_per(e.commit_timestamp_ms, now) for e in entries]
    if ctx.json:
        ctx.emit_json(
            [
                {**attributes(e, HISTORY_KEYS, GROUP_ID), "kept_one_per_ms": spacing}
                for e, spacing in zip(entries, kept, strict=True)
            ]
        )
        return EXIT_OK
    ctx.table(
        ("GROUP", "TOPIC", "PARTITION", "OFFSET", "COMMITTED-AT", "KEPT", "BATCH", "METADATA"),
        [
            (
                e.group_id,
                e.topic,
                e.partition,
                e.offset,
                format_timestamp(e.commit_timestamp_ms),
                _kept(spacing),
                e.batch_id,
                short_metadata(e.metadata),
            )
            for e, spacing in zip(entries, kept, strict=True)
        ],
    )
    if not entries:
        ctx.err("no history (the job keeps it only with keep_history enabled)")
    return EXIT_OK


def _kept(spacing_ms: int | None) -> str:
    """How much of the history around a commit is kept: every commit, or one per bucket."""
    if spacing_ms is None:
        return "all"
    for unit, name in ((3_600_000, "h"), (60_000, "min"), (1000, "s")):
        if spacing_ms % unit == 0:
            count = spacing_ms // unit
            return f"1/{'' if count == 1 else count}{name}"
    return f"1/{spacing_ms}ms"


def _leases(sink: Sink) -> list[dict[str, Any]]:
    """Each deployment's lease (the job's ``job``, a mirror's ``mirror``) and its standbys
    seen in the last seconds, times as the sink's clock saw them."""

    def shown(lease: Lease, waiting: list[Standby]) -> dict[str, Any]:
        standbys = [
            dict(zip(STANDBY_KEYS, (s.holder, s.state, s.heartbeat_at_ms, s.age_ms), strict=True))
            for s in waiting
        ]
        renewed_age_ms = lease.read_at_ms - lease.renewed_at_ms
        values = (lease.name, lease.holder or None, lease.epoch, lease.renewed_at_ms)
        values += (renewed_age_ms, lease.expires_at_ms, lease.expires_in_ms)
        return {**dict(zip(LEASE_KEYS, values, strict=True)), "standbys": standbys}

    return [shown(lease, waiting) for lease, waiting in sink.deployments()]


def _lease_rows(leases: list[dict[str, Any]]) -> list[tuple[str, object]]:
    """``status``'s table rows of :func:`_leases`: who writes, until when; who waits."""
    rows: list[tuple[str, object]] = []
    for lease in leases:
        name = lease["name"]
        if lease["holder"] is None:
            held = f"free (epoch {lease['epoch']})"
        else:
            left = lease["expires_in_ms"] / 1000
            until = f"expires in {left:.1f} s" if left > 0 else f"expired {-left:.1f} s ago"
            held = (
                f"{lease['holder']} (epoch {lease['epoch']}, renewed"
                f" {lease['renewed_age_ms'] / 1000:.1f} s ago, {until})"
            )
        rows.append((f"lease {name}", held))
        rows += [
            (
                f"standby of {name}",
                f"{s['holder']} {s['state']} (seen {s['heartbeat_age_ms'] / 1000:.1f} s ago)",
            )
            for s in lease["standbys"]
        ]
        if not lease["standbys"]:
            rows.append((f"standby of {name}", "none"))
    return rows


def cmd_status(ctx: Context) -> int:
    """``status``: the job's coordinator status and last batch; each deployment's lease (who
    writes) and its standbys (who would take over)."""
    status = ctx.reader.status()
    alive = liveness(status)
    progress = status.last_progress
    data: dict[str, Any] = {
        "status": alive.status,
        "stored_status": status.status,
        "heartbeat_at_ms": alive.last_seen_ms,
        "heartbeat_age_ms": alive.age_ms,
        "detail": status.detail,
        "last_batch_id": status.last_batch_id,
        "updated_at_ms": status.updated_at_ms,
        "ingest_offsets": {str(p): o for p, o in sorted(status.ingest_offsets.items())},
        "last_progress": None if progress is None else attributes(progress, PROGRESS_KEYS),
        "sink_url": redact_url(ctx.config.sink_url),
        "leases": _leases(ctx.reader.sink),
    }
    if ctx.json:
        ctx.emit_json(data)
        return EXIT_OK
    rows: list[tuple[str, object]] = [
        ("status", alive.status),
        ("last seen", alive.last_seen() if alive.status == "NOT RESPONDING" else None),
        ("heartbeat at", format_timestamp(alive.last_seen_ms)),
        ("detail", status.detail or None),
        ("sink", data["sink_url"]),
        ("updated at", format_timestamp(status.updated_at_ms)),
        ("last batch", status.last_batch_id if status.last_batch_id >= 0 else None),
    ]
    if progress is not None:
        rows += [
            ("batch time", format_timestamp(progress.timestamp_ms)),
            ("batch duration ms", progress.duration_ms),
            ("input rows", progress.input_rows),
            ("commits applied", progress.commits_applied),
            ("rejected", progress.rejected),
            ("tombstones", progress.tombstones),
            ("state keys", progress.state_keys),
        ]
    rows += _lease_rows(data["leases"])
    ctx.table(("FIELD", "VALUE"), rows)
    return EXIT_OK
