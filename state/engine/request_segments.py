"""A request frame built one ingest message (segment) at a time, for the decoded-message path.

An OffsetCommit repeats its request-level fields on each of its partitions' rows; here they are
kept once per message and repeated by Arrow when the table is built (a ``take``), so that a
1,000-partition commit costs one append per request-level column instead of 1,000. The table is
equal to the one ``request_frame``'s row builder makes for the same messages.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from state.coordinator.requests import Api
from state.formats.frames import EXTENDED_REQUEST_FRAME_SCHEMA
from state.formats.request_fast import CommitColumns

__all__ = ["SegmentedFrame"]

#: The columns that vary between the rows of one message.
_ROW_COLUMNS = ("partition_index", "topic", "partition", "offset", "leader_epoch", "metadata")
#: The message's own columns, in the order of ``SegmentedFrame.add_commit``'s tuple.
_HEAD_COLUMNS = (
    "ingest_offset",
    "timestamp_ms",
    "api",
    "request_id",
    "group_id",
    "generation_id",
    "member_id",
    "group_instance_id",
    "retention_time_ms",
    "members_json",
    "error_code",
    "error_reason",
    "protocol_type",
    "protocol",
    "leader",
    "timeout_ms",
)
_SCHEMA = EXTENDED_REQUEST_FRAME_SCHEMA


class SegmentedFrame:
    """A request frame (``EXTENDED_REQUEST_FRAME_SCHEMA``) built message by message, in order."""

    def __init__(self) -> None:
        #: Per segment, its request-level values in ``_HEAD_COLUMNS`` order.
        self._heads: list[tuple[object, ...]] = []
        #: Per segment, its row count.
        self._counts: list[int] = []
        self._rows: dict[str, list[object]] = {n: [] for n in _ROW_COLUMNS}

    def add_commit(self, commit: CommitColumns, ingest_offset: int, timestamp_ms: int) -> None:
        """The rows of an OffsetCommit with partitions: one per partition, in request order."""
        self._heads.append(
            (
                ingest_offset,
                timestamp_ms,
                Api.OFFSET_COMMIT.value,
                commit.request_id,
                commit.group_id,
                commit.generation_id,
                commit.member_id,
                commit.group_instance_id,
                commit.retention_time_ms,
                None,  # members_json
                0,  # error_code
                None,  # error_reason
                None,  # protocol_type
                None,  # protocol
                None,  # leader
                commit.timeout_ms,
            )
        )
        n = len(commit.partitions)
        self._counts.append(n)
        rows = self._rows
        rows["partition_index"] += range(n)
        rows["topic"] += commit.topics
        rows["partition"] += commit.partitions
        rows["offset"] += commit.offsets
        rows["leader_epoch"] += commit.leader_epochs
        rows["metadata"] += commit.metadata

    def add_row(self, row: Mapping[str, object]) -> None:
        """One frame row (``request_frame.request_rows``), as a segment of its own."""
        self._heads.append(tuple(row.get(name) for name in _HEAD_COLUMNS))
        self._counts.append(1)
        for name, values in self._rows.items():
            values.append(row.get(name))

    def table(self) -> pa.Table:
        counts = self._counts
        heads = pa.table(
            [
                pa.array(values, _SCHEMA.field(name).type)
                for name, values in zip(_HEAD_COLUMNS, _transposed(self._heads), strict=True)
            ],
            names=list(_HEAD_COLUMNS),
        )
        # Row i of the frame belongs to segment repeat[i]; no take when every segment is one row.
        if len(self._rows["partition_index"]) != len(counts):
            heads = heads.take(np.repeat(np.arange(len(counts), dtype=np.int64), counts))
        columns = [
            pa.array(self._rows[f.name], f.type) if f.name in self._rows else heads[f.name]
            for f in _SCHEMA
        ]
        return pa.table(columns, schema=_SCHEMA)


def _transposed(heads: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Segment tuples as column tuples (empty columns when there is no segment)."""
    return list(zip(*heads, strict=True)) if heads else [() for _ in _HEAD_COLUMNS]
