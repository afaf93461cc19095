"""Reading a shard without changing it: a group's offsets, OffsetFetch, snapshots.

Reads of one group cost a binary search in the offsets table; ``snapshot`` reads the whole shard
(loading, tests and debugging).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from state.coordinator.model import GroupMetadataValue, OffsetAndMetadata, TopicPartition
from state.engine.columns import python_list
from state.engine.hashing import string_hash
from state.engine.offset_rows import Rows
from state.engine.offset_table import NO_EXPIRE
from state.engine.shard_state import ShardState


def offset_items(state: ShardState, rows: Rows) -> list[tuple[TopicPartition, OffsetAndMetadata]]:
    """``rows`` as (partition, committed offset) pairs, in row order."""
    topics = python_list(state.topics.names.take(pa.array(rows.tcode, pa.int64())))
    out = []
    for topic, p, off, epoch, meta, ts, exp in zip(
        topics,
        rows.partition.tolist(),
        rows.offset.tolist(),
        rows.leader_epoch.tolist(),
        python_list(rows.metadata),
        rows.commit_ts.tolist(),
        rows.expire_ts.tolist(),
        strict=True,
    ):
        value = OffsetAndMetadata(off, epoch, meta, ts, None if exp == NO_EXPIRE else exp)
        out.append((TopicPartition(topic, p), value))
    return out


def fetch_offsets(
    state: ShardState, group_id: str, partitions: Sequence[TopicPartition] | None
) -> list[tuple[TopicPartition, OffsetAndMetadata | None]]:
    """OffsetFetch for one group: every committed offset (sorted) when ``partitions`` is None, else
    each listed partition with its offset or None (for which Kafka answers offset -1, metadata ""
    and no error)."""
    names = pa.array([group_id], pa.large_string())
    codes = state.groups.names.lookup(names, string_hash(names))  # -1: absent
    committed: dict[TopicPartition, OffsetAndMetadata] = {}
    if codes[0] >= 0:
        rows = state.offsets.group_rows(codes, state.groups.names.hashes[codes])
        committed = dict(offset_items(state, rows))
    if partitions is None:
        return [(tp, committed[tp]) for tp in sorted(committed)]
    return [(TopicPartition(*tp), committed.get(TopicPartition(*tp))) for tp in partitions]


@dataclass(frozen=True)
class GroupSnapshot:
    """A group as plain values: its metadata (None for a simple group) and its offsets."""

    metadata: GroupMetadataValue | None
    offsets: dict[TopicPartition, OffsetAndMetadata]


def snapshot(state: ShardState) -> dict[str, GroupSnapshot]:
    """Every existing group as plain values (cost follows the shard)."""
    rows = state.offsets.live_rows()
    names = state.groups.names.names
    out: dict[str, GroupSnapshot] = {}
    for code in np.flatnonzero(state.groups.exists()).tolist():
        out[names[code].as_py()] = GroupSnapshot(state.groups.group_metadata(code), {})
    if len(rows):
        order = np.argsort(rows.gcode, kind="stable")
        rows = rows.take(order)
        bounds = np.flatnonzero(np.diff(rows.gcode)) + 1
        starts = np.concatenate([[0], bounds])
        stops = np.concatenate([bounds, [len(rows)]])
        for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
            part = rows.take(np.arange(a, b))
            out[names[int(part.gcode[0])].as_py()].offsets.update(offset_items(state, part))
    return out
