"""Preparing a micro-batch for the sinks: validate the record frame, skip what no sink can store,
reduce it to the last record per key, and split it into upserts, deletes and history.

Every backend applies the same :class:`PreparedBatch`, so they all hold the same state; the
column lists here are the order in which the backends bind values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.sinks.text import stored_column
from state.engine.columns import last_rows_per_key, python_list
from state.formats.frames import MEMBER_FRAME_SCHEMA, RECORD_FRAME_SCHEMA

log = logging.getLogger(__name__)

#: The columns of an applied offset commit, in the order the sinks bind them.
_COMMIT_COLUMNS: Final = (
    "group_id",
    "topic",
    "partition",
    "offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
)
#: Columns of :attr:`PreparedBatch.offset_upserts`, in the order the sinks bind them.
OFFSET_UPSERT_COLUMNS: Final = (*_COMMIT_COLUMNS, "expire_timestamp_ms")
OFFSET_KEY_COLUMNS: Final = ("group_id", "topic", "partition")
GROUP_UPSERT_COLUMNS: Final = ("group_id", "generation", "members")
GROUP_KEY_COLUMNS: Final = ("group_id",)
#: Consumer-protocol members of a batch (``write_batch(..., members=)``), in log order.
MEMBER_SCHEMA: Final = MEMBER_FRAME_SCHEMA
MEMBER_KEY_COLUMNS: Final = ("group_id", "member_id")
#: Position of a record in the batch as received (history keeps it to order commits).
SEQ: Final = "__seq"
#: Columns of :attr:`PreparedBatch.history` after the sequence number within the batch.
HISTORY_COLUMNS: Final = _COMMIT_COLUMNS
_TEXT_COLUMNS: Final = ("group_id", "topic", "metadata")
# Row position in the batch: what dedupe takes rows by.
_POS: Final = "__pos"


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A record frame split by what each backend executes: deduplicated upserts and deletes.

    Every table has unique keys; ``history`` holds every non-tombstone offset record in
    log order with its position in the batch (``__seq``).
    """

    offset_upserts: pa.Table
    offset_deletes: pa.Table
    group_upserts: pa.Table
    group_deletes: pa.Table
    history: pa.Table

    @property
    def offset_changes(self) -> int:
        """Offset rows the batch changes: upserts plus deletes."""
        return self.offset_upserts.num_rows + self.offset_deletes.num_rows


#: Rows converted to Python tuples at a time: a rebuild writes millions of rows in one batch,
#: and all their tuples at once took ~750 bytes a row of driver memory (+1.5 GB for 2M rows).
ROW_CHUNK: Final = 65_536


def rows(
    table: pa.Table, columns: Sequence[str], *extra: Any, chunk_rows: int = ROW_CHUNK
) -> Iterator[tuple[Any, ...]]:
    """``table``'s rows as tuples of ``columns`` followed by the constants ``extra``, converted
    ``chunk_rows`` at a time (so memory follows the chunk, not the batch).

    Column-wise conversion and ``zip`` keep the per-row cost in C, which matters at 200k rows.
    """
    for start in range(0, table.num_rows, chunk_rows):
        part = table.slice(start, chunk_rows)
        cols: list[Iterable[Any]] = [python_list(part.column(name)) for name in columns]
        cols.extend([value] * part.num_rows for value in extra)
        yield from zip(*cols, strict=True)


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
        first = pc.index(bad, True).as_py()
        seq = table.column(SEQ)[first].as_py()
        raise ValueError(f"record {seq} of the batch: {message}")


def _fill(table: pa.Table, name: str, value: pa.Scalar | str) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, name, pc.fill_null(table.column(name), value))


def _stored_text_columns(table: pa.Table) -> pa.Table:
    """``table`` with its names and metadata as the sinks store them (``connectors.sinks.text``:
    NUL, which PostgreSQL ``text`` cannot hold, escaped)."""
    for name in _TEXT_COLUMNS:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, stored_column(table.column(name)))
    return table


def prepare_batch(records: pa.Table | pa.RecordBatch) -> PreparedBatch:
    """Validate a record frame and reduce it to the last record per key.

    Raises ValueError for frames that break RECORD_FRAME_SCHEMA's contract (unknown ``kind``, an
    offset record without topic or a commit without offset): those are bugs upstream, and failing
    the batch is better than silently diverging from the offsets topic.
    """
    table = _conform(records)
    table = table.append_column(SEQ, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    kind = table.column("kind")
    _require(pc.is_in(kind, value_set=pa.array(["offset", "group"])), table, "unknown kind")
    not_offset = pc.not_equal(kind, "offset")
    _require(
        pc.or_(not_offset, pc.is_valid(table.column("topic"))),
        table,
        "offset record without topic",
    )
    _require(
        pc.or_(
            pc.or_(not_offset, pc.is_null(table.column("value"))),
            pc.is_valid(table.column("offset")),
        ),
        table,
        "offset commit without offset",
    )

    table = _stored_text_columns(table)

    # Commits carry Kafka's defaults where the record omits them (OffsetAndMetadata's defaults).
    table = _fill(table, "leader_epoch", pa.scalar(-1, pa.int32()))
    table = _fill(table, "metadata", "")
    table = _fill(table, "commit_timestamp_ms", pa.scalar(-1, pa.int64()))
    table = table.append_column(_POS, pa.array(np.arange(table.num_rows, dtype=np.int64)))

    is_offset = pc.equal(table.column("kind"), "offset")
    offsets = table.filter(is_offset)
    groups = table.filter(pc.invert(is_offset))
    last_offsets = last_rows_per_key(offsets, OFFSET_KEY_COLUMNS, _POS)
    last_groups = last_rows_per_key(groups, GROUP_KEY_COLUMNS, _POS)
    offset_tomb = pc.is_null(last_offsets.column("value"))
    group_tomb = pc.is_null(last_groups.column("value"))
    history = offsets.filter(pc.is_valid(offsets.column("value")))
    return PreparedBatch(
        offset_upserts=last_offsets.filter(pc.invert(offset_tomb)).select(OFFSET_UPSERT_COLUMNS),
        offset_deletes=last_offsets.filter(offset_tomb).select(OFFSET_KEY_COLUMNS),
        group_upserts=last_groups.filter(pc.invert(group_tomb)).select(GROUP_UPSERT_COLUMNS),
        group_deletes=last_groups.filter(group_tomb).select(GROUP_KEY_COLUMNS),
        history=history.select([SEQ, *HISTORY_COLUMNS]),
    )


def prepare_members(members: pa.Table | None) -> tuple[pa.Table, pa.Table]:
    """(upserts, deletes) of a batch's member changes (``MEMBER_SCHEMA``, log order): the last
    change per (group, member), names as the sinks store them."""
    if members is None or members.num_rows == 0:
        empty = MEMBER_SCHEMA.empty_table().select(MEMBER_KEY_COLUMNS)
        return empty, empty
    if not members.schema.equals(MEMBER_SCHEMA, check_metadata=False):
        raise ValueError(f"members must follow MEMBER_SCHEMA, got {members.schema}")
    table = members.append_column(_POS, pa.array(np.arange(members.num_rows, dtype=np.int64)))
    for name in MEMBER_KEY_COLUMNS:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, stored_column(table.column(name)))
    last = last_rows_per_key(table, MEMBER_KEY_COLUMNS, _POS)
    alive = last.column("alive")
    return (
        last.filter(alive).select(MEMBER_KEY_COLUMNS),
        last.filter(pc.invert(alive)).select(MEMBER_KEY_COLUMNS),
    )
