"""Offset records decoded a column at a time with numpy: the fast path of loading a shard.

It reads ``OffsetCommitKey`` v0-v1 with a tombstone or ``OffsetCommitValue`` v0-v3, or v4 with
metadata under 127 bytes and no tagged fields, exactly as ``records.decode_record`` does; every
other record is left to that per-record decoder, which names what is wrong with a corrupt one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_BIG_ENDIAN = {2: ">i2", 4: ">i4", 8: ">i8"}


class OffsetColumns(NamedTuple):
    """The records the column decoder read (``decoded`` rows of the input, in order)."""

    #: Per input row: read here (True) or left to the per-record decoder (False).
    decoded: np.ndarray
    group_id: pa.Array
    topic: pa.Array
    partition: np.ndarray
    #: Null on tombstones, as are the other value columns.
    offset: pa.Array
    leader_epoch: pa.Array
    metadata: pa.Array
    commit_timestamp_ms: pa.Array
    expire_timestamp_ms: pa.Array


def binary_parts(column: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(data bytes, start and length of each value, validity) of a binary or string column."""
    kind = column.type
    if pa.types.is_large_binary(kind) or pa.types.is_large_string(kind):
        offset_type: type = np.int64
    elif pa.types.is_binary(kind) or pa.types.is_string(kind):
        offset_type = np.int32  # read as they are: a cast to large_binary would copy them
    else:
        column = column.cast(pa.large_binary())
        offset_type = np.int64
    n = len(column)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return np.zeros(0, np.uint8), empty, empty, np.zeros(0, bool)
    _validity, offsets_buf, data_buf = column.buffers()
    width = np.dtype(offset_type).itemsize
    offsets = np.frombuffer(
        offsets_buf, offset_type, count=n + 1, offset=column.offset * width
    ).astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    valid = np.asarray(column.is_valid()) if column.null_count else np.ones(n, dtype=bool)
    return data, offsets[:-1], offsets[1:] - offsets[:-1], valid


def big_endian_ints(data: np.ndarray, at: np.ndarray, width: int, ok: np.ndarray) -> np.ndarray:
    """Big-endian signed ints of ``width`` bytes at positions ``at`` (rows not ``ok`` read 0)."""
    if not len(at) or not len(data):
        return np.zeros(len(at), np.int64)
    at = np.where(ok, at, 0)
    if len(data) < width:
        return np.zeros(len(at), np.int64)
    at = np.minimum(at, len(data) - width)
    raw = data[at[:, None] + np.arange(width)]
    return np.ascontiguousarray(raw).view(_BIG_ENDIAN[width]).ravel().astype(np.int64)


def _byte(data: np.ndarray, at: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The unsigned byte at positions ``at`` (rows not ``ok`` read 0)."""
    if not len(at) or not len(data):
        return np.zeros(len(at), np.int64)
    return np.where(ok, data[np.clip(np.where(ok, at, 0), 0, len(data) - 1)], 0).astype(np.int64)


def _strings(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """UTF-8 strings from byte slices; raises ``pa.ArrowInvalid`` on invalid UTF-8."""
    n = len(starts)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        index = np.repeat(starts - offsets[:-1], lengths) + np.arange(total)
        buffer = data[index]
    else:
        buffer = np.zeros(0, np.uint8)
    strings = pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(buffer)]
    )
    strings.validate(full=True)
    return strings.cast(pa.string())


def decode_offset_commit_columns(keys: pa.Array, values: pa.Array) -> OffsetColumns:
    """Decode the records of ``keys``/``values`` (binary; null value: tombstone) whose layout
    this decoder knows."""
    kdata, kstart, klen, kvalid = binary_parts(keys)
    ok = kvalid & (klen >= 4)
    version = big_endian_ints(kdata, kstart, 2, ok)
    ok &= (version == 0) | (version == 1)
    glen = big_endian_ints(kdata, kstart + 2, 2, ok)
    ok &= (glen >= 0) & (glen + 6 <= klen)
    tpos = kstart + 4 + np.where(ok, glen, 0)
    tlen = big_endian_ints(kdata, tpos, 2, ok)
    ok &= (tlen >= 0) & (glen + tlen + 10 == klen)
    ppos = tpos + 2 + np.where(ok, tlen, 0)
    partition = big_endian_ints(kdata, ppos, 4, ok)

    vdata, vstart, vlen, has_value = binary_parts(values)
    vok = has_value & (vlen >= 12)
    vversion = big_endian_ints(vdata, vstart, 2, vok)
    vok &= (vversion >= 0) & (vversion <= 4)
    is_v4 = vversion == 4
    has_epoch = vversion >= 3
    offset = big_endian_ints(vdata, vstart + 2, 8, vok)
    vok &= ~has_epoch | (vlen >= 16)
    epoch = np.where(has_epoch, big_endian_ints(vdata, vstart + 10, 4, vok & has_epoch), -1)
    # The metadata's length: an int16 after the epoch (v3) or the offset (v0-v2); in the
    # flexible v4 a compact string's unsigned varint (length + 1), read here when it is one byte
    # (metadata under 127 bytes) and not null.
    mlen_at = vstart + np.where(has_epoch, 14, 10)
    varint = _byte(vdata, mlen_at, vok & is_v4)
    vok &= ~is_v4 | ((varint >= 1) & (varint < 0x80))
    mlen = np.where(is_v4, varint - 1, big_endian_ints(vdata, mlen_at, 2, vok & ~is_v4))
    mstart = mlen_at + np.where(is_v4, 1, 2)
    # Bytes besides the metadata, by version; v4 ends with an empty tagged-field section (0).
    fixed = np.select([is_v4, vversion == 3, vversion == 1], [24, 24, 28], 20)
    vok &= (mlen >= 0) & (mlen + fixed == vlen)
    vok &= ~is_v4 | (_byte(vdata, vstart + vlen - 1, vok & is_v4) == 0)
    ts_at = mstart + np.where(vok, mlen, 0)
    commit_ts = big_endian_ints(vdata, ts_at, 8, vok)
    expire_ts = big_endian_ints(vdata, ts_at + 8, 8, vok & (vversion == 1))
    decoded = ok & (~has_value | vok)

    rows = np.flatnonzero(decoded)
    try:
        group_id = _strings(kdata, (kstart + 4)[rows], glen[rows])
        topic = _strings(kdata, (tpos + 2)[rows], tlen[rows])
        live = has_value[rows]
        metadata = _strings(vdata, np.where(live, mstart[rows], 0), np.where(live, mlen[rows], 0))
    except pa.ArrowInvalid:
        # Invalid UTF-8: the per-record decoder names the record at fault.
        return _nothing_decoded(len(keys))
    tomb = ~live
    has_expire = live & (vversion[rows] == 1) & (expire_ts[rows] != -1)
    return OffsetColumns(
        decoded=decoded,
        group_id=group_id,
        topic=topic,
        partition=partition[rows].astype(np.int32),
        offset=pa.array(offset[rows], pa.int64(), mask=tomb),
        leader_epoch=pa.array(epoch[rows].astype(np.int32), pa.int32(), mask=tomb),
        metadata=_null_where(metadata, tomb),
        commit_timestamp_ms=pa.array(commit_ts[rows], pa.int64(), mask=tomb),
        expire_timestamp_ms=pa.array(expire_ts[rows], pa.int64(), mask=~has_expire),
    )


def _null_where(strings: pa.Array, mask: np.ndarray) -> pa.Array:
    if not mask.any():
        return strings
    return pc.if_else(pa.array(mask), pa.scalar(None, pa.string()), strings)


def _nothing_decoded(n: int) -> OffsetColumns:
    no_strings = pa.array([], pa.string())
    no_ints = pa.array([], pa.int64())
    return OffsetColumns(
        decoded=np.zeros(n, dtype=bool),
        group_id=no_strings,
        topic=no_strings,
        partition=np.zeros(0, np.int32),
        offset=no_ints,
        leader_epoch=pa.array([], pa.int32()),
        metadata=no_strings,
        commit_timestamp_ms=no_ints,
        expire_timestamp_ms=no_ints,
    )
