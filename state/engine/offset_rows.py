"""Offset rows as parallel columns (``Rows``), and finding (``find``) and merging
(``merge_sorted``) rows sorted by ``khash``; equal hashes do not imply equal keys, so every
lookup compares the key (group code, topic code, partition) itself."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property

import numpy as np
import pyarrow as pa

#: Rows of smallest deadline ``Rows.earliest`` keeps.
EARLIEST = 64


@dataclass(frozen=True)
class Rows:
    """Offset rows as parallel columns; ``metadata`` is an Arrow large_string array."""

    khash: np.ndarray  # uint64, the sort key
    gcode: np.ndarray  # int32
    tcode: np.ndarray  # int32
    partition: np.ndarray  # int32
    offset: np.ndarray  # int64
    leader_epoch: np.ndarray  # int32
    metadata: pa.Array  # large_string, no nulls
    commit_ts: np.ndarray  # int64
    expire_ts: np.ndarray  # int64, NO_EXPIRE when none
    deadline: np.ndarray  # int64, NEVER when it cannot expire

    def __len__(self) -> int:
        return len(self.khash)

    def take(self, idx: np.ndarray) -> Rows:
        values = {name: getattr(self, name)[idx] for name in _NUMPY_FIELDS}
        return Rows(metadata=self.metadata.take(pa.array(idx, pa.int64())), **values)

    @staticmethod
    def concat(parts: list[Rows]) -> Rows:
        values = {}
        for f in fields(Rows):
            cols = [getattr(p, f.name) for p in parts]
            values[f.name] = (
                pa.concat_arrays(cols) if f.name == "metadata" else np.concatenate(cols)
            )
        return Rows(**values)

    @staticmethod
    def empty() -> Rows:
        return Rows(
            khash=np.zeros(0, np.uint64),
            gcode=np.zeros(0, np.int32),
            tcode=np.zeros(0, np.int32),
            partition=np.zeros(0, np.int32),
            offset=np.zeros(0, np.int64),
            leader_epoch=np.zeros(0, np.int32),
            metadata=pa.array([], pa.large_string()),
            commit_ts=np.zeros(0, np.int64),
            expire_ts=np.zeros(0, np.int64),
            deadline=np.zeros(0, np.int64),
        )

    def with_deadline(self, deadline: np.ndarray) -> Rows:
        return replace(self, deadline=deadline)

    @cached_property
    def earliest(self) -> np.ndarray:
        """Indices of the ``EARLIEST`` rows of smallest ``deadline`` (all rows when fewer), in
        deadline order: found once per rows (a shard's base lives for many calls), so that the
        next expiry costs a lookup among them instead of a scan of every row."""
        n = len(self)
        if n <= EARLIEST:
            return np.argsort(self.deadline, kind="stable")
        some = np.argpartition(self.deadline, EARLIEST - 1)[:EARLIEST]
        return some[np.argsort(self.deadline[some], kind="stable")]

    def sorted_by_key(self) -> Rows:
        """The rows in ``khash`` order (stable)."""
        order = np.argsort(self.khash, kind="stable")
        return self.take(order)


#: The fields of ``Rows`` held as numpy arrays (all but ``metadata``).
_NUMPY_FIELDS = tuple(f.name for f in fields(Rows) if f.name != "metadata")


def find(
    rows: Rows, khash: np.ndarray, gcode: np.ndarray, tcode: np.ndarray, partition: np.ndarray
) -> np.ndarray:
    """Index in ``rows`` (sorted by ``khash``) of each queried key, -1 where absent."""
    result = np.full(len(khash), -1, dtype=np.int64)
    n = len(rows)
    if n == 0 or len(khash) == 0:
        return result
    # Searching in key order keeps a large table's memory access local.
    order = np.argsort(khash, kind="stable")
    lo = np.empty(len(khash), dtype=np.int64)
    lo[order] = np.searchsorted(rows.khash, khash[order], side="left")
    at = np.minimum(lo, n - 1)
    same_hash = rows.khash[at] == khash
    # A run of equal hashes (a collision) is rare: the hash has 64 bits, 32 within a group.
    after = np.minimum(lo + 1, n - 1)
    run = same_hash & (lo + 1 < n) & (rows.khash[after] == khash)
    single = np.flatnonzero(same_hash & ~run)
    if single.size:
        at = lo[single]
        match = (
            (rows.gcode[at] == gcode[single])
            & (rows.tcode[at] == tcode[single])
            & (rows.partition[at] == partition[single])
        )
        result[single[match]] = at[match]
    for i in np.flatnonzero(run):
        j = int(lo[i])
        while j < n and rows.khash[j] == khash[i]:
            if (
                rows.gcode[j] == gcode[i]
                and rows.tcode[j] == tcode[i]
                and rows.partition[j] == partition[i]
            ):
                result[i] = j
                break
            j += 1
    return result


def merge_sorted(old: Rows, new: Rows) -> tuple[Rows, np.ndarray]:
    """``old`` and ``new`` (each sorted by khash) merged, and where ``new``'s rows went."""
    if len(new) == 0:
        return old, np.zeros(0, np.int64)
    if len(old) == 0:
        return new, np.arange(len(new), dtype=np.int64)
    new_at = np.searchsorted(old.khash, new.khash, side="right") + np.arange(len(new))
    perm = np.empty(len(old) + len(new), dtype=np.int64)
    is_new = np.zeros(len(perm), dtype=bool)
    is_new[new_at] = True
    perm[new_at] = len(old) + np.arange(len(new))
    perm[~is_new] = np.arange(len(old))
    return Rows.concat([old, new]).take(perm), new_at
