"""``export`` and ``import``: committed offsets to and from CSV (a header, :data:`CSV_COLUMNS`,
then an offset a line; any metadata round-trips). ``import`` also reads Kafka's
``kafka-consumer-groups.sh --reset-offsets --export`` CSV, and is a dry run unless ``--execute``."""

from __future__ import annotations

import csv
import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Final

from connectors.client.errors import CommitFailedError, describe_error
from state.coordinator.model import OffsetAndMetadata, TopicPartition
from streaming.cli.context import Context
from streaming.cli.errors import EXIT_FAILURE, EXIT_OK, CommandFailed, UsageError, check_topic
from streaming.cli.output import Progress, attributes, error_text

#: Columns of ``export`` and ``import`` files, in order.
CSV_COLUMNS: Final = ("group", "topic", "partition", "offset", "leader_epoch", "metadata")


@dataclass(frozen=True, slots=True)
class CsvOffset:
    """One line of an export/import file."""

    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


def write_csv(rows: Sequence[CsvOffset], out: IO[str]) -> int:
    """Write the header and ``rows``; returns the number of rows."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(attributes(r, CSV_COLUMNS).values() for r in rows)
    return len(rows)


#: What each form of Kafka's export gives, in its column order.
_KAFKA_FORMS: Final = {3: "topic,partition,offset", 4: "group,topic,partition,offset"}


def read_csv(source: IO[str], name: str = "input", group: str | None = None) -> list[CsvOffset]:
    """Parse an export file: this tool's, or Kafka's headerless ``topic,partition,offset`` (of
    ``group``) or ``group,topic,partition,offset``. A UsageError names the line at fault (a
    partition listed twice for one group too: which offset wins would be a guess)."""
    reader = csv.reader(source)
    header = next(reader, None)
    if header is None:
        raise UsageError(f"{name}: empty file (expected a header {','.join(CSV_COLUMNS)})")
    if tuple(h.strip() for h in header) == CSV_COLUMNS:
        width, lines = len(CSV_COLUMNS), iter(reader)
    elif len(header) in _KAFKA_FORMS:
        width = len(header)
        # Kafka writes no header; one naming Kafka's columns is taken as such.
        named = ",".join(h.strip().lower() for h in header) == _KAFKA_FORMS[width]
        lines = iter(reader) if named else itertools.chain([header], reader)
        if width == 3 and group is None:
            raise UsageError(
                f"{name}: Kafka's one-group export (topic,partition,offset): name its group "
                "with --group"
            )
    else:
        raise UsageError(
            f"{name}: line 1: expected header {','.join(CSV_COLUMNS)}, or Kafka's export "
            f"({' or '.join(_KAFKA_FORMS.values())})"
        )
    if group is not None and width != 3:
        raise UsageError(f"{name}: names its groups; --group is for Kafka's topic,partition,offset")
    rows: list[CsvOffset] = []
    seen: dict[tuple[str, str, int], int] = {}
    for values in lines:
        line = reader.line_num
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != width:
            raise UsageError(f"{name}: line {line}: expected {width} columns")
        if width == 3:
            values = [group or "", *values, "", ""]
        elif width == 4:
            values = [*values, "", ""]
        row_group, topic, partition, offset, epoch, metadata = values
        if not topic:
            raise UsageError(f"{name}: line {line}: topic must not be empty")
        check_topic(topic, f"{name}: line {line}: topic")
        try:
            p = int(partition)
            o = int(offset)
            e = int(epoch) if epoch.strip() else -1
        except ValueError:
            raise UsageError(
                f"{name}: line {line}: partition, offset and leader_epoch must be integers"
            ) from None
        if p < 0 or o < 0:
            raise UsageError(f"{name}: line {line}: partition and offset must be >= 0")
        key = (row_group, topic, p)
        if key in seen:
            raise UsageError(
                f"{name}: line {line}: {row_group} {topic}-{p} already given on line {seen[key]}"
            )
        seen[key] = line
        rows.append(CsvOffset(row_group, topic, p, o, e, metadata))
    return rows


def read_csv_file(path: str, group: str | None = None) -> list[CsvOffset]:
    """:func:`read_csv` of the file at ``path`` (``-``: stdin); UsageError when unreadable."""
    try:
        if path == "-":
            return read_csv(sys.stdin, "stdin", group)
        with open(path, newline="", encoding="utf-8") as handle:
            return read_csv(handle, path, group)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def cmd_export(ctx: Context) -> int:
    """``export``: the groups' committed offsets as CSV on stdout or in ``--file``; with
    ``--tenant``, what OffsetFetch answers its principal (a hidden group: exit 1)."""
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
    """Commit each group's rows in one request; returns the refused groups (perhaps partly
    committed: Kafka applies a commit's valid partitions)."""
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
    group by group (exit 1 when a group was refused)."""
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
                        **attributes(r, CSV_COLUMNS[:3]),
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
