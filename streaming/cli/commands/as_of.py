"""``describe --as-of TIME``: a group's committed offsets as of a past time, from the sink's
thinned commit history (``connectors.client.as_of``)."""

from __future__ import annotations

from typing import Any, Final

from connectors.client.as_of import CommittedAsOf
from streaming.cli.commands.reset import parse_time
from streaming.cli.context import Context
from streaming.cli.errors import EXIT_FAILURE, EXIT_OK, UsageError
from streaming.cli.output import format_timestamp, short_metadata

#: JSON keys of each partition of ``describe --as-of``.
AS_OF_KEYS: Final = (
    "topic",
    "partition",
    "offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
    "exact",
    "exact_as_of_ms",
)
AS_OF_HEADERS: Final = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "OFFSET",
    "COMMITTED-AT",
    "EXACT-AS-OF",
    "METADATA",
)


def visible_as_of(ctx: Context, group: str, at_ms: int) -> list[CommittedAsOf]:
    """The group's offsets as of ``at_ms``, less the topics ``--tenant`` may not see."""
    found = ctx.reader.committed_as_of(group, at_ms)
    viewer = ctx.viewer
    return found if viewer is None else [a for a in found if viewer.may_see_topic(a.topic)]


def exactness(answer: CommittedAsOf) -> str:
    """How exact an answer is, as the table shows it."""
    if answer.exact:
        return "exact"
    return f"as of {format_timestamp(answer.exact_as_of_ms)}"


def cmd_describe_as_of(ctx: Context) -> int:
    """``describe --group G --as-of TIME``: each partition's commit in force at TIME (the
    group's last at or before it the history keeps), its commit time and how exact it is;
    partitions committed now but not then are listed without an offset. A group hidden from
    ``--tenant``, or with nothing committed at or before TIME, is exit 1."""
    args = ctx.args
    if getattr(args, "all_groups", False):
        raise UsageError("--as-of takes --group (not --all-groups)")
    if args.starting_offsets or args.require_stable:
        raise UsageError("--as-of does not go with --starting-offsets or --require-stable")
    at_ms = parse_time(args.as_of, "--as-of")
    asked = ctx.groups()
    shown = ctx.refuse_hidden_groups(asked)
    documents: list[dict[str, Any]] = []
    rows: list[tuple[object, ...]] = []
    empty = []
    for group in shown:
        answers = visible_as_of(ctx, group, at_ms)
        then = {a.topic_partition for a in answers}
        now = [o.topic_partition for o in ctx.reader.fetch(group)]
        if ctx.viewer is not None:
            now = [tp for tp in now if ctx.viewer.may_see_topic(tp.topic)]
        later = sorted(tp for tp in now if tp not in then)
        if not answers:
            empty.append(group)
        documents.append(
            {
                "group": group,
                "as_of_ms": at_ms,
                "partitions": [{k: getattr(a, k) for k in AS_OF_KEYS} for a in answers],
                "no_commit_then": [{"topic": t, "partition": p} for t, p in later],
            }
        )
        rows += [
            (
                group,
                a.topic,
                a.partition,
                a.offset,
                format_timestamp(a.commit_timestamp_ms),
                exactness(a),
                short_metadata(a.metadata),
            )
            for a in answers
        ]
        rows += [(group, t, p, None, None, "no commit then", None) for t, p in later]
    if ctx.json:
        ctx.emit_json(documents)
    else:
        ctx.err(f"committed offsets as of {format_timestamp(at_ms)}")
        if rows:
            ctx.table(AS_OF_HEADERS, rows)
    for group in empty:
        ctx.err(
            f"error: group {group!r} has no commit at or before {format_timestamp(at_ms)} in the"
            " history (kept 7 days by default; not at all with --no-history)"
        )
    return EXIT_FAILURE if empty or len(shown) < len(asked) else EXIT_OK
