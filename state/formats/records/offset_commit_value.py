"""The value of an offset record: ``OffsetCommitValue`` v0-v4, decoded as ``OffsetAndMetadata``.

Flexible from v4::

    version | fields, in wire order
    --------+------------------------------------------------------------------------------
    0       | offset int64, metadata string, commitTimestamp int64
    1       | offset int64, metadata string, commitTimestamp int64, expireTimestamp int64
    2       | offset int64, metadata string, commitTimestamp int64
    3       | offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
    4       | offset int64, leaderEpoch int32, metadata compact string, commitTimestamp int64,
            | tagged fields

``expireTimestamp`` exists in v1 only (``"versions": "1"``); ``leaderEpoch`` from v3. Kafka 4.1
writes the topic id as tag 0 of v4; nothing here needs it.

Writers pick Kafka 4.0's version: 1 when the commit has an explicit expire timestamp, else 3
(``offsetCommitValueVersion(expireTimestampPresent)``). Kafka 4.1 writes v4 instead of v3 (to
carry the topic id tag); v3 stays readable by every Kafka version, v4 only by Kafka 3.5 and later
(KIP-915). Below v3 the leader epoch is dropped (decoded as -1), as Kafka does when it writes v1;
an ``expire_timestamp_ms`` of -1, Kafka's "none" marker, decodes as None.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from state.coordinator.model import OffsetAndMetadata
from state.formats.records.wire import (
    FLEXIBLE_VERSION,
    INT32,
    INT32_MAX,
    INT32_MIN,
    INT64,
    INT64_MAX,
    INT64_MIN,
    MAX_RECORD_STRING_BYTES,
    NO_TAGGED_FIELDS,
    PACK_ERRORS,
    Reader,
    check_int,
    check_str,
    encode_failure,
    read_version,
    uvarint,
)

__all__ = [
    "decode_offset_commit_value",
    "encode_offset_commit_value",
    "encode_offset_commit_values",
    "offset_commit_value_version",
]

_MAX_VERSION = 4

_QQ = struct.Struct(">qq")  # commitTimestamp, expireTimestamp (v1)
_HQH = struct.Struct(">hqh")  # value version, offset, metadata length (v0-v2)
_HQIH = struct.Struct(">hqih")  # value version, offset, leader epoch, metadata length (v3)
_HQI = struct.Struct(">hqi")  # value version, offset, leader epoch (v4, compact string follows)
_QIH = struct.Struct(">qih")  # offset, leader epoch, metadata length (decoding v3)
_QH = struct.Struct(">qh")  # offset, metadata length (decoding v1)


def offset_commit_value_version(expire_timestamp_present: bool) -> int:
    """The OffsetCommitValue version Kafka 4.x writes: 1 if an expire timestamp is set, else 3."""
    return 1 if expire_timestamp_present else 3


def _validate(
    ctx: str,
    offset: object,
    leader_epoch: object,
    metadata: object,
    commit_ts: object,
    expire_ts: object,
) -> None:
    """Raise ``ValueError`` naming the first field of a value that cannot be encoded."""
    check_int(ctx, "offset", offset, INT64_MIN, INT64_MAX)
    check_int(ctx, "leaderEpoch", leader_epoch, INT32_MIN, INT32_MAX)
    check_str(ctx, "metadata", metadata)
    check_int(ctx, "commitTimestamp", commit_ts, INT64_MIN, INT64_MAX)
    if expire_ts is not None:
        check_int(ctx, "expireTimestamp", expire_ts, INT64_MIN, INT64_MAX)


def _encode(
    version: int,
    offset: int,
    leader_epoch: int,
    metadata: str,
    commit_ts: int,
    expire_ts: int | None,
) -> bytes:
    """Lean encoder of one OffsetCommitValue; the caller has checked ``version`` against
    ``expire_ts``. Lets struct/str raise on bad values (the callers diagnose)."""
    m = metadata.encode("utf-8")
    if version == 3:
        return _HQIH.pack(3, offset, leader_epoch, len(m)) + m + INT64.pack(commit_ts)
    if version == 1:
        # v1 always carries the field; -1 is Kafka's "no explicit expiry".
        expire = -1 if expire_ts is None else expire_ts
        return _HQH.pack(1, offset, len(m)) + m + _QQ.pack(commit_ts, expire)
    if version == 4:
        if len(m) > MAX_RECORD_STRING_BYTES:
            raise struct.error("metadata too long")
        return (
            _HQI.pack(4, offset, leader_epoch)
            + uvarint(len(m) + 1)
            + m
            + INT64.pack(commit_ts)
            + NO_TAGGED_FIELDS
        )
    # v0 and v2 share a layout.
    INT32.pack(leader_epoch)  # still range-check the epoch the version drops
    return _HQH.pack(version, offset, len(m)) + m + INT64.pack(commit_ts)


def encode_offset_commit_value(value: OffsetAndMetadata, version: int | None = None) -> bytes:
    """Encode an offset record value, version-prefixed.

    ``version=None`` picks Kafka's choice: 1 if ``expire_timestamp_ms`` is set, else 3. An
    explicit version must be able to hold the value: ``expire_timestamp_ms`` needs v1 (else
    ``ValueError`` naming expireTimestamp). Below v3 the leader epoch is dropped, as Kafka's own
    v1 writes do. Raises ``ValueError`` naming the field for out-of-range or wrong-typed values.
    """
    expire = value.expire_timestamp_ms
    if version is None:
        version = offset_commit_value_version(expire is not None)
    elif type(version) is int and 0 <= version <= _MAX_VERSION:
        if expire is not None and version != 1:
            raise ValueError(
                f"OffsetCommitValue v{version}: expireTimestamp={expire} can only be stored in "
                f"version 1"
            )
    else:
        raise ValueError(f"OffsetCommitValue: version must be 0-4, got {version!r}")
    offset, epoch, metadata = value.offset, value.leader_epoch, value.metadata
    commit_ts = value.commit_timestamp_ms
    try:
        return _encode(version, offset, epoch, metadata, commit_ts, expire)
    except PACK_ERRORS as e:
        ctx = f"OffsetCommitValue v{version}"
        raise encode_failure(
            e, ctx, lambda: _validate(ctx, offset, epoch, metadata, commit_ts, expire)
        ) from e


def encode_offset_commit_values(
    offsets: Sequence[int | None],
    leader_epochs: Sequence[int],
    metadatas: Sequence[str | None],
    commit_timestamps: Sequence[int],
    expire_timestamps: Sequence[int | None],
) -> list[bytes | None]:
    """Encode many offset record values at Kafka's versions (1 with expire timestamp, else 3).

    Item ``i`` is ``None`` (a tombstone) where ``offsets[i]`` is None; its other entries are then
    ignored. Otherwise the contract is ``encode_offset_commit_value``'s, the error message also
    giving the item index. Pass plain Python sequences (``Series.tolist()``) for speed.
    """
    n = len(offsets)
    if not (
        n
        == len(leader_epochs)
        == len(metadatas)
        == len(commit_timestamps)
        == len(expire_timestamps)
    ):
        raise ValueError(
            "OffsetCommitValue: offsets, leader_epochs, metadatas, commit_timestamps "
            "and expire_timestamps differ in length"
        )
    meta_cache: dict[str, bytes] = {}
    out: list[bytes | None] = []
    append = out.append
    pack3, pack1, pack_q, pack_qq = _HQIH.pack, _HQH.pack, INT64.pack, _QQ.pack
    try:
        for off, le, md, ct, et in zip(
            offsets, leader_epochs, metadatas, commit_timestamps, expire_timestamps, strict=True
        ):
            if off is None:
                append(None)
                continue
            m = meta_cache.get(md)  # type: ignore[arg-type]
            if m is None:
                m = meta_cache[md] = md.encode("utf-8")  # type: ignore[union-attr]
            if et is None:
                append(pack3(3, off, le, len(m)) + m + pack_q(ct))
            else:
                INT32.pack(le)  # v1 drops the epoch; still reject an out-of-range one
                append(pack1(1, off, len(m)) + m + pack_qq(ct, et))
    except PACK_ERRORS as e:
        i = len(out)
        et = expire_timestamps[i]
        ctx = f"OffsetCommitValue v{offset_commit_value_version(et is not None)}"
        raise encode_failure(
            e,
            ctx,
            lambda: _validate(
                ctx, offsets[i], leader_epochs[i], metadatas[i], commit_timestamps[i], et
            ),
            item=i,
        ) from e
    return out


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    """Decode an offset record value of any version 0-4.

    ``leader_epoch`` is -1 below v3; ``expire_timestamp_ms`` is None unless the value is v1 with
    an expire timestamp other than -1. Raises ``RecordFormatError`` for corrupt input.
    """
    buf, version = read_version(data, "OffsetCommitValue", _MAX_VERSION)
    n = len(buf)
    # Fast paths for well-formed v3 and v1 values, the versions Kafka writes; anything irregular
    # falls through to the checked reader, which names the field at fault.
    if version == 3 and n >= 16:
        offset, leader_epoch, length = _QIH.unpack_from(buf, 2)
        end = 16 + length
        if 16 <= end == n - 8:
            try:
                metadata = buf[16:end].decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                return OffsetAndMetadata(
                    offset, leader_epoch, metadata, INT64.unpack_from(buf, end)[0]
                )
    elif version == 1 and n >= 12:
        offset, length = _QH.unpack_from(buf, 2)
        end = 12 + length
        if 12 <= end == n - 16:
            try:
                metadata = buf[12:end].decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                commit_ts, expire_ts = _QQ.unpack_from(buf, end)
                return OffsetAndMetadata(
                    offset, -1, metadata, commit_ts, None if expire_ts == -1 else expire_ts
                )
    flexible = version >= FLEXIBLE_VERSION
    r = Reader(buf, 2, f"OffsetCommitValue v{version}")
    offset = r.int64("offset")
    leader_epoch = r.int32("leaderEpoch") if version >= 3 else -1
    metadata = r.string("metadata", flexible=flexible)
    commit_ts = r.int64("commitTimestamp")
    expire: int | None = None
    if version == 1:
        expire = r.int64("expireTimestamp")
        if expire == -1:
            expire = None
    if flexible:
        r.tagged_fields("tagged fields")
    r.finish()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_ts, expire)
