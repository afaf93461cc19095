"""One coordinator shard's state and the ways it changes: replaying records and expiring offsets.

``ShardState`` is immutable: every function returns a new state. It holds the shard's committed
offsets as columns (``OffsetTable``) and per-group metadata (``GroupTable``); the only writer is
``replay_records``, which the request handlers' output, expiry and loading from the offsets topic
all go through, so state rebuilt from the records a shard emitted equals that shard's state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.config import CoordinatorConfig
from state.coordinator.model import GroupMetadataValue, Record
from state.engine.columns import arrow_column, last_index_per_key, numpy_column, python_list
from state.engine.expiry import compute_deadlines, empty_group_deadlines
from state.engine.groups import GroupTable, StringDict
from state.engine.hashing import key_hash
from state.engine.offset_rows import Rows
from state.engine.offset_table import NEVER, NO_EXPIRE, OffsetTable
from state.engine.record_frame import (
    GROUP_KIND,
    empty_records,
    group_records,
    offset_tombstones,
    records_table,
)
from state.formats.records import decode_group_metadata_value

#: Dead dictionary entries (groups that no longer exist, topics no offset uses) are dropped at a
#: compaction once they are more than this fraction of the dictionary.
DEAD_ENTRY_FRACTION = 0.25


@dataclass(frozen=True, eq=False)
class ShardState:
    """The offsets and group metadata of one coordinator shard: the groups of the offsets-topic
    partitions ``CoordinatorConfig.partitions_of(shard_id)`` (one partition by default).

    Opaque: use the functions of ``state.shard``. ``retention_ms`` is the ``offsets_retention_ms``
    the stored expiry deadlines were computed with; a different configured retention makes the next
    ``apply_batch``/``expire`` recompute them.
    """

    shard_id: int
    groups: GroupTable
    topics: StringDict
    offsets: OffsetTable
    retention_ms: int
    # Blob sections as decoded: name -> (the part it encodes, its bytes). encode_state reuses the
    # bytes of a part that is still the same object.
    blob_sections: Mapping[str, tuple[object, memoryview]] = field(default_factory=dict, repr=False)

    @property
    def num_offsets(self) -> int:
        """Committed offsets held."""
        return len(self.offsets)


def empty_shard(shard_id: int, config: CoordinatorConfig | None = None) -> ShardState:
    """The state of a shard that holds nothing."""
    if shard_id < 0:
        raise ValueError(f"shard_id must be >= 0, got {shard_id}")
    retention = (config or CoordinatorConfig()).offsets_retention_ms
    return ShardState(
        shard_id, GroupTable.empty(), StringDict.empty(), OffsetTable.empty(), retention
    )


def state_nbytes(state: ShardState) -> int:
    """Bytes of memory ``state``'s columns hold (arrays that share a buffer count it each time):
    what a reader that keeps decoded states between calls weighs them by."""

    def nbytes(part: object) -> int:
        if isinstance(part, np.ndarray | pa.Array):
            return int(part.nbytes)
        if is_dataclass(part):
            return sum(nbytes(getattr(part, f.name)) for f in fields(part))
        return 0

    sections = sum(len(view) for _, view in state.blob_sections.values())
    return nbytes(state.groups) + nbytes(state.topics) + nbytes(state.offsets) + sections


class ExpireResult(NamedTuple):
    """``state`` after expiry, the tombstones written (offsets first per group, then the group's
    metadata), and the earliest time anything can expire next (None if nothing can)."""

    state: ShardState
    records: pa.Table
    next_expiry_ms: int | None


# --- deadlines -------------------------------------------------------------------------------


def with_retention(state: ShardState, config: CoordinatorConfig) -> ShardState:
    """``state`` with deadlines computed for ``config.offsets_retention_ms``."""
    retention = config.offsets_retention_ms
    if state.retention_ms == retention:
        return state
    table = state.offsets.compact()
    base = table.base.with_deadline(
        compute_deadlines(state.groups, state.topics, table.base, retention)
    )
    return replace(state, offsets=OffsetTable.from_base(base), retention_ms=retention)


def next_expiry_ms(state: ShardState) -> int | None:
    """The earliest ``now`` at which ``expire`` would remove something; None if nothing can expire
    without a further request."""
    earliest = state.offsets.min_deadline()
    _, group_deadlines = empty_group_deadlines(state.groups)
    if group_deadlines.size:
        earliest = min(earliest, int(group_deadlines.min()))
    return None if earliest == NEVER else int(earliest)


# --- replay ----------------------------------------------------------------------------------


def replay_records(state: ShardState, records: pa.Table | Iterable[Record]) -> ShardState:
    """Apply records in order: the last record of a key wins, a tombstone removes its key, and a
    group with neither metadata nor offsets no longer exists.

    ``records`` is a record frame (at least ``kind``, ``group_id``, ``topic``, ``partition``,
    ``offset``, ``leader_epoch``, ``metadata``, ``commit_timestamp_ms``, ``expire_timestamp_ms``;
    ``value`` too for group records, whose members only it holds; a row is a tombstone when its
    ``value`` is null, or without a ``value`` column when its ``offset`` is null) or ``Record``s
    (records of unknown key types are ignored). Used for request output and to load a shard from
    the offsets topic. Cost follows the number of records, not the shard's size, except for an
    occasional compaction.
    """
    table = records if isinstance(records, pa.Table) else records_table(records)
    if table.num_rows == 0:
        return state
    is_group = np.asarray(pc.equal(table["kind"], GROUP_KIND).fill_null(False))
    groups = state.groups
    changed: list[int] = []
    if is_group.any():
        group_rows = table.filter(pa.array(is_group))
        last: dict[str, GroupMetadataValue | None] = {}
        for gid, raw in zip(
            python_list(group_rows["group_id"]), group_rows["value"].to_pylist(), strict=True
        ):
            last[gid] = None if raw is None else decode_group_metadata_value(raw)
        names = list(last)
        groups, codes = groups.encode(pa.array(names, pa.large_string()))
        changed = codes.tolist()
        groups = groups.with_metadata(changed, list(last.values()))
    state = replace(state, groups=groups)
    if not is_group.all():
        state = _replay_offsets(
            state, table.filter(pa.array(~is_group)) if is_group.any() else table
        )
    if changed:
        state = _refresh_deadlines(state, np.array(changed, dtype=np.int64))
    # Compacted once the delta outgrows its share of the base, so merges spread over many batches.
    return compact(state) if state.offsets.needs_compaction() else state


def _replay_offsets(state: ShardState, table: pa.Table) -> ShardState:
    """``state`` with the offset records of ``table`` (a record frame in log order) written: the
    last record per key, tombstones deleting; dictionaries, group counts and deadlines follow."""
    groups, gcode = state.groups.encode(arrow_column(table, "group_id"))
    topics, tcode = state.topics.encode(arrow_column(table, "topic"))
    partition = numpy_column(table, "partition", np.int32, 0)
    # Last record per key wins, as compaction would leave it.
    keep = last_index_per_key(gcode, tcode, partition)
    if keep.size < table.num_rows:  # a request's records are one per key already
        table = table.take(pa.array(keep))
        gcode, tcode, partition = gcode[keep], tcode[keep], partition[keep]
    if "value" in table.column_names:
        tomb = np.asarray(table["value"].is_null())
    else:
        tomb = np.asarray(table["offset"].is_null())
    metadata = pc.fill_null(arrow_column(table, "metadata"), "").cast(pa.large_string())
    rows = Rows(
        khash=key_hash(groups.names.hashes[gcode], topics.hashes[tcode], partition),
        gcode=gcode.astype(np.int32),
        tcode=tcode.astype(np.int32),
        partition=partition,
        offset=numpy_column(table, "offset", np.int64, 0),
        leader_epoch=numpy_column(table, "leader_epoch", np.int32, -1),
        metadata=metadata,
        commit_ts=numpy_column(table, "commit_timestamp_ms", np.int64, 0),
        expire_ts=numpy_column(table, "expire_timestamp_ms", np.int64, NO_EXPIRE),
        deadline=np.zeros(len(partition), np.int64),
    )
    rows = rows.with_deadline(compute_deadlines(groups, topics, rows, state.retention_ms))
    offsets, existed = state.offsets.write(rows, tomb)
    change = np.where(tomb, -existed.astype(np.int64), (~existed).astype(np.int64))
    groups = groups.with_counts(gcode, change)
    return replace(state, groups=groups, topics=topics, offsets=offsets)


def _refresh_deadlines(state: ShardState, codes: np.ndarray) -> ShardState:
    """Recompute the deadlines of groups ``codes`` after their metadata changed."""
    rows = state.offsets.group_rows(codes, state.groups.names.hashes[codes])
    if len(rows) == 0:
        return state
    fresh = compute_deadlines(state.groups, state.topics, rows, state.retention_ms)
    stale = np.flatnonzero(fresh != rows.deadline)
    if stale.size == 0:
        return state
    rows = rows.take(stale).with_deadline(fresh[stale])
    order = np.argsort(rows.khash, kind="stable")
    offsets, _ = state.offsets.write(rows.take(order), np.zeros(len(rows), dtype=bool))
    return replace(state, offsets=offsets)


def compact(state: ShardState) -> ShardState:
    """Merge the offsets delta into the base, and drop dead dictionary entries when there are
    many."""
    offsets = state.offsets.compact()
    groups, topics = state.groups, state.topics
    alive = groups.exists()
    used = np.bincount(offsets.base.tcode, minlength=len(topics)) > 0
    dead = (len(groups) - int(alive.sum())) + (len(topics) - int(used.sum()))
    if dead > DEAD_ENTRY_FRACTION * (len(groups) + len(topics)):
        keep_g = np.flatnonzero(alive)
        keep_t = np.flatnonzero(used)
        group_map = np.full(len(groups), -1, dtype=np.int64)
        group_map[keep_g] = np.arange(keep_g.size)
        topic_map = np.full(len(topics), -1, dtype=np.int64)
        topic_map[keep_t] = np.arange(keep_t.size)
        offsets = offsets.remap_codes(group_map, topic_map)
        groups, topics = groups.take(keep_g), topics.take(keep_t)
    return replace(state, groups=groups, topics=topics, offsets=offsets)


# --- expiry ----------------------------------------------------------------------------------


def expire(state: ShardState, now_ms: int, config: CoordinatorConfig) -> ExpireResult:
    """Remove every offset due at ``now_ms``, then the metadata of Empty groups left without
    offsets; return a tombstone per removal. Pure: time is ``now_ms`` only."""
    state = with_retention(state, config)
    due = state.offsets.due(now_ms)
    groups = state.groups
    parts = []
    if len(due):
        gnames = groups.names.names.take(pa.array(due.gcode, pa.int64()))
        tnames = state.topics.names.take(pa.array(due.tcode, pa.int64()))
        parts.append(offset_tombstones(gnames, tnames, due.partition))
        remaining = groups.with_counts(due.gcode, -np.ones(len(due), np.int64))
    else:
        remaining = groups
    codes, deadlines = empty_group_deadlines(remaining)
    gone = codes[deadlines <= now_ms]
    if gone.size:
        names = groups.names.names.take(pa.array(gone)).to_pylist()
        parts.append(group_records(names, [None] * len(names)))
    if not parts:
        return ExpireResult(state, empty_records(), next_expiry_ms(state))
    records = pa.concat_tables(parts)
    # Kafka's expiry pass goes group by group: offsets, then the group's metadata.
    kind_order = pc.equal(records["kind"], GROUP_KIND)
    records = records.append_column("_kind", kind_order).sort_by(
        [
            ("group_id", "ascending"),
            ("_kind", "ascending"),
            ("topic", "ascending"),
            ("partition", "ascending"),
        ]
    )
    records = records.drop_columns(["_kind"])
    state = replay_records(state, records)
    return ExpireResult(state, records, next_expiry_ms(state))
