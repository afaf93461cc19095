"""A shard's committed offsets: an immutable base plus a small delta, sorted by key hash.

Rows are keyed by (group code, topic code, partition) and ordered by ``hashing.key_hash``, so a
batch finds its keys by binary search. Writes go to the delta, whose rows add a key or supersede
a base row (``base_pos``), maybe as a tombstone; the delta is merged into a new base once it
outgrows a fraction of the base, amortizing the merge. Every operation returns a new table (the
base's arrays are usually read-only views of the state blob). Each row keeps its expiry
``deadline``, so expiry is a comparison over one column."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property

import numpy as np
import pyarrow as pa

from state.engine.columns import INT64_MAX
from state.engine.hashing import group_hash_range
from state.engine.offset_rows import Rows, find, merge_sorted

#: Deadline of a row that cannot expire in its group's current state.
NEVER = INT64_MAX
#: Expire timestamp of a row without an explicit one (Kafka's own "none" marker in v1 values).
NO_EXPIRE = -1

#: Merge the delta into the base once it outgrows this fraction of the base and this many rows.
COMPACT_FRACTION = 8
COMPACT_MIN_ROWS = 32768


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_set)`` for a sorted ``sorted_set``, by binary search."""
    if sorted_set.size == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), sorted_set.size - 1)
    return sorted_set[at] == values


@dataclass(frozen=True)
class Delta:
    """Rows written since the base was built, sorted by khash: ``base_pos`` the base row each
    supersedes (-1: none), ``tomb`` a deleted key."""

    rows: Rows
    base_pos: np.ndarray  # int64
    tomb: np.ndarray  # bool

    @staticmethod
    def empty() -> Delta:
        return Delta(Rows.empty(), np.zeros(0, np.int64), np.zeros(0, bool))

    @cached_property
    def superseded(self) -> np.ndarray:
        return np.sort(self.base_pos[self.base_pos >= 0])


@dataclass(frozen=True)
class Located:
    """Where queried keys live: ``delta`` index, else ``base`` index (-1: absent); ``live``: the
    key has a committed offset."""

    delta: np.ndarray
    base: np.ndarray
    live: np.ndarray


@dataclass(frozen=True)
class OffsetTable:
    """A key's current row is its delta row if any (none for a tombstone), else its base row."""

    base: Rows
    delta: Delta

    @staticmethod
    def empty() -> OffsetTable:
        return OffsetTable(Rows.empty(), Delta.empty())

    @staticmethod
    def from_base(base: Rows) -> OffsetTable:
        """A table of ``base`` (sorted by khash, unique keys) and an empty delta."""
        return OffsetTable(base, Delta.empty())

    def __len__(self) -> int:
        d = self.delta
        superseded = int(np.count_nonzero(d.base_pos >= 0))
        return len(self.base) - superseded + int(np.count_nonzero(~d.tomb))

    def locate(
        self, khash: np.ndarray, gcode: np.ndarray, tcode: np.ndarray, partition: np.ndarray
    ) -> Located:
        """Where each queried key currently lives."""
        d_idx = find(self.delta.rows, khash, gcode, tcode, partition)
        b_idx = np.full(len(khash), -1, dtype=np.int64)
        outside = np.flatnonzero(d_idx < 0)
        if outside.size and len(self.base):
            b_idx[outside] = find(
                self.base, khash[outside], gcode[outside], tcode[outside], partition[outside]
            )
        live = b_idx >= 0
        in_delta = np.flatnonzero(d_idx >= 0)
        live[in_delta] = ~self.delta.tomb[d_idx[in_delta]]
        return Located(d_idx, b_idx, live)

    def gather(self, located: Located) -> Rows:
        """The current rows of located keys, all live, in query order."""
        if not located.live.all():
            raise ValueError("gather needs live keys only")
        from_delta = located.delta >= 0
        parts = Rows.concat(
            [
                self.delta.rows.take(located.delta[from_delta]),
                self.base.take(located.base[~from_delta]),
            ]
        )
        order = np.empty(len(from_delta), dtype=np.int64)
        order[np.flatnonzero(from_delta)] = np.arange(int(from_delta.sum()))
        order[np.flatnonzero(~from_delta)] = int(from_delta.sum()) + np.arange(
            int((~from_delta).sum())
        )
        return parts.take(order)

    def live_rows(self) -> Rows:
        """Every live row (not in key order)."""
        keep = np.ones(len(self.base), dtype=bool)
        keep[self.delta.superseded] = False
        return Rows.concat(
            [
                self.base.take(np.flatnonzero(keep)),
                self.delta.rows.take(np.flatnonzero(~self.delta.tomb)),
            ]
        )

    def group_rows(self, gcodes: np.ndarray, ghashes: np.ndarray) -> Rows:
        """Every live row of the groups ``gcodes`` (string hashes ``ghashes``)."""
        if len(gcodes) == 0:
            return Rows.empty()
        lo, hi = group_hash_range(ghashes.astype(np.uint64))
        wanted = np.unique(gcodes)

        def in_ranges(rows: Rows) -> np.ndarray:
            if len(rows) == 0:
                return np.zeros(0, np.int64)
            start = np.searchsorted(rows.khash, lo, side="left")
            stop = np.where(hi == 0, len(rows), np.searchsorted(rows.khash, hi, side="left"))
            idx = np.unique(
                np.concatenate([np.arange(a, b) for a, b in zip(start, stop, strict=True)])
            )
            # Groups whose hashes share the high 32 bits share a range.
            return idx[np.isin(rows.gcode[idx], wanted)]

        base_idx = in_ranges(self.base)
        base_idx = base_idx[~_member(base_idx, self.delta.superseded)]
        delta_idx = in_ranges(self.delta.rows)
        delta_idx = delta_idx[~self.delta.tomb[delta_idx]]
        return Rows.concat([self.base.take(base_idx), self.delta.rows.take(delta_idx)])

    def due(self, now_ms: int) -> Rows:
        """Every live row with ``deadline <= now_ms``."""
        parts = []
        idx = np.flatnonzero(self.base.deadline <= now_ms)
        if idx.size:
            idx = idx[~_member(idx, self.delta.superseded)]
            parts.append(self.base.take(idx))
        d = self.delta
        parts.append(d.rows.take(np.flatnonzero(~d.tomb & (d.rows.deadline <= now_ms))))
        return Rows.concat(parts)

    def min_deadline(self) -> int:
        """The smallest deadline of a live row, NEVER if none."""
        d = self.delta
        live_deadlines = d.rows.deadline[~d.tomb]
        delta_min = int(live_deadlines.min()) if live_deadlines.size else int(NEVER)
        return min(self._base_min_deadline(), delta_min)

    def _base_min_deadline(self) -> int:
        """The smallest deadline of a base row not superseded: the first such among the base's
        ``earliest`` rows, which every call asks (``next_expiry_ms``); a scan only when the delta
        supersedes all of them."""
        earliest = self.base.earliest
        superseded = self.delta.superseded
        live = earliest[~_member(earliest, superseded)]
        if live.size:
            return int(self.base.deadline[live[0]])
        if len(earliest) == len(self.base):
            return int(NEVER)
        deadlines = self.base.deadline
        if superseded.size:
            live = np.ones(len(deadlines), dtype=bool)
            live[superseded] = False
            deadlines = deadlines[live]
        return int(deadlines.min()) if deadlines.size else int(NEVER)

    def write(self, rows: Rows, tomb: np.ndarray) -> tuple[OffsetTable, np.ndarray]:
        """Put ``rows`` (unique keys, deadlines set) or delete where ``tomb``; return the new table
        and, per row, whether its key had an offset before."""
        n = len(rows)
        if n == 0:
            return self, np.zeros(0, dtype=bool)
        loc = self.locate(rows.khash, rows.gcode, rows.tcode, rows.partition)
        existed = loc.live
        d = self.delta
        in_delta = np.flatnonzero(loc.delta >= 0)
        at = loc.delta[in_delta]

        # Rewrite the delta rows of keys it already holds.
        drow = d.rows
        tomb_col = d.tomb
        if in_delta.size:
            updated = rows if in_delta.size == n else rows.take(in_delta)
            columns = {}
            for f in fields(Rows):
                if f.name == "metadata":
                    continue
                col = getattr(drow, f.name).copy()
                col[at] = getattr(updated, f.name)
                columns[f.name] = col
            meta = drow.metadata
            # Arrow arrays are immutable: splice the new metadata in through a take.
            source = np.arange(len(drow), dtype=np.int64)
            source[at] = len(drow) + np.arange(len(at))
            columns["metadata"] = pa.concat_arrays([meta, updated.metadata]).take(pa.array(source))
            drow = Rows(**columns)
            tomb_col = tomb_col.copy()
            tomb_col[at] = tomb[in_delta]
        # A deleted key the base lacks leaves the delta altogether.
        keep = ~(tomb_col & (d.base_pos < 0))
        base_pos = d.base_pos
        if not keep.all():
            kept = np.flatnonzero(keep)
            drow, base_pos, tomb_col = drow.take(kept), base_pos[kept], tomb_col[kept]

        # Keys the delta does not hold yet: new keys, and base keys now superseded.
        outside = loc.delta < 0
        add = np.flatnonzero(outside & ((loc.base >= 0) | ~tomb))
        add = add[np.argsort(rows.khash[add], kind="stable")]
        new_base_pos = loc.base[add]
        new_tomb = tomb[add]
        merged, new_at = merge_sorted(drow, rows.take(add)) if add.size else (drow, add)
        all_base_pos = np.empty(len(merged), dtype=np.int64)
        all_tomb = np.empty(len(merged), dtype=bool)
        old_at = np.ones(len(merged), dtype=bool)
        old_at[new_at] = False
        all_base_pos[old_at] = base_pos
        all_tomb[old_at] = tomb_col
        all_base_pos[new_at] = new_base_pos
        all_tomb[new_at] = new_tomb

        delta = Delta(merged, all_base_pos, all_tomb)
        # Keep the sorted superseded rows up to date by merging instead of sorting them again:
        # dropped delta rows never supersede a base row, so the old ones all remain.
        old = d.superseded
        new = np.sort(new_base_pos[new_base_pos >= 0])
        if new.size:
            old = np.insert(old, np.searchsorted(old, new), new)
        delta.__dict__["superseded"] = old
        return OffsetTable(self.base, delta), existed

    def needs_compaction(self) -> bool:
        return len(self.delta.rows) > max(COMPACT_MIN_ROWS, len(self.base) // COMPACT_FRACTION)

    def compact(self) -> OffsetTable:
        """The same live rows as a base with an empty delta."""
        keep = np.ones(len(self.base), dtype=bool)
        keep[self.delta.superseded] = False
        base = self.base.take(np.flatnonzero(keep)) if not keep.all() else self.base
        d = self.delta
        fresh = d.rows.take(np.flatnonzero(~d.tomb))
        merged, _ = merge_sorted(base, fresh)
        return OffsetTable.from_base(merged)

    def remap_codes(self, group_map: np.ndarray, topic_map: np.ndarray) -> OffsetTable:
        """A compacted table with codes mapped through ``group_map``/``topic_map`` (old -> new)."""
        table = self.compact()
        base = replace(
            table.base,
            gcode=group_map[table.base.gcode].astype(np.int32),
            tcode=topic_map[table.base.tcode].astype(np.int32),
        )
        return OffsetTable.from_base(base)
