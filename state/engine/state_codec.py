"""The shard state blob: a versioned, language-neutral encoding of ``ShardState`` (never pickle).

Layout (format version 2; integers big-endian)::

    offset  size  field
    0       8     magic b"SCOSHARD"
    8       2     format version (uint16) = 2
    10      2     section count (uint16) = 4
    12      4     shard id (int32)
    16      8     offsets retention (ms) the stored deadlines were computed with (int64)
    24      8     stamp (uint64): 0, or a number the writer chose to name this blob (below)
    32      32    byte length of each section (4 x uint64)
    64      ...   the sections, in order, each an Arrow IPC stream padded with zeros to a
                  multiple of 8 bytes: groups, topics, base, delta (``_SCHEMAS``)

Groups and topics have a row per code (``by_hash``: the codes in hash order); base and delta
hold ``OffsetTable``'s rows in key-hash order. ``hash`` is ``hashing.string_hash``; the key hash
is computed on decoding, not stored. The stamp lets a reader that keeps decoded states recognise
a blob from its header (``blob_stamp``): never give two different blobs one stamp. Decoding
views the columns in place; encoding reuses the bytes of sections whose part did not change.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa

from state.engine.columns import arrow_column, numpy_column
from state.engine.groups import GroupTable, StringDict
from state.engine.hashing import key_hash
from state.engine.offset_rows import Rows
from state.engine.offset_table import Delta, OffsetTable
from state.engine.shard_state import ShardState

MAGIC = b"SCOSHARD"
FORMAT_VERSION = 2
_SECTIONS = ("groups", "topics", "base", "delta")
_HEADER = struct.Struct(">8sHHiqQ4Q")
_STAMP = struct.Struct(">Q")
_STAMP_AT = 24


class StateFormatError(ValueError):
    """The bytes are not a shard state blob this code can read."""


_DICT_FIELDS = [
    pa.field("name", pa.large_string(), nullable=False),
    pa.field("hash", pa.uint64(), nullable=False),
    pa.field("by_hash", pa.int64(), nullable=False),
]
_GROUPS_SCHEMA = pa.schema(
    [
        *_DICT_FIELDS,
        pa.field("offset_count", pa.int64(), nullable=False),
        pa.field("has_metadata", pa.bool_(), nullable=False),
        pa.field("metadata", pa.large_binary()),
        pa.field("generation", pa.int32(), nullable=False),
        pa.field("members", pa.int32(), nullable=False),
        pa.field("state_ts", pa.int64(), nullable=False),
    ]
)
_TOPICS_SCHEMA = pa.schema(_DICT_FIELDS)
_ROW_TYPES = {
    "gcode": pa.int32(),
    "tcode": pa.int32(),
    "partition": pa.int32(),
    "offset": pa.int64(),
    "leader_epoch": pa.int32(),
    "metadata": pa.large_string(),
    "commit_ts": pa.int64(),
    "expire_ts": pa.int64(),
    "deadline": pa.int64(),
}
_ROW_FIELDS = [pa.field(n, t, nullable=False) for n, t in _ROW_TYPES.items()]
_DELTA_FIELDS = [
    pa.field("base_pos", pa.int64(), nullable=False),
    pa.field("tomb", pa.bool_(), nullable=False),
]
_BASE_SCHEMA = pa.schema(_ROW_FIELDS)
_DELTA_SCHEMA = pa.schema([*_ROW_FIELDS, *_DELTA_FIELDS])
_SCHEMAS = {
    "groups": _GROUPS_SCHEMA,
    "topics": _TOPICS_SCHEMA,
    "base": _BASE_SCHEMA,
    "delta": _DELTA_SCHEMA,
}


#: LZ4 (the stream says so to readers): a blob crosses the JVM and RocksDB every micro-batch, and
#: plain blobs of 10M keys outgrew the JVM's direct memory; zstd cost more to decode than it saved.
#: No threads, writing or reading: Arrow's pool cost more than it saved (a 22k-offset blob encoded
#: in 1.06 ms against 1.47, decoded in 1.31 against 1.71; 400k offsets: 9.5 against 10.5), and a
#: task's cores are Spark's.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4", use_threads=False)
_IPC_READ = pa.ipc.IpcReadOptions(use_threads=False)


def _ipc(table: pa.Table) -> bytes | pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _dict_columns(d: StringDict) -> list[pa.Array]:
    return [d.names, pa.array(d.hashes, pa.uint64()), pa.array(d.by_hash, pa.int64())]


def _rows_columns(rows: Rows) -> list[pa.Array]:
    """The ``_ROW_TYPES`` columns of ``rows`` (not the key hash)."""
    return [
        rows.metadata if name == "metadata" else pa.array(getattr(rows, name), kind)
        for name, kind in _ROW_TYPES.items()
    ]


def encode_state(state: ShardState, stamp: int = 0) -> bytes:
    """The blob of ``state``, named by ``stamp`` (a uint64; 0: no name)."""
    return encode_state_kept(state, stamp)[0]


def encode_state_kept(state: ShardState, stamp: int = 0) -> tuple[bytes, ShardState]:
    """``encode_state``, and ``state`` as if decoded from that blob, so that encoding a state
    derived from it reuses every section that did not change."""
    if not 0 <= stamp < 1 << 64:
        raise ValueError(f"stamp must be a uint64, got {stamp}")
    g, offsets = state.groups, state.offsets
    parts = {
        "groups": (
            g,
            lambda: pa.Table.from_arrays(
                [
                    *_dict_columns(g.names),
                    pa.array(g.offset_count, pa.int64()),
                    pa.array(g.has_metadata, pa.bool_()),
                    g.metadata,
                    pa.array(g.generation, pa.int32()),
                    pa.array(g.members, pa.int32()),
                    pa.array(g.state_ts, pa.int64()),
                ],
                schema=_GROUPS_SCHEMA,
            ),
        ),
        "topics": (
            state.topics,
            lambda: pa.Table.from_arrays(_dict_columns(state.topics), schema=_TOPICS_SCHEMA),
        ),
        "base": (
            offsets.base,
            lambda: pa.Table.from_arrays(_rows_columns(offsets.base), schema=_BASE_SCHEMA),
        ),
        "delta": (
            offsets.delta,
            lambda: pa.Table.from_arrays(
                [
                    *_rows_columns(offsets.delta.rows),
                    pa.array(offsets.delta.base_pos, pa.int64()),
                    pa.array(offsets.delta.tomb, pa.bool_()),
                ],
                schema=_DELTA_SCHEMA,
            ),
        ),
    }
    sections: list[bytes | pa.Buffer | memoryview] = []
    for name in _SECTIONS:
        owner, build = parts[name]
        cached = state.blob_sections.get(name)
        if cached is not None and cached[0] is owner:
            sections.append(cached[1])
        else:
            sections.append(_ipc(build()))
    lengths = [_padded(len(memoryview(s))) for s in sections]
    header = _HEADER.pack(
        MAGIC,
        FORMAT_VERSION,
        len(_SECTIONS),
        state.shard_id,
        state.retention_ms,
        stamp,
        *lengths,
    )
    chunks: list[bytes | pa.Buffer | memoryview] = [header]
    for section, length in zip(sections, lengths, strict=True):
        chunks.append(section)
        pad = length - len(memoryview(section))
        if pad:
            chunks.append(b"\0" * pad)
    blob = b"".join(chunks)
    view = memoryview(blob)
    kept: dict[str, tuple[object, memoryview]] = {}
    at = _HEADER.size
    for name, length in zip(_SECTIONS, lengths, strict=True):
        kept[name] = (parts[name][0], view[at : at + length])
        at += length
    return blob, replace(state, blob_sections=kept)


def _padded(n: int) -> int:
    """``n`` rounded up to a multiple of 8, so that sections' fixed-width columns align."""
    return (n + 7) // 8 * 8


def blob_stamp(blob: bytes | bytearray | memoryview) -> int:
    """The stamp in ``blob``'s header (0: none), reading nothing else."""
    view = memoryview(blob)
    if len(view) < _HEADER.size or bytes(view[:8]) != MAGIC:
        return 0
    return int(_STAMP.unpack_from(view, _STAMP_AT)[0])


def decode_state(
    blob: bytes | bytearray | memoryview,
    known: Callable[[int], ShardState | None] | None = None,
) -> ShardState:
    """The state encoded in ``blob``, whose arrays may view it (keep it unchanged).
    ``StateFormatError`` for bytes that are not a blob of ``FORMAT_VERSION``.

    ``known(shard_id)``: a state of the shard decoded or encoded before (a worker's), or None.
    Its base is reused when the blob's base section holds the bytes that base was read from or
    written as: decoding a base rewritten without a compaction since costs the delta and the
    dictionaries, not the base, which is most of the shard."""
    view = memoryview(blob)
    if len(view) < 12 or bytes(view[:8]) != MAGIC:
        raise StateFormatError("not a shard state blob (bad magic)")
    version, count = struct.unpack_from(">HH", view, 8)
    if version != FORMAT_VERSION:
        raise StateFormatError(
            f"shard state blob format version {version} is not supported "
            f"(this code reads version {FORMAT_VERSION})"
        )
    if len(view) < _HEADER.size or count != len(_SECTIONS):
        raise StateFormatError(
            f"corrupt shard state blob: header of {len(view)} bytes, {count} sections"
        )
    _, _, _, shard_id, retention_ms, _, *lengths = _HEADER.unpack_from(view, 0)
    if _HEADER.size + sum(lengths) != len(view):
        raise StateFormatError(
            f"corrupt shard state blob: sections of {sum(lengths)} bytes in {len(view)} bytes"
        )
    buffer = pa.py_buffer(blob)
    tables: dict[str, pa.Table] = {}
    raw: dict[str, memoryview] = {}
    at = _HEADER.size
    for name, length in zip(_SECTIONS, lengths, strict=True):
        raw[name] = view[at : at + length]
        at += length
    same_base = _same_base(known(shard_id) if known else None, shard_id, raw["base"])
    at = _HEADER.size
    for name, length in zip(_SECTIONS, lengths, strict=True):
        if name == "base" and same_base is not None:
            at += length
            continue
        try:
            table = pa.ipc.open_stream(buffer.slice(at, length), options=_IPC_READ).read_all()
        except (pa.ArrowInvalid, OSError) as e:
            raise StateFormatError(f"corrupt shard state blob: section {name}: {e}") from e
        if not table.schema.equals(_SCHEMAS[name]):
            raise StateFormatError(
                f"corrupt shard state blob: section {name} has schema {table.schema}"
            )
        tables[name] = table
        at += length

    g = tables["groups"]
    groups = GroupTable(
        _string_dict(g),
        numpy_column(g, "offset_count"),
        numpy_column(g, "has_metadata"),
        arrow_column(g, "metadata"),
        numpy_column(g, "generation"),
        numpy_column(g, "members"),
        numpy_column(g, "state_ts"),
    )
    topics = _string_dict(tables["topics"])
    if same_base is not None and not _extends(groups.names, same_base[1].groups.names):
        same_base = None
    if same_base is not None and not _extends(topics, same_base[1].topics):
        same_base = None
    if same_base is None and "base" not in tables:
        return decode_state(blob)
    try:
        base = (
            same_base[0] if same_base is not None else _rows(tables["base"], groups.names, topics)
        )
        d = tables["delta"]
        delta = Delta(
            _rows(d, groups.names, topics), numpy_column(d, "base_pos"), numpy_column(d, "tomb")
        )
    except IndexError as e:  # a group or topic code beyond its dictionary
        raise StateFormatError(f"corrupt shard state blob: {e}") from e
    offsets = OffsetTable(base, delta)
    owners = {"groups": groups, "topics": topics, "base": base, "delta": delta}
    kept = {name: (owners[name], raw[name]) for name in _SECTIONS}
    return ShardState(shard_id, groups, topics, offsets, retention_ms, kept)


def _same_base(
    known: ShardState | None, shard_id: int, section: memoryview
) -> tuple[Rows, ShardState] | None:
    """``known``'s base and ``known`` when it is ``shard_id``'s and its base is still the one
    ``section`` encodes: not compacted since it was read or written, so ``known``'s dictionaries
    extend those its key hashes were computed with."""
    if known is None or known.shard_id != shard_id:
        return None
    kept = known.blob_sections.get("base")
    if kept is None or kept[0] is not known.offsets.base:
        return None
    # Arrow compares the bytes with memcmp (a memoryview compares element by element).
    if not pa.py_buffer(kept[1]).equals(pa.py_buffer(section)):
        return None
    return known.offsets.base, known


def _extends(names: StringDict, earlier: StringDict) -> bool:
    """Whether ``names`` and ``earlier`` name the same strings at every code both hold: the
    codes of a base read from the same bytes then mean the same groups or topics."""
    n = min(len(names), len(earlier))
    return bool(names.names.slice(0, n).equals(earlier.names.slice(0, n)))


def _string_dict(table: pa.Table) -> StringDict:
    return StringDict(
        arrow_column(table, "name"), numpy_column(table, "hash"), numpy_column(table, "by_hash")
    )


def _rows(table: pa.Table, groups: StringDict, topics: StringDict) -> Rows:
    """The ``Rows`` of a base or delta section, the key hash computed."""
    columns = {
        name: arrow_column(table, name) if name == "metadata" else numpy_column(table, name)
        for name in _ROW_TYPES
    }
    khash = key_hash(
        groups.hashes[columns["gcode"]], topics.hashes[columns["tcode"]], columns["partition"]
    )
    return Rows(khash=khash, **columns)
