"""``export`` and ``import``: committed offsets to and from CSV (``streaming.cli.csv_io``), to
copy groups between clusters or keep a backup. ``import`` is a dry run unless ``--execute``."""

from __future__ import annotations

from connectors.client.errors import CommitFailedError, describe_error
from state.coordinator.model import OffsetAndMetadata, TopicPartition
from streaming.cli.context import Context
from streaming.cli.csv_io import CSV_COLUMNS, CsvOffset, read_csv_file, write_csv
from streaming.cli.errors import EXIT_FAILURE, EXIT_OK, CommandFailed
from streaming.cli.output import Progress, attributes, error_text


def cmd_export(ctx: Context) -> int:
    """``export``: the groups' committed offsets as CSV on stdout or in ``--file`` (with
    ``--json`` on stdout: the rows, or what was written to the file). ``--tenant``: the
    offsets Kafka's OffsetFetch answers its principal (a group it may not DESCRIBE is
    GROUP_AUTHORIZATION_FAILED, exit 1 after the others are written; topics it may not
    DESCRIBE are left out)."""
    asked = ctx.groups()
    groups = ctx.refuse_hidden_groups(asked)
    viewer = ctx.viewer
    rows = [
        CsvOffset(g, o.topic, o.partition, o.offset, o.leader_epoch, o.metadata)
        for g in groups
        for o in ctx.reader.fetch(g)
        if viewer is None or viewer.may_see_topic(o.topic)
    ]
    status = EXIT_OK if len(groups) == len(asked) else EXIT_FAILURE
    path = ctx.args.file
    if path is None:
        if ctx.json:
            ctx.emit_json([attributes(r, CSV_COLUMNS) for r in rows])
        else:
            write_csv(rows, ctx.stdout)
        return status
    with open(path, "w", newline="", encoding="utf-8") as handle:
        count = write_csv(rows, handle)
    if ctx.json:
        ctx.emit_json({"file": path, "groups": len(groups), "offsets": count})
    else:
        ctx.err(f"exported {count} offset(s) of {len(groups)} group(s) to {path}")
    return status


def _commit_groups(
    ctx: Context, by_group: dict[str, list[CsvOffset]]
) -> dict[str, CommitFailedError]:
    """Commit each group's rows in one request through the job; returns the refused groups.
    Kafka applies a commit's valid partitions, so a refused group may be partly committed."""
    failures: dict[str, CommitFailedError] = {}
    progress = Progress("importing groups", len(by_group), ctx.stderr)
    progress.update(0)
    for i, (group, group_rows) in enumerate(by_group.items(), 1):
        offsets = {
            TopicPartition(r.topic, r.partition): OffsetAndMetadata(
                r.offset, leader_epoch=r.leader_epoch, metadata=r.metadata
            )
            for r in group_rows
        }
        try:
            ctx.client.commit(group, offsets, timeout_s=ctx.timeout_s)
        except CommitFailedError as exc:
            failures[group] = exc
        progress.update(i)
    progress.finish()
    return failures


def cmd_import(ctx: Context) -> int:
    """``import``: show each row's current and new offset; with ``--execute`` commit them,
    group by group. Exit 1 when a group was refused (its error is shown per partition). The
    file is this tool's export or Kafka's ``--reset-offsets --export`` CSV (``--group`` names
    the group of its three-column form)."""
    rows = read_csv_file(ctx.args.file, ctx.args.group)
    if ctx.args.execute:
        ctx.require_live_job()
    by_group: dict[str, list[CsvOffset]] = {}
    for r in rows:
        by_group.setdefault(r.group, []).append(r)
    current: dict[tuple[str, str, int], int] = {}
    for group, group_rows in by_group.items():
        asked = [TopicPartition(r.topic, r.partition) for r in group_rows]
        for o in ctx.reader.fetch(group, asked):
            current[(group, o.topic, o.partition)] = o.offset
    failures = _commit_groups(ctx, by_group) if ctx.args.execute else {}

    def status(r: CsvOffset) -> str | None:
        exc = failures.get(r.group)
        if exc is None:
            return None
        code = exc.partitions.get(TopicPartition(r.topic, r.partition), exc.error_code)
        return describe_error(code) if code else "not applied"

    def current_offset(r: CsvOffset) -> int:
        return current.get((r.group, r.topic, r.partition), -1)

    if ctx.json:
        ctx.emit_json(
            {
                "executed": bool(ctx.args.execute),
                "groups": len(by_group),
                "offsets": [
                    {
                        "group": r.group,
                        "topic": r.topic,
                        "partition": r.partition,
                        "current_offset": current_offset(r),
                        "new_offset": r.offset,
                        "error": status(r),
                    }
                    for r in rows
                ],
            }
        )
    else:
        ctx.table(
            ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
            [(r.group, r.topic, r.partition, current_offset(r), r.offset) for r in rows],
            [status(r) for r in rows] if failures else None,
        )
    for exc in failures.values():
        ctx.err(f"error: {error_text(exc)}")
    if failures:
        raise CommandFailed
    if not ctx.args.execute:
        ctx.dry_run_note()
    elif not ctx.json:
        ctx.err(f"imported {len(rows)} offset(s) of {len(by_group)} group(s)")
    return EXIT_OK
