"""A shard's state as a base blob (``state_codec``) and the log of the records applied since.

The value-state operator keeps each shard as a base, rewritten only now and then; a log of one
chunk per call that changed the shard (its offset records' key and value bytes,
``encode_log_chunk``), which replayed on the base gives the state; and a head naming the state
(its stamp), its base and the log's length. When the log outgrows
``max(base bytes, LOG_FLOOR_BYTES)`` (``rewrite_base``) the state becomes a new base.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from state.engine.loading import positioned_record_frame_of
from state.engine.shard_state import ShardState, replay_records
from state.engine.state_codec import StateFormatError
from state.formats.records import RecordFormatError

#: The log may hold this many bytes of chunks, whatever the base's size, before a base rewrite.
#: It bounds what a reader replays for a small shard (~1,000 records); a large shard's log grows
#: to its base's size.
LOG_FLOOR_BYTES = 64 * 1024

# A chunk: magic, record count n, key bytes, value bytes; then the keys' and the values' n + 1
# offsets (int32, little-endian, from 0), the values' validity bitmap (ceil(n / 8) bytes, least
# significant bit first; a cleared bit is a tombstone), the key bytes and the value bytes. Arrow's
# own buffers of the two binary columns, without an IPC stream's ~500 bytes of framing, which
# would outweigh the records of a call that commits one offset.
_CHUNK_MAGIC = b"SCOL"
_CHUNK_HEADER = struct.Struct(">4sIII")


def _parts(column: pa.Array | pa.ChunkedArray, n: int) -> tuple[np.ndarray, bytes]:
    """A binary column's offsets from 0 and the bytes they index."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    array = array.cast(pa.binary())
    if not n:
        return np.zeros(1, "<i4"), b""
    _, offsets_buffer, data = array.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, n + 1, array.offset * 4)
    start, end = int(offsets[0]), int(offsets[-1])
    # Only the bytes the column's rows index (a sliced column's buffer holds more).
    payload = data.slice(start, end - start).to_pybytes() if data is not None else b""
    return (offsets - start).astype("<i4"), payload


def encode_log_chunk(records: pa.Table) -> bytes:
    """The log chunk of a call's offset records (a record frame, at least ``key`` and
    ``value``; a null value is a tombstone), in their order."""
    n = records.num_rows
    key_offsets, key_data = _parts(records["key"], n)
    value_offsets, value_data = _parts(records["value"], n)
    valid = records["value"].is_valid().to_numpy(zero_copy_only=False)
    return b"".join(
        [
            _CHUNK_HEADER.pack(_CHUNK_MAGIC, n, len(key_data), len(value_data)),
            key_offsets.tobytes(),
            value_offsets.tobytes(),
            np.packbits(valid, bitorder="little").tobytes(),
            key_data,
            value_data,
        ]
    )


def _decode_chunk(chunk: bytes) -> tuple[pa.Array, pa.Array]:
    """The (keys, values) binary columns of a chunk, checked."""
    view = memoryview(chunk)
    if len(view) < _CHUNK_HEADER.size:
        raise StateFormatError(f"corrupt shard log chunk: {len(view)} bytes")
    magic, n, key_bytes, value_bytes = _CHUNK_HEADER.unpack_from(view, 0)
    sizes = [4 * (n + 1), 4 * (n + 1), (n + 7) // 8, key_bytes, value_bytes]
    if magic != _CHUNK_MAGIC or _CHUNK_HEADER.size + sum(sizes) != len(view):
        raise StateFormatError(f"corrupt shard log chunk: header {magic!r}, {n} records")
    buffer = pa.py_buffer(chunk)
    at, parts = _CHUNK_HEADER.size, []
    for size in sizes:
        parts.append(buffer.slice(at, size))
        at += size
    key_offsets, value_offsets, validity, key_data, value_data = parts
    try:
        keys = pa.Array.from_buffers(pa.binary(), n, [None, key_offsets, key_data])
        values = pa.Array.from_buffers(pa.binary(), n, [validity, value_offsets, value_data])
        keys.validate(full=True)
        values.validate(full=True)
    except (pa.ArrowInvalid, ValueError) as e:
        raise StateFormatError(f"corrupt shard log chunk: {e}") from e
    return keys, values


def replay_log_chunk(state: ShardState, chunk: bytes) -> ShardState:
    """``state`` with the records of ``chunk`` (``encode_log_chunk``) replayed in order."""
    return replay_log_chunks_on(state, [chunk])


def replay_log_chunks_on(state: ShardState, chunks: Iterable[bytes]) -> ShardState:
    """``state`` with the records of ``chunks`` replayed in order, as one replay.

    Raises ``StateFormatError`` when a chunk is not a log chunk or holds a record this code
    cannot read: the log is the state, and skipping a record would lose an offset."""
    decoded = [_decode_chunk(chunk) for chunk in chunks]
    if not decoded:
        return state
    keys = pa.concat_arrays([k for k, _ in decoded])
    values = pa.concat_arrays([v for _, v in decoded])

    def unreadable(error: RecordFormatError) -> None:
        raise StateFormatError(f"corrupt shard log chunk: {error}") from error

    frame, _, _ = positioned_record_frame_of(keys, values, unreadable)
    if frame.num_rows != len(keys):  # keys of a kind a loader skips: not written by this code
        raise StateFormatError(
            f"corrupt shard log chunk: {len(keys) - frame.num_rows} records of unknown kinds"
        )
    return replay_records(state, frame) if frame.num_rows else state


def rewrite_base(base_bytes: int, log_bytes: int) -> bool:
    """Whether a log of ``log_bytes`` (with the chunk about to be added) should be folded into a
    new base instead, for a base of ``base_bytes``."""
    return log_bytes > max(base_bytes, LOG_FLOOR_BYTES)
