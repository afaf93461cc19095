"""Starting a Spark Kafka query from its consumer group's committed offsets (after a lost
checkpoint, a new query version, a consumer handing its group over, ``reset-offsets``). Spark
takes ``startingOffsets`` only on a new checkpoint and silently ignores it after;
:func:`start_from_group` follows that rule openly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from connectors.client.errors import OffsetsError
from connectors.client.offsets_reader import OffsetsReader
from connectors.client.sink_currency import AppliedPosition, SinkNotCurrentError, wait_until_applied
from connectors.client.starting_offsets import missing_marker
from connectors.kafka.admin import DEFAULT_INGEST_TOPIC
from state.coordinator.errors import ErrorCode

log = logging.getLogger(__name__)

#: Seconds between two OffsetFetches answered UNSTABLE_OFFSET_COMMIT: the Java consumer's
#: ``retry.backoff.ms`` (100).
UNSTABLE_RETRY_S: Final = 0.1

#: Source options choosing the start or the partitions (lower case, as Spark compares them): the
#: helper sets them.
POSITION_OPTIONS: Final = frozenset(
    {
        "startingoffsets",
        "startingoffsetsbytimestamp",
        "startingtimestamp",
        "startingoffsetsbytimestampstrategy",
        "subscribe",
        "subscribepattern",
        "assign",
    }
)


class CheckpointExistsError(ValueError):
    """``start="group"`` over a checkpoint that exists: Spark would resume from the checkpoint
    and ignore the group's offsets."""


@dataclass(frozen=True, slots=True)
class ResumedQuery:
    """A started query and where it started: ``"group"`` (then ``starting_offsets`` is the JSON
    Spark was given and ``applied`` what the sink was checked against) or ``"checkpoint"``."""

    query: StreamingQuery
    started_from: Literal["group", "checkpoint"]
    starting_offsets: str | None = None
    applied: AppliedPosition | None = None


def checkpoint_is_new(spark: SparkSession, location: str) -> bool:
    """Whether a query started at ``location`` would take ``startingOffsets``: no file named by
    a batch number under ``offsets/`` or ``sources/`` (Spark makes the directories before the
    first batch, and a crash leaves temporary files). Any Hadoop file system; a JVM session."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    conf = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    for part in ("offsets", "sources"):
        path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/" + part)
        fs = path.getFileSystem(conf)
        if not fs.exists(path):
            continue
        files = fs.listFiles(path, True)
        while files.hasNext():
            if files.next().getPath().getName().isdigit():
                return False
    return True


def start_from_group(
    spark: SparkSession,
    write: Callable[[DataFrame], DataStreamWriter],
    *,
    reader: OffsetsReader,
    group_id: str,
    topics: Sequence[str],
    checkpoint_location: str,
    source_options: Mapping[str, str] | None = None,
    ingest_topic: str = DEFAULT_INGEST_TOPIC,
    tenant_topics: Sequence[str] = (),
    missing: str = "earliest",
    unknown_group: str = "error",
    start: Literal["auto", "group"] = "auto",
    wait_timeout_s: float = 60.0,
    ingest_client_options: Mapping[str, Any] | None = None,
) -> ResumedQuery:
    """Start a Kafka query over ``topics`` at ``checkpoint_location``: from ``group_id``'s
    committed offsets when the checkpoint is new (after waiting up to ``wait_timeout_s`` until
    the sink holds the group's last commits, ``wait_until_applied``, and its transactional
    offsets are stable, :func:`stable_starting_offsets`), else from the checkpoint
    (``start="group"`` refuses: :class:`CheckpointExistsError`).

    ``write(frame)`` turns the source's DataFrame into its writer; ``checkpointLocation`` is set
    last. ``source_options`` may not choose a start or subscription (ValueError); ``missing``
    and ``unknown_group`` are ``OffsetsReader.spark_starting_offsets``'. Open transactions are
    looked for on the reader's cluster (``ingest_client_options`` serves the wait alone).
    """
    if isinstance(topics, str):
        raise TypeError(f"topics must be a list of topic names, not the string {topics!r}")
    if not topics:
        raise ValueError("topics must name at least one topic (the query's subscription)")
    missing_marker(missing)
    if start not in ("auto", "group"):
        raise ValueError(f"start must be 'auto' or 'group', got {start!r}")
    options = dict(source_options or {})
    refused = sorted(k for k in options if k.lower() in POSITION_OPTIONS)
    if refused:
        raise ValueError(
            f"source_options must not set {', '.join(refused)}: the query subscribes to "
            "`topics` and starts from the group's offsets when its checkpoint is new; once the "
            "checkpoint exists Spark ignores startingOffsets and resumes from the checkpoint"
        )

    new = checkpoint_is_new(spark, checkpoint_location)
    if not new and start == "group":
        raise CheckpointExistsError(
            f"checkpoint {checkpoint_location} exists: Spark resumes from it and ignores "
            f"startingOffsets, so the query cannot start from group {group_id!r}'s offsets; "
            "delete the checkpoint or give a new location (start='auto' resumes from it)"
        )
    source = spark.readStream.format("kafka")
    for key, value in options.items():
        source = source.option(key, value)
    source = source.option("subscribe", ",".join(topics))
    applied = starting = None
    if new:
        deadline = time.monotonic() + wait_timeout_s
        applied = wait_until_applied(
            reader,
            group_id,
            ingest_topic=ingest_topic,
            tenant_topics=tenant_topics,
            timeout_s=wait_timeout_s,
            client_options=ingest_client_options,
        )
        starting = stable_starting_offsets(
            reader,
            group_id,
            list(topics),
            missing,
            unknown_group=unknown_group,
            ingest_topic=ingest_topic,
            tenant_topics=tenant_topics,
            timeout_s=max(0.0, deadline - time.monotonic()),
        )
        source = source.option("startingOffsets", starting)
        log.info(
            "starting the query at %s from group %r's offsets: %s",
            checkpoint_location,
            group_id,
            starting,
        )
    else:
        log.info(
            "resuming the query from its checkpoint %s (group %r not read: Spark ignores "
            "startingOffsets once a checkpoint exists)",
            checkpoint_location,
            group_id,
        )
    writer = write(source.load()).option("checkpointLocation", checkpoint_location)
    query = writer.start()
    return ResumedQuery(query, "group" if new else "checkpoint", starting, applied)


def stable_starting_offsets(
    reader: OffsetsReader,
    group_id: str,
    topics: Sequence[str],
    missing: str = "earliest",
    *,
    unknown_group: str = "error",
    ingest_topic: str = DEFAULT_INGEST_TOPIC,
    tenant_topics: Sequence[str] = (),
    timeout_s: float = 60.0,
) -> str:
    """``reader.spark_starting_offsets`` with RequireStable, asked again every
    :data:`UNSTABLE_RETRY_S` while it answers UNSTABLE_OFFSET_COMMIT (88), as Kafka's consumer
    does; :class:`SinkNotCurrentError` REQUEST_TIMED_OUT (7) when still 88 after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return reader.spark_starting_offsets(
                group_id,
                topics,
                missing,
                unknown_group=unknown_group,
                require_stable=True,
                ingest_topic=ingest_topic,
                tenant_topics=tenant_topics,
            )
        except OffsetsError as exc:
            if exc.error_code != ErrorCode.UNSTABLE_OFFSET_COMMIT:
                raise
            if time.monotonic() >= deadline:
                raise SinkNotCurrentError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"after {timeout_s:g} s the committed offsets of group {group_id!r} are "
                    f"still not stable ({exc.message})",
                ) from exc
        time.sleep(UNSTABLE_RETRY_S)
