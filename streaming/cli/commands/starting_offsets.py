"""``describe --group G --starting-offsets [--topic T ...]``: the group's committed offsets as
the ``startingOffsets`` JSON of a Spark Kafka query (``OffsetsReader.spark_starting_offsets``).

It first waits (up to ``--timeout``) until the job has applied every commit the group sent
(``connectors.client.sink_currency``), and fails rather than print offsets the sink may not have
caught up with. A mirror's sink is printed as it is, with a note: its progress says nothing
about the job's ingest topic.
"""

from __future__ import annotations

import json

from connectors.client import wait_until_applied
from streaming.cli.context import Context
from streaming.cli.errors import EXIT_OK, UsageError


def cmd_starting_offsets(ctx: Context) -> int:
    """Print the one ``--group``'s ``startingOffsets`` (compact JSON on one line, or the JSON
    document with ``--json``); partitions without a committed offset start at the earliest."""
    groups = list(dict.fromkeys(ctx.args.group or []))
    if getattr(ctx.args, "all_groups", False) or len(groups) != 1:
        raise UsageError("--starting-offsets takes exactly one --group")
    group = groups[0]
    reader = ctx.reader
    if reader.sink.source_cluster() is not None:
        ctx.err("note: a mirror's sink: showing the offsets it last copied")
    else:
        wait_until_applied(
            reader,
            group,
            ingest_topic=ctx.config.ingest_topic,
            tenant_topics=[t.ingest_topic for t in ctx.config.tenants],
            timeout_s=ctx.timeout_s,
        )
    topics = ctx.args.topic or None
    try:
        text = reader.spark_starting_offsets(group, topics)
    except ValueError as exc:  # a group without committed offsets and no --topic
        raise UsageError(str(exc).replace("give topics", "give --topic")) from None
    if ctx.json:
        ctx.emit_json(json.loads(text))
    else:
        ctx.out(text)
    return EXIT_OK
