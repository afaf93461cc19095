"""Offset record keys (v1) and values (v1 with an expire timestamp, else v3) encoded a column at
a time (layouts: ``state.formats.records``). Callers pass values that fit, as the request checks
guarantee."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.formats.record_column_decoding import binary_parts
from state.formats.records import OFFSET_COMMIT_KEY_VERSION

#: A big-endian integer column (or one int for every row), or a string column (int16 length,
#: UTF-8).
Field = np.ndarray | pa.Array | int

_BIG_ENDIAN = {"i2": ">i2", "i4": ">i4", "i8": ">i8"}
_PACK = {
    kind: struct.Struct(code).pack for kind, code in (("i2", ">h"), ("i4", ">i"), ("i8", ">q"))
}
#: Up to this many rows, packing each row costs less than the column kernels' fixed cost (~2x
#: less at 70 rows); from a few hundred, the kernels cost several times less.
_FEW_ROWS = 100


def _concat(n: int, parts: list[tuple[str, Field]]) -> pa.Array:
    """Per row, the concatenation of ``parts`` as a binary array. A part is ("i2"|"i4"|"i8", ints
    or one int for all rows) or ("str", strings; a null written as the empty string)."""
    if n <= _FEW_ROWS:
        return _concat_rows(n, parts)
    columns: list[pa.Array | pa.Scalar] = []
    for kind, values in parts:
        if kind == "str":
            strings = _binary(values)  # type: ignore[arg-type]
            columns.append(_fixed_width(binary_parts(strings)[2], ">i2"))
            columns.append(strings)
        elif isinstance(values, int):
            columns.append(pa.scalar(_PACK[kind](values), pa.binary()))
        else:
            columns.append(_fixed_width(values, _BIG_ENDIAN[kind]))
    return pc.binary_join_element_wise(*columns, b"")


def _concat_rows(n: int, parts: list[tuple[str, Field]]) -> pa.Array:
    """``_concat`` a row at a time."""
    columns: list[list[bytes]] = []
    for kind, values in parts:
        if kind == "str":
            texts = values.to_numpy(zero_copy_only=False).tolist()  # type: ignore[union-attr]
            # A batch's rows repeat few groups and topics: each distinct one encoded once.
            encoded = {text: _string_field(text) for text in set(texts)}
            columns.append([encoded[text] for text in texts])
        elif isinstance(values, int):
            columns.append([_PACK[kind](values)] * n)
        else:
            pack = _PACK[kind]
            columns.append([pack(v) for v in np.asarray(values).tolist()])
    return pa.array([b"".join(row) for row in zip(*columns, strict=True)], pa.binary())


def _string_field(text: str | None) -> bytes:
    """A string as its int16 length and UTF-8 bytes (a null as the empty string)."""
    raw = b"" if text is None else text.encode()
    return _PACK["i2"](len(raw)) + raw


def _binary(strings: pa.Array) -> pa.Array:
    """A string column as binary (zero-copy), nulls empty."""
    if strings.null_count:
        strings = pc.fill_null(strings, "")
    return strings.cast(pa.binary())


def _fixed_width(values: np.ndarray, dtype: str) -> pa.Array:
    """Integers as binary values of their big-endian bytes."""
    raw = np.ascontiguousarray(np.asarray(values).astype(dtype))
    fixed = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(raw.dtype.itemsize), len(raw), [None, pa.py_buffer(raw)]
    )
    return fixed.cast(pa.binary())


def offset_commit_keys(groups: pa.Array, topics: pa.Array, partitions: np.ndarray) -> pa.Array:
    """The ``OffsetCommitKey`` (version 1) of each row; null strings as empty ones."""
    n = len(partitions)
    return _concat(
        n,
        [
            ("i2", OFFSET_COMMIT_KEY_VERSION),
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
        meta: tuple[str, Field] = ("str", metadata if i.size == n else metadata.take(pa.array(i)))
        # v3: offset, leaderEpoch, metadata, commitTimestamp; v1 has no leader epoch and ends
        # with the expire timestamp.
        if version == 3:
            fields = [("i8", offsets[i]), ("i4", leader_epochs[i]), meta, ("i8", commit_ts[i])]
        else:
            fields = [("i8", offsets[i]), meta, ("i8", commit_ts[i]), ("i8", expire_ts[i])]
        pieces.append(_concat(i.size, [("i2", version), *fields]))
        rows.append(i)
    if tombstone.any():
        i = np.flatnonzero(tombstone)
        pieces.append(pa.nulls(i.size, pa.binary()))
        rows.append(i)
    if not pieces:
        return pa.array([], pa.binary())
    if len(pieces) == 1:  # one version, or all tombstones: already in row order
        return pieces[0]
    placed = np.concatenate(rows)
    order = np.empty(n, dtype=np.int64)
    order[placed] = np.arange(n)
    return pa.concat_arrays(pieces).take(pa.array(order))
