"""Reading the compacted offsets: OffsetFetch, listings, counters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa

from connectors.sinks.core import SinkCore
from connectors.sinks.text import original_column, original_row, original_text, stored_text
from connectors.sinks.values import NO_OFFSET, CommittedOffset, GroupListing
from state.coordinator.model import TopicPartition

#: :meth:`Reads.offset_columns`' columns.
OFFSET_COLUMNS_SCHEMA: Final = pa.schema(
    [
        ("group_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("commit_timestamp_ms", pa.int64()),
    ]
)
#: Rows of a big read held as Python objects at a time.
_READ_CHUNK: Final = 10_000


class Reads(SinkCore):
    """OffsetFetch and the listings the client, the CLI and ``serve`` read."""

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> list[CommittedOffset]:
        """Kafka's OffsetFetch: every committed partition of the group (``partitions=None``),
        by topic and partition; or one answer per requested partition, in order, offset -1
        where nothing is committed."""
        stored_group = stored_text(group_id)
        if partitions is None:
            found = self._run("fetch_group", (stored_group,))
            return [CommittedOffset(group_id, *original_row(row, 0, 4)) for row in found]
        if not partitions:
            return []
        topics = self._bind_list(sorted({stored_text(tp[0]) for tp in partitions}))
        numbers = self._bind_list(sorted({int(tp[1]) for tp in partitions}))
        stored: dict[tuple[str, int], CommittedOffset] = {}
        for row in self._run("fetch_partitions", (stored_group, topics, numbers)):
            offset = CommittedOffset(group_id, *original_row(row, 0, 4))
            stored[(offset.topic, offset.partition)] = offset
        return [
            stored.get((tp[0], tp[1]))
            or CommittedOffset(group_id=group_id, topic=tp[0], partition=tp[1], offset=NO_OFFSET)
            for tp in partitions
        ]

    def all_offsets(self) -> list[tuple[str, str, int, int, int]]:
        """Every committed offset as (group, topic, partition, offset, commit time ms), sorted
        by group, topic and partition, in one query."""
        return [
            (original_text(g), original_text(t), int(p), int(o), int(ts))
            for g, t, p, o, ts in self._run("all_offsets")
        ]

    def offset_columns(self) -> pa.Table:
        """:meth:`all_offsets` as columns (:data:`OFFSET_COLUMNS_SCHEMA`), same order, with no
        Python object per row kept."""
        batches: list[pa.RecordBatch] = []

        def add(found: list[tuple[Any, ...]]) -> None:
            columns = list(zip(*found, strict=True))
            batches.append(pa.record_batch(columns, schema=OFFSET_COLUMNS_SCHEMA))

        self._read_chunks("all_offsets", add, _READ_CHUNK)
        table = pa.Table.from_batches(batches, OFFSET_COLUMNS_SCHEMA).combine_chunks()
        for name in ("group_id", "topic"):
            i = table.schema.get_field_index(name)
            column = table.column(i)
            if column.num_chunks:
                table = table.set_column(i, name, original_column(column.combine_chunks()))
        return table

    def group_exists(self, group_id: str) -> bool:
        """Whether the sink has offsets or group metadata of ``group_id`` (two index probes)."""
        stored = stored_text(group_id)
        return bool(self._run("group_exists", (stored, stored)))

    def list_groups(self) -> list[GroupListing]:
        """Every group with offsets or group metadata, sorted by group id (code point order)."""
        return [
            GroupListing(
                group_id=original_text(g), partitions=int(n), generation=gen, members=members
            )
            for g, n, gen, members in self._run("list_groups")
        ]

    def committed_topics(self) -> list[str]:
        """Every topic with a committed offset in the sink."""
        return [original_text(t) for (t,) in self._run("committed_topics")]

    def group_commits(self) -> dict[str, int]:
        """Each group's commits counter: offset commits applied (one per partition) since its
        offsets were last all deleted."""
        return {original_text(group): int(count) for group, count in self._run("group_commits")}

    def table_rows(self) -> dict[str, int]:
        """Rows per table, by table name (with the prefix)."""
        return {t.name: int(self._run(f"count_{role}")[0][0]) for role, t in self._tables.items()}
