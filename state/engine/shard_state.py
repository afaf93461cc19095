"""One coordinator shard's state and the ways it changes: replaying records and expiring offsets.

``ShardState`` is immutable: every function returns a new state. It holds the shard's committed
offsets as columns (``OffsetTable``) and per-group metadata (``GroupTable``); the only writer is
``replay_records``, which the request handlers' output, expiry and loading from the offsets topic
all go through, so state rebuilt from the records a shard emitted equals that shard's state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.config import CoordinatorConfig
from state.coordinator.model import (
    GroupMetadataValue,
    OffsetAndMetadata,
    Record,
    TopicPartition,
)
from state.coordinator.rules import subscribed_topics
from state.engine.groups import GroupTable, StringDict
from state.engine.hashing import key_hash, string_hash
from state.engine.offset_table import NEVER, NO_EXPIRE, OffsetTable, Rows
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
    """The offsets and group metadata of one coordinator shard (offsets-topic partition).

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

    @property
    def num_groups(self) -> int:
        """Groups that exist (have GroupMetadata or offsets)."""
        return int(np.count_nonzero(self.groups.exists()))


def empty_shard(shard_id: int, config: CoordinatorConfig | None = None) -> ShardState:
    """The state of a shard that holds nothing."""
    if shard_id < 0:
        raise ValueError(f"shard_id must be >= 0, got {shard_id}")
    retention = (config or CoordinatorConfig()).offsets_retention_ms
    return ShardState(
        shard_id, GroupTable.empty(), StringDict.empty(), OffsetTable.empty(), retention
    )


class ExpireResult(NamedTuple):
    """``state`` after expiry, the tombstones written (offsets first per group, then the group's
    metadata), and the earliest time anything can expire next (None if nothing can)."""

    state: ShardState
    records: pa.Table
    next_expiry_ms: int | None


# --- deadlines -------------------------------------------------------------------------------


def _saturating_add(values: np.ndarray, amount: int) -> np.ndarray:
    limit = int(NEVER) - amount
    return np.where(values > limit, NEVER, values + np.where(values > limit, 0, amount))


def compute_deadlines(
    groups: GroupTable, topics: StringDict, rows: Rows, retention_ms: int
) -> np.ndarray:
    """The expiry deadline of each row in its group's current state (``rules.offset_deadline``
    over columns)."""
    if len(rows) == 0:
        return np.zeros(0, np.int64)
    g = rows.gcode
    has_md = groups.has_metadata[g]
    members = groups.members[g]
    base = rows.commit_ts
    empty_md = has_md & (members == 0)
    if empty_md.any():
        base = np.where(empty_md, np.maximum(base, groups.state_ts[g]), base)
    deadline = _saturating_add(base, retention_ms)
    explicit = rows.expire_ts != NO_EXPIRE
    deadline = np.where(explicit, rows.expire_ts, deadline)
    member_rows = np.flatnonzero(has_md & (members > 0))
    if member_rows.size:
        never = np.ones(member_rows.size, dtype=bool)
        member_codes = g[member_rows]
        for code in np.unique(member_codes).tolist():
            topics_of_group = subscribed_topics(groups.group_metadata(code))
            if topics_of_group is None:
                continue
            sel = np.flatnonzero(member_codes == code)
            names = topics.names.take(pa.array(rows.tcode[member_rows[sel]], pa.int64()))
            subscribed = pc.is_in(
                names, value_set=pa.array(sorted(topics_of_group), pa.large_string())
            )
            never[sel] = np.asarray(subscribed)
        deadline[member_rows[never]] = NEVER
    return deadline.astype(np.int64)


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


def _empty_group_deadlines(groups: GroupTable) -> tuple[np.ndarray, np.ndarray]:
    """Codes of Empty groups with metadata and no offsets, and when each is deleted
    (``rules.empty_group_deadline``)."""
    codes = np.flatnonzero(groups.has_metadata & (groups.members == 0) & (groups.offset_count == 0))
    return codes, groups.state_ts[codes]


def next_expiry_ms(state: ShardState) -> int | None:
    """The earliest ``now`` at which ``expire`` would remove something; None if nothing can expire
    without a further request."""
    earliest = state.offsets.min_deadline()
    _, group_deadlines = _empty_group_deadlines(state.groups)
    if group_deadlines.size:
        earliest = min(earliest, int(group_deadlines.min()))
    return None if earliest == NEVER else int(earliest)


# --- replay ----------------------------------------------------------------------------------


def replay(state: ShardState, record: Record) -> ShardState:
    """Apply one offsets-topic record (see ``replay_records``)."""
    return replay_records(state, [record])


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
            group_rows["group_id"].to_pylist(), group_rows["value"].to_pylist(), strict=True
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
    return _maybe_compact(state)


def _column(table: pa.Table, name: str, dtype: type, fill: int) -> np.ndarray:
    col = table[name]
    if col.null_count:
        col = pc.fill_null(col, fill)
    return np.asarray(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col).astype(
        dtype
    )


def _replay_offsets(state: ShardState, table: pa.Table) -> ShardState:
    groups, gcode = state.groups.encode(table["group_id"].combine_chunks())
    topics, tcode = state.topics.encode(table["topic"].combine_chunks())
    partition = _column(table, "partition", np.int32, 0)
    n = len(partition)
    # Last record per key wins: keep each key's last row, in log order.
    order = np.lexsort((np.arange(n), partition, tcode, gcode))
    g, t, p = gcode[order], tcode[order], partition[order]
    last = np.ones(n, dtype=bool)
    last[:-1] = (g[1:] != g[:-1]) | (t[1:] != t[:-1]) | (p[1:] != p[:-1])
    keep = np.sort(order[last])
    table = table.take(pa.array(keep))
    gcode, tcode, partition = gcode[keep], tcode[keep], partition[keep]
    if "value" in table.column_names:
        tomb = np.asarray(table["value"].is_null())
    else:
        tomb = np.asarray(table["offset"].is_null())
    metadata = pc.fill_null(table["metadata"].combine_chunks(), "").cast(pa.large_string())
    rows = Rows(
        khash=key_hash(groups.names.hashes[gcode], topics.hashes[tcode], partition),
        gcode=gcode.astype(np.int32),
        tcode=tcode.astype(np.int32),
        partition=partition,
        offset=_column(table, "offset", np.int64, 0),
        leader_epoch=_column(table, "leader_epoch", np.int32, -1),
        metadata=metadata,
        commit_ts=_column(table, "commit_timestamp_ms", np.int64, 0),
        expire_ts=_column(table, "expire_timestamp_ms", np.int64, NO_EXPIRE),
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


def _maybe_compact(state: ShardState) -> ShardState:
    if not state.offsets.needs_compaction():
        return state
    return compact(state)


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
    codes, deadlines = _empty_group_deadlines(remaining)
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


# --- reading ---------------------------------------------------------------------------------


def group_offsets(state: ShardState, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
    """Every committed offset of ``group_id``."""
    names = pa.array([group_id], pa.large_string())
    code = state.groups.names.lookup(names, string_hash(names))
    if code[0] < 0:
        return {}
    rows = state.offsets.group_rows(code, state.groups.names.hashes[code])
    return _as_dict(state, rows)


def _as_dict(state: ShardState, rows: Rows) -> dict[TopicPartition, OffsetAndMetadata]:
    return dict(offset_items(state, rows))


def offset_items(state: ShardState, rows: Rows) -> list[tuple[TopicPartition, OffsetAndMetadata]]:
    """``rows`` as (partition, committed offset) pairs, in row order."""
    topics = state.topics.names.take(pa.array(rows.tcode, pa.int64())).to_pylist()
    out = []
    for topic, p, off, epoch, meta, ts, exp in zip(
        topics,
        rows.partition.tolist(),
        rows.offset.tolist(),
        rows.leader_epoch.tolist(),
        rows.metadata.to_pylist(),
        rows.commit_ts.tolist(),
        rows.expire_ts.tolist(),
        strict=True,
    ):
        value = OffsetAndMetadata(off, epoch, meta, ts, None if exp == NO_EXPIRE else exp)
        out.append((TopicPartition(topic, p), value))
    return out


def group_metadata(state: ShardState, group_id: str) -> GroupMetadataValue | None:
    names = pa.array([group_id], pa.large_string())
    code = state.groups.names.lookup(names, string_hash(names))
    return None if code[0] < 0 else state.groups.group_metadata(int(code[0]))


def fetch_offsets(
    state: ShardState, group_id: str, partitions: Sequence[TopicPartition] | None
) -> list[tuple[TopicPartition, OffsetAndMetadata | None]]:
    """OffsetFetch for one group: every committed offset (sorted) when ``partitions`` is None, else
    each listed partition with its offset or None (Kafka answers offset -1, metadata "", no error;
    ``state.coordinator.fetch.fetch`` builds that answer)."""
    committed = group_offsets(state, group_id)
    if partitions is None:
        return [(tp, committed[tp]) for tp in sorted(committed)]
    return [(TopicPartition(*tp), committed.get(TopicPartition(*tp))) for tp in partitions]


@dataclass(frozen=True)
class GroupSnapshot:
    """A group as plain values: its metadata (None for a simple group) and its offsets."""

    metadata: GroupMetadataValue | None
    offsets: dict[TopicPartition, OffsetAndMetadata]


def snapshot(state: ShardState) -> dict[str, GroupSnapshot]:
    """Every existing group as plain values (for tests and debugging: cost follows the shard)."""
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
            out[names[int(part.gcode[0])].as_py()].offsets.update(_as_dict(state, part))
    return out
