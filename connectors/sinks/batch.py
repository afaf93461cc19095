"""A micro-batch prepared for the sinks: validated, reduced to the last record per key, and split
into upserts, deletes and history. The column lists are the order in which the sinks bind values.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.sinks.text import stored_column
from state.engine.columns import last_rows_per_key, python_list
from state.formats.frames import MEMBER_FRAME_SCHEMA, RECORD_FRAME_SCHEMA

#: The columns of an applied offset commit (and of a history row after its ``SEQ``).
HISTORY_COLUMNS: Final = (
    *("group_id", "topic", "partition", "offset"),
    *("leader_epoch", "metadata", "commit_timestamp_ms"),
)
OFFSET_UPSERT_COLUMNS: Final = (*HISTORY_COLUMNS, "expire_timestamp_ms")
OFFSET_KEY_COLUMNS: Final = ("group_id", "topic", "partition")
GROUP_UPSERT_COLUMNS: Final = ("group_id", "generation", "members")
GROUP_KEY_COLUMNS: Final = ("group_id",)
MEMBER_KEY_COLUMNS: Final = ("group_id", "member_id")
#: A record's position in the batch as received: what dedupe keeps the last of, and history's
#: order within the batch.
SEQ: Final = "__seq"
#: Rows converted to Python tuples at a time: all of a rebuild's 2M rows at once took +1.5 GB.
ROW_CHUNK: Final = 65_536


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A record frame split by what the sinks execute; ``history`` holds every non-tombstone
    offset record in log order, after its ``SEQ``."""

    offset_upserts: pa.Table
    offset_deletes: pa.Table
    group_upserts: pa.Table
    group_deletes: pa.Table
    history: pa.Table

    @property
    def offset_changes(self) -> int:
        """Offset rows the batch changes: upserts plus deletes."""
        return self.offset_upserts.num_rows + self.offset_deletes.num_rows


def rows(
    table: pa.Table, columns: Sequence[str], *extra: Any, chunk_rows: int = ROW_CHUNK
) -> Iterator[tuple[Any, ...]]:
    """``table``'s rows as tuples of ``columns`` then the constants ``extra``, converted a column
    at a time (the per-row cost stays in C), ``chunk_rows`` rows at a time."""
    for start in range(0, table.num_rows, chunk_rows):
        part = table.slice(start, chunk_rows)
        cols: list[Iterable[Any]] = [python_list(part.column(name)) for name in columns]
        cols.extend([value] * part.num_rows for value in extra)
        yield from zip(*cols, strict=True)


def _in_key_order(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``table`` sorted by the primary key ``keys`` (bytewise, as SQLite compares text): a
    B-tree then takes its rows in order, not one page in cache each. A 200k-row batch of
    many small commits updating SQLite: 3.9-4.3 s in log order, 2.0-2.5 s in key order."""
    if table.num_rows < 2:
        return table
    return table.sort_by([(name, "ascending") for name in keys])


def _conform(records: pa.Table | pa.RecordBatch) -> pa.Table:
    """``records`` as a Table with exactly RECORD_FRAME_SCHEMA's columns (cast where safe)."""
    if isinstance(records, pa.RecordBatch):
        records = pa.Table.from_batches([records])
    if not isinstance(records, pa.Table):
        raise TypeError(f"records must be a pyarrow Table, got {type(records).__name__}")
    missing = [name for name in RECORD_FRAME_SCHEMA.names if name not in records.column_names]
    if missing:
        raise ValueError(f"records lack RECORD_FRAME_SCHEMA columns {missing}")
    table = records.select(RECORD_FRAME_SCHEMA.names)
    if not table.schema.equals(RECORD_FRAME_SCHEMA):
        try:
            table = table.cast(RECORD_FRAME_SCHEMA)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueError(f"records do not conform to RECORD_FRAME_SCHEMA: {exc}") from exc
    return table


def _require(condition: pa.ChunkedArray | pa.Array, table: pa.Table, message: str) -> None:
    """Raise ValueError naming the first row where ``condition`` (a boolean mask) fails."""
    bad = pc.invert(pc.fill_null(condition, False))
    if pc.any(bad).as_py():
        seq = table.column(SEQ)[pc.index(bad, True).as_py()].as_py()
        raise ValueError(f"record {seq} of the batch: {message}")


def _with_seq(table: pa.Table, stored: Sequence[str], defaults: dict[str, Any]) -> pa.Table:
    """``table`` numbered (``SEQ``), its ``stored`` strings as the sinks store them and nulls of
    ``defaults``' columns filled."""
    table = table.append_column(SEQ, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    for name in stored:
        table = _replace(table, name, stored_column(table.column(name)))
    for name, default in defaults.items():
        table = _replace(table, name, pc.fill_null(table.column(name), default))
    return table


def _replace(table: pa.Table, name: str, column: pa.ChunkedArray | pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, column)


def prepare_batch(records: pa.Table | pa.RecordBatch) -> PreparedBatch:
    """Validate a record frame and reduce it to the last record per key. ValueError for a frame
    breaking RECORD_FRAME_SCHEMA's contract (unknown ``kind``, an offset record without topic, a
    commit without offset): a bug upstream, better failed than diverging from the topic."""
    table, is_offset = _checked(records)
    not_offset = pc.invert(is_offset)
    has_offset = pc.or_(pc.is_null(table.column("value")), pc.is_valid(table.column("offset")))
    _require(pc.or_(not_offset, has_offset), table, "offset commit without offset")

    offsets = table.filter(is_offset)
    last_offsets = _in_key_order(
        last_rows_per_key(offsets, OFFSET_KEY_COLUMNS, SEQ), OFFSET_KEY_COLUMNS
    )
    last_groups = last_rows_per_key(table.filter(not_offset), GROUP_KEY_COLUMNS, SEQ)
    offset_tomb = pc.is_null(last_offsets.column("value"))
    group_tomb = pc.is_null(last_groups.column("value"))
    return PreparedBatch(
        offset_upserts=last_offsets.filter(pc.invert(offset_tomb)).select(OFFSET_UPSERT_COLUMNS),
        offset_deletes=last_offsets.filter(offset_tomb).select(OFFSET_KEY_COLUMNS),
        group_upserts=last_groups.filter(pc.invert(group_tomb)).select(GROUP_UPSERT_COLUMNS),
        group_deletes=last_groups.filter(group_tomb).select(GROUP_KEY_COLUMNS),
        history=offsets.filter(pc.is_valid(offsets.column("value"))).select(
            [SEQ, *HISTORY_COLUMNS]
        ),
    )


def prepare_snapshot(records: pa.Table | pa.RecordBatch) -> PreparedBatch:
    """A rebuilt shard's records (``state.shard.snapshot_records``: one live record per key, as
    compaction leaves its partitions) as ``prepare_batch`` prepares them, without the reduction
    to the last record per key or the history, which a snapshot does not need: a rebuild's
    millions of rows are converted once. ValueError as ``prepare_batch``'s, and for a tombstone."""
    table, is_offset = _checked(records)
    _require(pc.is_valid(table.column("value")), table, "a tombstone in a shard's snapshot")
    none = table.slice(0, 0)
    return PreparedBatch(
        offset_upserts=table.filter(is_offset).select(OFFSET_UPSERT_COLUMNS),
        offset_deletes=none.select(OFFSET_KEY_COLUMNS),
        group_upserts=table.filter(pc.invert(is_offset)).select(GROUP_UPSERT_COLUMNS),
        group_deletes=none.select(GROUP_KEY_COLUMNS),
        history=none.select([SEQ, *HISTORY_COLUMNS]),
    )


def _checked(records: pa.Table | pa.RecordBatch) -> tuple[pa.Table, pa.ChunkedArray]:
    """``records`` numbered, their strings as the sinks store them and Kafka's defaults
    (OffsetAndMetadata's) where a commit omits them, checked for known kinds and offset records
    with a topic; and which rows are offset records."""
    defaults = {
        "leader_epoch": pa.scalar(-1, pa.int32()),
        "metadata": "",
        "commit_timestamp_ms": pa.scalar(-1, pa.int64()),
    }
    table = _with_seq(_conform(records), ("group_id", "topic", "metadata"), defaults)
    kind = table.column("kind")
    _require(pc.is_in(kind, value_set=pa.array(["offset", "group"])), table, "unknown kind")
    is_offset = pc.equal(kind, "offset")
    topic = pc.is_valid(table.column("topic"))
    _require(pc.or_(pc.invert(is_offset), topic), table, "offset record without topic")
    return table, is_offset


def prepare_members(members: pa.Table | None) -> tuple[pa.Table, pa.Table]:
    """(upserts, deletes) of a batch's member changes (``MEMBER_FRAME_SCHEMA``, log order): the
    last change per (group, member), names as the sinks store them."""
    if members is None or members.num_rows == 0:
        empty = MEMBER_FRAME_SCHEMA.empty_table().select(MEMBER_KEY_COLUMNS)
        return empty, empty
    if not members.schema.equals(MEMBER_FRAME_SCHEMA, check_metadata=False):
        raise ValueError(f"members must follow MEMBER_SCHEMA, got {members.schema}")
    last = last_rows_per_key(_with_seq(members, MEMBER_KEY_COLUMNS, {}), MEMBER_KEY_COLUMNS, SEQ)
    alive = last.column("alive")
    return (
        last.filter(alive).select(MEMBER_KEY_COLUMNS),
        last.filter(pc.invert(alive)).select(MEMBER_KEY_COLUMNS),
    )
