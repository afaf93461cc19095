"""``delete-offsets`` (Kafka's OffsetDelete) and ``delete`` (DeleteGroups), both through the
job: a group with members refuses them, as in Kafka."""

from __future__ import annotations

from connectors.client.errors import (
    DeleteGroupFailedError,
    OffsetDeleteFailedError,
    describe_error,
)
from streaming.cli.commands.reset import parse_topic_spec, scope_partitions
from streaming.cli.context import Context
from streaming.cli.errors import EXIT_FAILURE, EXIT_OK, CommandFailed, check_group
from streaming.cli.output import error_json, error_text, partition_errors


def cmd_delete_offsets(ctx: Context) -> int:
    """``delete-offsets``: delete the named partitions' offsets (a whole topic: those the group
    committed), printing each one's outcome."""
    # Kafka refuses OffsetDelete for the empty group (INVALID_GROUP_ID), unlike OffsetCommit.
    group = check_group(ctx.args.group, empty_allowed=False)
    specs = [parse_topic_spec(t) for t in ctx.args.topic]
    ctx.require_live_job()
    committed = [o.topic_partition for o in ctx.reader.fetch(group)]
    partitions = scope_partitions(
        specs,
        committed,
        ctx.reader.broker.partitions_for,
        committed_first=True,
        cluster=ctx.config.bootstrap_servers,
    )
    failure: OffsetDeleteFailedError | None = None
    try:
        ctx.client.delete_offsets(group, partitions, timeout_s=ctx.timeout_s)
    except OffsetDeleteFailedError as exc:
        failure = exc
    if failure is not None and not failure.failed_partitions:
        if ctx.json:
            ctx.emit_json({"group": group, "error": error_json(failure)})
        ctx.err(f"error: {error_text(failure)}")
        raise CommandFailed
    codes = failure.partitions if failure is not None else {}
    statuses = [(tp, int(codes.get(tp, 0))) for tp in partitions]
    if ctx.json:
        ctx.emit_json({"group": group, "partitions": partition_errors(statuses)})
    else:
        ctx.table(
            ("TOPIC", "PARTITION", "STATUS"),
            [
                (tp.topic, tp.partition, "Successful" if not code else describe_error(code))
                for tp, code in statuses
            ],
        )
    if failure is not None:
        ctx.err(f"error: {error_text(failure)}")
        raise CommandFailed
    return EXIT_OK


def cmd_delete(ctx: Context) -> int:
    """``delete``: delete each empty group and its offsets; exit 1 when any was refused."""
    results: dict[str, DeleteGroupFailedError | None] = {}
    groups = [check_group(g) for g in dict.fromkeys(ctx.args.group)]
    ctx.require_live_job()
    for group in groups:
        try:
            ctx.client.delete_group(group, timeout_s=ctx.timeout_s)
            results[group] = None
        except DeleteGroupFailedError as exc:
            results[group] = exc
    failed = {g: e for g, e in results.items() if e is not None}
    if ctx.json:
        ctx.emit_json(
            {
                "groups": [
                    {"group": g, "deleted": e is None, "error": e and error_json(e)}
                    for g, e in results.items()
                ]
            }
        )
    ok = [g for g, e in results.items() if e is None]
    if ok and not ctx.json:
        names = ", ".join(repr(g) for g in ok)
        ctx.out(f"Deletion of requested consumer groups ({names}) was successful.")
    for group, exc in failed.items():
        ctx.err(f"error: group {group!r} could not be deleted: {describe_error(exc.error_code)}")
    return EXIT_FAILURE if failed else EXIT_OK
