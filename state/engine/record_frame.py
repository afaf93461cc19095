"""Record frames (``RECORD_FRAME_SCHEMA``) from columns or ``Record``s: every record the state
machine writes is built here, so all writers of the offsets topic produce identical bytes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
)
from state.formats.frames import RECORD_FRAME_SCHEMA
from state.formats.record_columns import offset_commit_keys, offset_commit_values
from state.formats.records import (
    encode_group_metadata_key,
    encode_group_metadata_value,
)

OFFSET_KIND = "offset"
GROUP_KIND = "group"


def empty_records() -> pa.Table:
    return RECORD_FRAME_SCHEMA.empty_table()


def offset_records(
    groups: pa.Array,
    topics: pa.Array,
    partitions: np.ndarray,
    offsets: np.ndarray,
    leader_epochs: np.ndarray,
    metadata: pa.Array,
    commit_ts: np.ndarray,
    expire_ts: np.ndarray,
    tombstone: np.ndarray | None = None,
) -> pa.Table:
    """Offset commit records (tombstones where ``tombstone``, their value columns null), one per
    row; ``expire_ts`` -1: none."""
    n = len(partitions)
    if n == 0:
        return empty_records()
    tomb = np.zeros(n, dtype=bool) if tombstone is None else np.asarray(tombstone, dtype=bool)
    has_expire = expire_ts != -1
    keys = offset_commit_keys(groups, topics, partitions)
    values = offset_commit_values(offsets, leader_epochs, metadata, commit_ts, expire_ts, tomb)
    live = ~tomb
    mask = pa.array(tomb)
    return pa.Table.from_arrays(
        [
            pa.repeat(pa.scalar(OFFSET_KIND, pa.string()), n),
            groups.cast(pa.string()),
            topics.cast(pa.string()),
            pa.array(partitions, pa.int32()),
            pa.array(offsets, pa.int64(), mask=tomb),
            pa.array(leader_epochs, pa.int32(), mask=tomb),
            pc.if_else(mask, pa.scalar(None, pa.string()), metadata.cast(pa.string())),
            pa.array(commit_ts, pa.int64(), mask=tomb),
            pa.array(expire_ts, pa.int64(), mask=tomb | ~(has_expire & live)),
            pa.nulls(n, pa.int32()),
            pa.nulls(n, pa.int32()),
            keys,
            values,
        ],
        schema=RECORD_FRAME_SCHEMA,
    )


def offset_tombstones(groups: pa.Array, topics: pa.Array, partitions: np.ndarray) -> pa.Table:
    """Tombstones for the offsets keys (group, topic, partition)."""
    n = len(partitions)
    zeros64 = np.zeros(n, dtype=np.int64)
    return offset_records(
        groups,
        topics,
        partitions,
        zeros64,
        np.zeros(n, dtype=np.int32),
        pa.array([""] * n, pa.string()),
        zeros64,
        zeros64 - 1,
        tombstone=np.ones(n, dtype=bool),
    )


def group_records(groups: Sequence[str], values: Sequence[GroupMetadataValue | None]) -> pa.Table:
    """GroupMetadata records (tombstones where the value is None)."""
    rows = [_group_row(g, v) for g, v in zip(groups, values, strict=True)]
    return pa.Table.from_pylist(rows, schema=RECORD_FRAME_SCHEMA)


def _group_row(group: str, value: GroupMetadataValue | None) -> dict[str, object]:
    return group_row(
        group,
        None if value is None else value.generation,
        None if value is None else len(value.members),
        encode_group_metadata_key(group),
        None if value is None else encode_group_metadata_value(value),
    )


def group_row(
    group: str, generation: int | None, members: int | None, key: bytes, value: bytes | None
) -> dict[str, object]:
    """A group row of the record frame, from a group record's bytes."""
    return {
        "kind": GROUP_KIND,
        "group_id": group,
        "topic": None,
        "partition": -1,
        "generation": generation,
        "members": members,
        "key": key,
        "value": value,
    }


def records_table(records: Iterable[Record]) -> pa.Table:
    """A record frame of ``records`` in order, skipping unknown key types."""
    rows: list[dict[str, object]] = []
    offsets: list[Record] = []
    order: list[tuple[int, int]] = []  # (0, index in rows) or (1, index in offsets)
    for record in records:
        key, value = record
        if isinstance(key, GroupMetadataKey):
            assert value is None or isinstance(value, GroupMetadataValue)
            order.append((0, len(rows)))
            rows.append(_group_row(key.group, value))
        elif isinstance(key, OffsetCommitKey):
            order.append((1, len(offsets)))
            offsets.append(record)
    offset_table = _offset_records_of(offsets)
    if not rows:
        return offset_table
    group_table = pa.Table.from_pylist(rows, schema=RECORD_FRAME_SCHEMA)
    if not offsets:
        return group_table
    both = pa.concat_tables([group_table, offset_table])
    take = [i if part == 0 else len(rows) + i for part, i in order]
    return both.take(pa.array(take, pa.int64()))


def _offset_records_of(records: list[Record]) -> pa.Table:
    n = len(records)
    if n == 0:
        return empty_records()
    tomb = np.array([r.value is None for r in records], dtype=bool)
    values = [r.value if r.value is not None else OffsetAndMetadata(0) for r in records]
    return offset_records(
        pa.array([r.key.group for r in records], pa.string()),  # type: ignore[union-attr]
        pa.array([r.key.topic for r in records], pa.string()),  # type: ignore[union-attr]
        np.array([r.key.partition for r in records], dtype=np.int32),  # type: ignore[union-attr]
        np.array([v.offset for v in values], dtype=np.int64),  # type: ignore[union-attr]
        np.array([v.leader_epoch for v in values], dtype=np.int32),  # type: ignore[union-attr]
        pa.array([v.metadata for v in values], pa.string()),  # type: ignore[union-attr]
        np.array([v.commit_timestamp_ms for v in values], dtype=np.int64),  # type: ignore[union-attr]
        np.array(
            [-1 if v.expire_timestamp_ms is None else v.expire_timestamp_ms for v in values],  # type: ignore[union-attr]
            dtype=np.int64,
        ),
        tombstone=tomb,
    )
