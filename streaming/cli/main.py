"""``consumer-offsets``: the offset manager's command line, like ``kafka-consumer-groups.sh``.

Commands (``consumer-offsets <command> --help`` for each)::

    list                                       groups with committed offsets or metadata
    describe --group G | --all-groups          committed offset, log-end offset and lag
    commit --group G --topic T --partition P --offset O [--metadata M]
    reset-offsets --group G (--all-topics | --topic T[:P,P]) (--to-earliest | --to-latest |
                  --to-current | --to-offset N | --shift-by N | --to-datetime ISO8601) [--execute]
    delete-offsets --group G --topic T[:P,P]   OffsetDelete
    delete --group G                           DeleteGroups
    export (--group G | --all-groups) [--file F.csv]
    import --file F.csv [--execute]
    history --group G [--topic T [--partition P]] [--limit N]
    status                                     the job's coordinator status
    run ...                                    the streaming job (python -m streaming)
    kafka ...                                  the local broker (connectors.kafka_local)

Every command but ``run`` and ``kafka`` takes ``--bootstrap-server``, ``--sink-url``,
``--config`` (TOML), ``--timeout`` (ms) and ``--json``; unset values come from the
``CONSUMER_OFFSETS_*`` environment variables and the config file (``streaming.config``).
Commits, resets, imports and deletes go through the job (``connectors.client.commit_client``), so
Kafka's rules hold: a group with members refuses admin commits (UNKNOWN_MEMBER_ID, 25) and deletion
(NON_EMPTY_GROUP, 68). ``reset-offsets`` and ``import`` only show what they would do unless
given ``--execute``.

Output: aligned plain-text tables for people; with ``--json`` one JSON document on stdout for
programs (errors too: ``{"error": {"code": .., "name": .., "message": ..}}``). Messages and
warnings go to stderr; a progress line appears there for long work when it is a terminal.
Exit status: 0 success, 1 the operation failed (the Kafka error name and code are printed, e.g.
``OFFSET_METADATA_TOO_LARGE (12)``), 2 usage errors (bad arguments, config or input file).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import IO, Any, Final, Literal, TextIO

from connectors.client.commit_client import OffsetCommitClient
from connectors.client.errors import (
    CommitFailedError,
    DeleteGroupFailedError,
    OffsetDeleteFailedError,
    OffsetsError,
    OffsetsRequestError,
    describe_error,
)
from connectors.client.offsets_reader import OffsetsReader
from connectors.sinks.base import SinkError, redact_url
from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetAndMetadata, TopicPartition
from streaming.config import JobConfig, load_config

PROG: Final = "consumer-offsets"
#: Default wait for the job's answer, in ms (Kafka's admin ``request.timeout.ms``).
DEFAULT_TIMEOUT_MS: Final = 30_000
#: Columns of ``export`` and ``import`` files, in order.
CSV_COLUMNS: Final = ("group", "topic", "partition", "offset", "leader_epoch", "metadata")
# Longest metadata shown in a table cell; --json shows all of it.
_METADATA_CELL: Final = 40

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2


class UsageError(Exception):
    """Bad arguments, configuration or input file: exit status 2."""


class CommandFailed(Exception):
    """The operation failed and its details were already printed: exit status 1."""


# --- formatting -------------------------------------------------------------------------------


def _cell(value: object) -> str:
    if value is None:
        return "-"
    text = str(value)
    # One row per line: control characters in metadata must not break the table.
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Rows as plain left-aligned columns separated by two spaces, headers first (like
    ``kafka-consumer-groups.sh``). None shows as ``-``; no trailing spaces."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, expected {len(headers)}")
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(headers), *cells]
    ]
    return "\n".join(lines)


def short_metadata(metadata: str, limit: int = _METADATA_CELL) -> str:
    """Commit metadata cut for a table cell (``...`` marks the cut)."""
    return metadata if len(metadata) <= limit else metadata[: limit - 3] + "..."


def format_timestamp(ms: int | None) -> str | None:
    """Epoch ms as ISO 8601 UTC with milliseconds; None for unknown (-1 or None)."""
    if ms is None or ms < 0:
        return None
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


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


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """``--topic T`` (all partitions: ``partitions`` None) or ``--topic T:0,2``."""

    topic: str
    partitions: tuple[int, ...] | None = None


def parse_topic_spec(text: str) -> TopicSpec:
    """Parse ``T`` or ``T:P,P``. Kafka topic names cannot contain ``:``."""
    topic, sep, rest = text.partition(":")
    if not topic:
        raise UsageError(f"--topic {text!r}: missing topic name")
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


class Progress:
    """``label: done/total`` rewritten in place on ``stream``, only when it is a terminal."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty()) and total > 0
        self._width = 0

    def update(self, done: int) -> None:
        if self.enabled:
            text = f"\r{self.label}: {done}/{self.total}"
            self._width = max(self._width, len(text))
            self.stream.write(text)
            self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


# --- reset computation ------------------------------------------------------------------------

ResetKind = Literal["earliest", "latest", "current", "offset", "shift", "datetime"]


@dataclass(frozen=True, slots=True)
class ResetTarget:
    """Where ``reset-offsets`` moves each partition. ``value`` is N for ``offset``/``shift``
    and epoch ms for ``datetime``."""

    kind: ResetKind
    value: int = 0


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
    ``[earliest, latest]`` with a note, as Kafka's range check does; ``shift`` and ``current``
    need a committed offset.
    """
    rows = []
    for tp in partitions:
        now = current.get(tp, -1)
        if now is None:
            now = -1
        row = ResetRow(tp.topic, tp.partition, now, None)
        if tp not in earliest or tp not in latest:
            rows.append(_with(row, error=f"{describe_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}"))
            continue
        low, high = earliest[tp], latest[tp]
        requested: int
        if target.kind == "earliest":
            rows.append(_with(row, new_offset=low))
            continue
        if target.kind == "latest":
            rows.append(_with(row, new_offset=high))
            continue
        if target.kind == "datetime":
            found = (by_time or {}).get(tp)
            rows.append(_with(row, new_offset=high if found is None else found))
            continue
        if target.kind == "current":
            if now < 0:
                rows.append(_with(row, error="no committed offset to keep"))
            else:
                rows.append(_with(row, new_offset=now))
            continue
        if target.kind == "offset":
            requested = target.value
        elif target.kind == "shift":
            if now < 0:
                rows.append(_with(row, error="no committed offset to shift"))
                continue
            requested = now + target.value
        else:  # pragma: no cover - argparse only produces the kinds above
            raise ValueError(f"unknown reset kind {target.kind!r}")
        if requested > high:
            note = f"{requested} is after the log end offset {high}: using {high}"
            rows.append(_with(row, new_offset=high, note=note))
        elif requested < low:
            note = f"{requested} is before the log start offset {low}: using {low}"
            rows.append(_with(row, new_offset=low, note=note))
        else:
            rows.append(_with(row, new_offset=requested))
    return rows


def _with(row: ResetRow, **changes: Any) -> ResetRow:
    return replace(row, **changes)


# --- CSV --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CsvOffset:
    """One line of an export/import file."""

    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


def write_csv(rows: Iterable[CsvOffset], out: IO[str]) -> int:
    """Write the header and ``rows``; returns the number of rows."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    n = 0
    for r in rows:
        writer.writerow([r.group, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata])
        n += 1
    return n


def read_csv(source: IO[str], name: str = "input") -> list[CsvOffset]:
    """Parse an export file: the header must be :data:`CSV_COLUMNS` (``leader_epoch`` and
    ``metadata`` may be empty). Raises :class:`UsageError` naming the line at fault, including
    for a partition listed twice for one group (which offset wins would be a guess)."""
    reader = csv.reader(source)
    header = next(reader, None)
    if header is None:
        raise UsageError(f"{name}: empty file (expected a header {','.join(CSV_COLUMNS)})")
    if tuple(h.strip() for h in header) != CSV_COLUMNS:
        raise UsageError(f"{name}: line 1: expected header {','.join(CSV_COLUMNS)}")
    rows: list[CsvOffset] = []
    seen: dict[tuple[str, str, int], int] = {}
    for values in reader:
        line = reader.line_num
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != len(CSV_COLUMNS):
            raise UsageError(f"{name}: line {line}: expected {len(CSV_COLUMNS)} columns")
        group, topic, partition, offset, epoch, metadata = values
        if not group or not topic:
            raise UsageError(f"{name}: line {line}: group and topic must not be empty")
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
        key = (group, topic, p)
        if key in seen:
            raise UsageError(
                f"{name}: line {line}: {group} {topic}-{p} already given on line {seen[key]}"
            )
        seen[key] = line
        rows.append(CsvOffset(group, topic, p, o, e, metadata))
    return rows


# --- the command context ----------------------------------------------------------------------


class Context:
    """Configuration, output and lazily opened clients for one command."""

    def __init__(self, args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> None:
        self.args = args
        self.stdout = stdout
        self.stderr = stderr
        self.json: bool = bool(getattr(args, "json", False))
        timeout_ms = getattr(args, "timeout", None) or DEFAULT_TIMEOUT_MS
        if timeout_ms <= 0:
            raise UsageError(f"--timeout must be > 0 ms, got {timeout_ms}")
        self.timeout_s = timeout_ms / 1000
        try:
            self.config: JobConfig = load_config(
                getattr(args, "config", None),
                overrides={
                    "bootstrap_servers": getattr(args, "bootstrap_server", None),
                    "sink_url": getattr(args, "sink_url", None),
                },
            )
        except (OSError, ValueError) as exc:
            raise UsageError(f"configuration: {exc}") from None
        self._reader: OffsetsReader | None = None
        self._client: OffsetCommitClient | None = None

    @property
    def reader(self) -> OffsetsReader:
        if self._reader is None:
            self._reader = OffsetsReader(self.config.sink_url, self.config.kafka_python_options())
        return self._reader

    @property
    def client(self) -> OffsetCommitClient:
        if self._client is None:
            self._client = OffsetCommitClient(
                self.config, client_id="consumer-offsets-cli", default_timeout_s=self.timeout_s
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close(timeout_s=0)
        if self._reader is not None:
            self._reader.close()

    def out(self, text: str) -> None:
        self.stdout.write(text + "\n")

    def err(self, text: str) -> None:
        self.stderr.write(text + "\n")

    def emit_json(self, data: object) -> None:
        self.out(json.dumps(data, indent=2, ensure_ascii=False))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        self.out(format_table(headers, rows))

    def check_status_note(self) -> None:
        """Warn (stderr) when answers come from a stopped job's last state."""
        status = self.reader.status()
        if status.status == "STOPPED":
            self.err(f"note: the offsets job is STOPPED; showing its last state ({status.detail})")


def _error_json(exc: OffsetsError) -> dict[str, Any]:
    data: dict[str, Any] = {
        "code": int(exc.error_code),
        "name": describe_error(exc.error_code).split(" ")[0],
        "message": exc.message or str(exc),
    }
    if isinstance(exc, OffsetsRequestError):
        data["partitions"] = [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "error_code": int(code),
                "error": None if code == 0 else describe_error(code),
            }
            for tp, code in sorted(exc.partitions.items())
        ]
    return data


# --- commands ---------------------------------------------------------------------------------


def cmd_list(ctx: Context) -> int:
    groups = ctx.reader.list_groups()
    if ctx.json:
        ctx.emit_json(
            [
                {
                    "group": g.group_id,
                    "partitions": g.partitions,
                    "generation": g.generation,
                    "members": g.members,
                }
                for g in groups
            ]
        )
        return EXIT_OK
    ctx.check_status_note()
    ctx.table(
        ("GROUP", "PARTITIONS", "GENERATION", "MEMBERS"),
        [(g.group_id, g.partitions, g.generation, g.members) for g in groups],
    )
    return EXIT_OK


def _groups(ctx: Context) -> list[str]:
    if getattr(ctx.args, "all_groups", False):
        return [g.group_id for g in ctx.reader.list_groups()]
    return list(dict.fromkeys(ctx.args.group or []))


def cmd_describe(ctx: Context) -> int:
    descriptions = [ctx.reader.describe(g) for g in _groups(ctx)]
    missing = [d.group_id for d in descriptions if not d.exists]
    if ctx.json:
        ctx.emit_json(
            [
                {
                    "group": d.group_id,
                    "exists": d.exists,
                    "generation": d.generation,
                    "members": d.members,
                    "total_lag": d.total_lag,
                    "partitions": [
                        {
                            "topic": p.topic,
                            "partition": p.partition,
                            "committed_offset": p.committed_offset,
                            "log_end_offset": p.log_end_offset,
                            "lag": p.lag,
                            "leader_epoch": p.leader_epoch,
                            "metadata": p.metadata,
                            "commit_timestamp_ms": p.commit_timestamp_ms,
                            "expire_timestamp_ms": p.expire_timestamp_ms,
                        }
                        for p in d.partitions
                    ],
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
                p.committed_offset,
                p.log_end_offset,
                p.lag,
                format_timestamp(p.commit_timestamp_ms),
                short_metadata(p.metadata),
            )
            for d in shown
            for p in d.partitions
        ]
        if rows:
            ctx.table(
                (
                    "GROUP",
                    "TOPIC",
                    "PARTITION",
                    "CURRENT-OFFSET",
                    "LOG-END-OFFSET",
                    "LAG",
                    "COMMITTED-AT",
                    "METADATA",
                ),
                rows,
            )
    for group in missing:
        ctx.err(
            f"error: {describe_error(ErrorCode.GROUP_ID_NOT_FOUND)}: group {group!r} does not exist"
        )
    return EXIT_FAILURE if missing else EXIT_OK


def cmd_commit(ctx: Context) -> int:
    args = ctx.args
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


def _reset_target(args: argparse.Namespace) -> ResetTarget:
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


def _scope_partitions(
    ctx: Context, specs: Sequence[TopicSpec], committed: Sequence[TopicPartition]
) -> list[TopicPartition]:
    """The partitions a ``--topic`` list names: listed ones, else all the broker has (else the
    group's committed ones, for a topic the broker no longer knows)."""
    result: list[TopicPartition] = []
    for spec in specs:
        if spec.partitions is not None:
            result.extend(TopicPartition(spec.topic, p) for p in spec.partitions)
            continue
        on_broker = ctx.reader.broker.partitions_for(spec.topic)
        if on_broker:
            result.extend(TopicPartition(spec.topic, p) for p in on_broker)
        else:
            known = [tp for tp in committed if tp.topic == spec.topic]
            if not known:
                raise OffsetsError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {spec.topic!r} is unknown to the broker and to the group",
                )
            result.extend(known)
    return list(dict.fromkeys(result))


def cmd_reset_offsets(ctx: Context) -> int:
    args = ctx.args
    target = _reset_target(args)
    group = args.group
    specs = [parse_topic_spec(t) for t in args.topic or []]
    committed = {o.topic_partition: o.offset for o in ctx.reader.fetch(group)}
    if args.all_topics:
        partitions = sorted(committed)
        if not partitions:
            raise OffsetsError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"group {group!r} has no committed offsets: name the topics with --topic",
            )
    else:
        partitions = _scope_partitions(ctx, specs, list(committed))
    progress = Progress("resolving offsets", 3, ctx.stderr)
    broker = ctx.reader.broker
    earliest = broker.beginning_offsets(partitions)
    progress.update(1)
    latest = broker.end_offsets(partitions)
    progress.update(2)
    by_time = (
        broker.offsets_for_time(partitions, target.value) if target.kind == "datetime" else None
    )
    progress.update(3)
    progress.finish()
    plan = plan_reset(target, partitions, committed, earliest, latest, by_time)
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
        offsets = {TopicPartition(r.topic, r.partition): r.new_offset for r in plan}
        spinner = Progress(f"committing {len(offsets)} partition(s)", len(offsets), ctx.stderr)
        spinner.update(0)
        try:
            ctx.client.commit(group, offsets, timeout_s=ctx.timeout_s)  # type: ignore[arg-type]
            executed = True
        except CommitFailedError as exc:
            failure = exc
        finally:
            spinner.finish()
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
            data["error"] = _error_json(failure)
        ctx.emit_json(data)
    else:
        headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
        rows: list[list[object]] = [
            [group, r.topic, r.partition, r.current_offset, r.new_offset] for r in plan
        ]
        if errors or failure is not None:
            headers.append("ERROR")
            for row, r in zip(rows, plan, strict=True):
                row.append(row_error(r))
        ctx.table(headers, rows)
    if errors:
        ctx.err(f"error: {len(errors)} partition(s) cannot be reset; nothing was committed")
        raise CommandFailed
    if failure is not None:
        hint = ""
        if failure.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            hint = f" (offsets can only be reset while group {group!r} is inactive)"
        ctx.err(f"error: {failure}{hint}")
        raise CommandFailed
    if not args.execute:
        ctx.err("dry run: nothing was committed (add --execute to commit these offsets)")
    return EXIT_OK


def cmd_delete_offsets(ctx: Context) -> int:
    group = ctx.args.group
    specs = [parse_topic_spec(t) for t in ctx.args.topic]
    committed = [o.topic_partition for o in ctx.reader.fetch(group)]
    partitions: list[TopicPartition] = []
    for spec in specs:
        if spec.partitions is not None:
            partitions.extend(TopicPartition(spec.topic, p) for p in spec.partitions)
        else:
            # Kafka deletes the topic's partitions; those the group committed are what matter.
            mine = [tp for tp in committed if tp.topic == spec.topic]
            partitions.extend(mine or _scope_partitions(ctx, [spec], committed))
    partitions = list(dict.fromkeys(partitions))
    failure: OffsetDeleteFailedError | None = None
    try:
        ctx.client.delete_offsets(group, partitions, timeout_s=ctx.timeout_s)
    except OffsetDeleteFailedError as exc:
        failure = exc
    group_level = failure is not None and not failure.failed_partitions
    if group_level:
        assert failure is not None
        if ctx.json:
            ctx.emit_json({"group": group, "error": _error_json(failure)})
        ctx.err(f"error: {failure}")
        raise CommandFailed
    codes = failure.partitions if failure is not None else {}
    statuses = [(tp, int(codes.get(tp, 0))) for tp in partitions]
    if ctx.json:
        ctx.emit_json(
            {
                "group": group,
                "partitions": [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "error_code": code,
                        "error": describe_error(code) if code else None,
                    }
                    for tp, code in statuses
                ],
            }
        )
    else:
        ctx.table(
            ("TOPIC", "PARTITION", "STATUS"),
            [
                (tp.topic, tp.partition, "Successful" if not code else describe_error(code))
                for tp, code in statuses
            ],
        )
    if failure is not None:
        ctx.err(f"error: {failure}")
        raise CommandFailed
    return EXIT_OK


def cmd_delete(ctx: Context) -> int:
    results: dict[str, DeleteGroupFailedError | None] = {}
    for group in dict.fromkeys(ctx.args.group):
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
                    {
                        "group": g,
                        "deleted": e is None,
                        "error": None if e is None else _error_json(e),
                    }
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


def cmd_export(ctx: Context) -> int:
    groups = _groups(ctx)
    rows = [
        CsvOffset(g, o.topic, o.partition, o.offset, o.leader_epoch, o.metadata)
        for g in groups
        for o in ctx.reader.fetch(g)
    ]
    path = ctx.args.file
    if path is None:
        if ctx.json:
            ctx.emit_json([{c: getattr(r, c) for c in CSV_COLUMNS} for r in rows])
        else:
            write_csv(rows, ctx.stdout)
        return EXIT_OK
    with open(path, "w", newline="", encoding="utf-8") as handle:
        count = write_csv(rows, handle)
    if ctx.json:
        ctx.emit_json({"file": path, "groups": len(groups), "offsets": count})
    else:
        ctx.err(f"exported {count} offset(s) of {len(groups)} group(s) to {path}")
    return EXIT_OK


def cmd_import(ctx: Context) -> int:
    path = ctx.args.file
    try:
        if path == "-":
            rows = read_csv(sys.stdin, "stdin")
        else:
            with open(path, newline="", encoding="utf-8") as handle:
                rows = read_csv(handle, path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    by_group: dict[str, list[CsvOffset]] = {}
    for r in rows:
        by_group.setdefault(r.group, []).append(r)
    current: dict[tuple[str, str, int], int] = {}
    for group, group_rows in by_group.items():
        asked = [TopicPartition(r.topic, r.partition) for r in group_rows]
        for o in ctx.reader.fetch(group, asked):
            current[(group, o.topic, o.partition)] = o.offset
    failures: dict[str, CommitFailedError] = {}
    if ctx.args.execute:
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

    def status(r: CsvOffset) -> str | None:
        exc = failures.get(r.group)
        if exc is None:
            return None
        code = exc.partitions.get(TopicPartition(r.topic, r.partition), exc.error_code)
        return describe_error(code) if code else "not applied"

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
                        "current_offset": current.get((r.group, r.topic, r.partition), -1),
                        "new_offset": r.offset,
                        "error": status(r),
                    }
                    for r in rows
                ],
            }
        )
    else:
        headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
        table: list[list[object]] = [
            [
                r.group,
                r.topic,
                r.partition,
                current.get((r.group, r.topic, r.partition), -1),
                r.offset,
            ]
            for r in rows
        ]
        if failures:
            headers.append("ERROR")
            for row, r in zip(table, rows, strict=True):
                row.append(status(r))
        ctx.table(headers, table)
    for group, exc in failures.items():
        ctx.err(f"error: group {group!r}: {exc}")
    if failures:
        raise CommandFailed
    if not ctx.args.execute:
        ctx.err("dry run: nothing was committed (add --execute to commit these offsets)")
    elif not ctx.json:
        ctx.err(f"imported {len(rows)} offset(s) of {len(by_group)} group(s)")
    return EXIT_OK


def cmd_history(ctx: Context) -> int:
    args = ctx.args
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition requires --topic")
    if args.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {args.limit}")
    entries = ctx.reader.history(args.group, args.topic, args.partition, args.limit)
    if ctx.json:
        ctx.emit_json(
            [
                {
                    "group": e.group_id,
                    "topic": e.topic,
                    "partition": e.partition,
                    "offset": e.offset,
                    "leader_epoch": e.leader_epoch,
                    "metadata": e.metadata,
                    "commit_timestamp_ms": e.commit_timestamp_ms,
                    "batch_id": e.batch_id,
                }
                for e in entries
            ]
        )
        return EXIT_OK
    ctx.table(
        ("GROUP", "TOPIC", "PARTITION", "OFFSET", "COMMITTED-AT", "BATCH", "METADATA"),
        [
            (
                e.group_id,
                e.topic,
                e.partition,
                e.offset,
                format_timestamp(e.commit_timestamp_ms),
                e.batch_id,
                short_metadata(e.metadata),
            )
            for e in entries
        ],
    )
    if not entries:
        ctx.err("no history (the job keeps it only with keep_history enabled)")
    return EXIT_OK


def cmd_status(ctx: Context) -> int:
    status = ctx.reader.status()
    progress = status.last_progress
    data: dict[str, Any] = {
        "status": status.status,
        "detail": status.detail,
        "last_batch_id": status.last_batch_id,
        "updated_at_ms": status.updated_at_ms,
        "skipped_records": status.skipped_records,
        "ingest_offsets": {str(p): o for p, o in sorted(status.ingest_offsets.items())},
        "last_progress": None
        if progress is None
        else {
            "batch_id": progress.batch_id,
            "input_rows": progress.input_rows,
            "commits_applied": progress.commits_applied,
            "rejected": progress.rejected,
            "tombstones": progress.tombstones,
            "state_keys": progress.state_keys,
            "duration_ms": progress.duration_ms,
            "timestamp_ms": progress.timestamp_ms,
        },
        "sink_url": redact_url(ctx.config.sink_url),
    }
    if ctx.json:
        ctx.emit_json(data)
        return EXIT_OK
    rows: list[tuple[str, object]] = [
        ("status", status.status),
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
    rows.append(("skipped records", status.skipped_records))
    ctx.table(("FIELD", "VALUE"), rows)
    return EXIT_OK


# --- parser -----------------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection and output")
    group.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        help="Kafka brokers (default: config file, CONSUMER_OFFSETS_BOOTSTRAP_SERVERS, "
        "KAFKA_BOOTSTRAP_SERVERS, 127.0.0.1:9092)",
    )
    group.add_argument(
        "--sink-url",
        metavar="URL",
        help="the job's sink, e.g. sqlite:///.runtime/consumer-offsets.db (default: config, "
        "CONSUMER_OFFSETS_SINK_URL)",
    )
    group.add_argument(
        "--config", metavar="FILE", help="JobConfig TOML file (default: CONSUMER_OFFSETS_CONFIG)"
    )
    group.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        default=DEFAULT_TIMEOUT_MS,
        help=f"how long to wait for the job's answers (default {DEFAULT_TIMEOUT_MS})",
    )
    group.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def _group_choice(parser: argparse.ArgumentParser, what: str) -> None:
    choice = parser.add_mutually_exclusive_group(required=True)
    choice.add_argument("--group", action="append", metavar="G", help=f"{what} (repeatable)")
    choice.add_argument("--all-groups", action="store_true", help="every group in the sink")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Kafka consumer-group offsets, managed by the consumer-offsets streaming job.",
        epilog="Exit status: 0 success, 1 failure, 2 usage error.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(
        name: str, handler: Callable[[Context], int], help_: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(handler=handler)
        _common(p)
        return p

    command("list", cmd_list, "list the groups the sink knows")

    p = command("describe", cmd_describe, "committed offsets, log-end offsets and lag")
    _group_choice(p, "group to describe")

    p = command("commit", cmd_commit, "commit one offset (synchronously, through the job)")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--offset", type=int, required=True, help="the next offset to consume")
    p.add_argument("--metadata", default="", help="commit metadata (default empty)")
    p.add_argument("--leader-epoch", type=int, default=-1)

    p = command(
        "reset-offsets",
        cmd_reset_offsets,
        "move a group's offsets (dry run unless --execute)",
    )
    p.add_argument("--group", required=True)
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--all-topics", action="store_true", help="every topic the group committed")
    scope.add_argument(
        "--topic", action="append", metavar="T[:P,P]", help="a topic, or some partitions of it"
    )
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-current", action="store_true", help="the committed offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (kept in the log range)")
    to.add_argument("--shift-by", type=int, metavar="N", help="committed offset + N (may be < 0)")
    to.add_argument(
        "--to-datetime",
        metavar="ISO8601",
        help="first offset at or after this time, e.g. 2024-05-01T12:00:00Z (no zone: local)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show them (the default)")

    p = command("delete-offsets", cmd_delete_offsets, "delete some of a group's offsets")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", action="append", required=True, metavar="T[:P,P]")

    p = command("delete", cmd_delete, "delete empty groups and their offsets")
    p.add_argument("--group", action="append", required=True, metavar="G", help="(repeatable)")

    p = command("export", cmd_export, "write committed offsets as CSV")
    _group_choice(p, "group to export")
    p.add_argument("--file", metavar="F.csv", help="output file (default: stdout)")

    p = command("import", cmd_import, "commit offsets from a CSV export (dry run unless --execute)")
    p.add_argument("--file", required=True, metavar="F.csv", help="input file ('-': stdin)")
    p.add_argument("--execute", action="store_true", help="commit the offsets")

    p = command("history", cmd_history, "a group's applied commits, newest first")
    p.add_argument("--group", required=True)
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--limit", type=int, default=100)

    command("status", cmd_status, "the job's coordinator status")

    run = sub.add_parser(
        "run", help="run the streaming job", description="Run the offset manager's streaming job."
    )
    from streaming.__main__ import add_job_arguments

    add_job_arguments(run)
    run.set_defaults(handler=None, delegate="run")

    kafka = sub.add_parser(
        "kafka",
        help="start/stop the local Kafka broker",
        description="The local Kafka broker (python -m connectors.kafka.local).",
        add_help=False,
    )
    # main() hands everything after "kafka" to the launcher before this parser runs; the
    # sub-parser is here for the command list in --help.
    kafka.add_argument("kafka_args", nargs=argparse.REMAINDER)
    return parser


# --- entry point ------------------------------------------------------------------------------


def _delegate(args: argparse.Namespace) -> int:
    """``run``: the streaming job, exactly as ``python -m streaming`` runs it."""
    from streaming.__main__ import run

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return run(args)


def main(
    argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run one command; returns the exit status (see the module docstring)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["kafka"]:
        # Everything after "kafka" belongs to the launcher, options included.
        from connectors.kafka.local import main as kafka_main

        return kafka_main(argv[1:])
    parser = build_parser()
    try:
        # argparse prints help and usage errors itself: onto this call's streams.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 0 for --help, 2 for usage errors
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    if args.command is None:
        parser.print_usage(err)
        err.write(f"{PROG}: error: a command is required\n")
        return EXIT_USAGE
    if getattr(args, "delegate", None):
        return _delegate(args)
    # kafka-python logs every refused connection; the command reports what matters itself.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    ctx: Context | None = None
    json_mode = bool(getattr(args, "json", False))
    try:
        ctx = Context(args, out, err)
        return int(args.handler(ctx))
    except UsageError as exc:
        err.write(f"{PROG}: error: {exc}\n")
        return EXIT_USAGE
    except CommandFailed:
        return EXIT_FAILURE
    except OffsetsError as exc:
        if json_mode:
            out.write(json.dumps({"error": _error_json(exc)}, indent=2) + "\n")
        err.write(f"error: {exc}\n")
        return EXIT_FAILURE
    except SinkError as exc:
        _fail(out, err, json_mode, "SinkError", str(exc))
        return EXIT_FAILURE
    except Exception as exc:
        from kafka.errors import KafkaError

        if not isinstance(exc, KafkaError | OSError):
            raise
        name = type(exc).__name__
        where = "Kafka: " if isinstance(exc, KafkaError) else ""
        _fail(out, err, json_mode, name, f"{where}{name}: {exc}".rstrip(": "))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    finally:
        if ctx is not None:
            ctx.close()


def _fail(out: TextIO, err: TextIO, json_mode: bool, name: str, message: str) -> None:
    if json_mode:
        out.write(json.dumps({"error": {"code": None, "name": name, "message": message}}) + "\n")
    err.write(f"error: {message}\n")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. `consumer-offsets export | head`
        sys.stderr.close()
        sys.exit(EXIT_FAILURE)


__all__ = [
    "CSV_COLUMNS",
    "CsvOffset",
    "Progress",
    "ResetRow",
    "ResetTarget",
    "TopicSpec",
    "build_parser",
    "format_table",
    "format_timestamp",
    "main",
    "parse_datetime",
    "parse_topic_spec",
    "plan_reset",
    "read_csv",
    "write_csv",
]
