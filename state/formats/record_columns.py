"""Offset record keys (v1) and values (v1 with an expire timestamp, else v3) encoded a column at
a time (layouts: ``state.formats.records``). Callers pass values that fit, as the request checks
guarantee."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from state.formats.record_column_decoding import binary_parts
from state.formats.records import OFFSET_COMMIT_KEY_VERSION

#: A fixed-width big-endian integer column, or a string column (int16 length, UTF-8).
Field = np.ndarray | pa.Array


def _concat(n: int, parts: list[tuple[str, Field]]) -> pa.Array:
    """Per row, the concatenation of ``parts`` as a binary array. A part is ("i2"|"i4"|"i8", ints)
    or ("str", strings)."""
    widths: list[np.ndarray] = []
    prepared: list[tuple[str, object]] = []
    for kind, values in parts:
        if kind == "str":
            data, starts, lengths, valid = binary_parts(values)  # type: ignore[arg-type]
            lengths = np.where(valid, lengths, 0)  # a null string is written empty
            prepared.append(("len", lengths))
            widths.append(np.full(n, 2, np.int64))
            prepared.append(("bytes", (data, starts, lengths)))
            widths.append(lengths)
        else:
            prepared.append((kind, values))
            widths.append(np.full(n, int(kind[1]), np.int64))
    total = np.sum(widths, axis=0) if widths else np.zeros(n, np.int64)
    ends = np.cumsum(total)
    out = np.zeros(int(ends[-1]) if n else 0, dtype=np.uint8)
    at = ends - total  # where the next field of each row goes
    for (kind, values), width in zip(prepared, widths, strict=True):
        if kind == "bytes":
            data, starts, lengths = values  # type: ignore[misc]
            nz = lengths > 0
            if nz.any():
                lens = lengths[nz]
                step = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
                out[np.repeat(at[nz], lens) + step] = data[np.repeat(starts[nz], lens) + step]
        else:
            size = 2 if kind == "len" else int(kind[1])
            dtype = {2: ">i2", 4: ">i4", 8: ">i8"}[size]
            raw = np.asarray(values).astype(dtype).view(np.uint8).reshape(n, size)
            out[(at[:, None] + np.arange(size)).ravel()] = raw.ravel()
        at = at + width
    offsets = np.concatenate([[0], ends]).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def offset_commit_keys(groups: pa.Array, topics: pa.Array, partitions: np.ndarray) -> pa.Array:
    """The ``OffsetCommitKey`` (version 1) of each row; null strings as empty ones."""
    n = len(partitions)
    return _concat(
        n,
        [
            ("i2", np.full(n, OFFSET_COMMIT_KEY_VERSION, np.int16)),
            ("str", groups),
            ("str", topics),
            ("i4", partitions),
        ],
    )


def offset_commit_values(
    offsets: np.ndarray,
    leader_epochs: np.ndarray,
    metadata: pa.Array,
    commit_ts: np.ndarray,
    expire_ts: np.ndarray,
    tombstone: np.ndarray,
) -> pa.Array:
    """The ``OffsetCommitValue`` of each row: v1 where ``expire_ts != -1``, else v3; null where
    ``tombstone``; null metadata as empty."""
    n = len(offsets)
    v1 = (expire_ts != -1) & ~tombstone
    v3 = ~v1 & ~tombstone
    pieces: list[pa.Array] = []
    rows: list[np.ndarray] = []
    for version, mask in ((3, v3), (1, v1)):
        if not mask.any():
            continue
        i = np.flatnonzero(mask)
        meta: tuple[str, Field] = ("str", metadata.take(pa.array(i)))
        # v3: offset, leaderEpoch, metadata, commitTimestamp; v1 has no leader epoch and ends
        # with the expire timestamp.
        if version == 3:
            fields = [("i8", offsets[i]), ("i4", leader_epochs[i]), meta, ("i8", commit_ts[i])]
        else:
            fields = [("i8", offsets[i]), meta, ("i8", commit_ts[i]), ("i8", expire_ts[i])]
        pieces.append(_concat(i.size, [("i2", np.full(i.size, version, np.int16)), *fields]))
        rows.append(i)
    if tombstone.any():
        i = np.flatnonzero(tombstone)
        pieces.append(pa.nulls(i.size, pa.binary()))
        rows.append(i)
    if not pieces:
        return pa.array([], pa.binary())
    placed = np.concatenate(rows)
    order = np.empty(n, dtype=np.int64)
    order[placed] = np.arange(n)
    return pa.concat_arrays(pieces).take(pa.array(order))
