"""Byte-exact codecs for the records of Kafka's ``__consumer_offsets`` topic.

The layouts follow apache/kafka ``group-coordinator/src/main/resources/common/message/*.json``.
A record key is an int16 *key version* (Kafka 4.x calls it the record type) followed by the key
struct; a record value is an int16 *value version* followed by the value struct; a null value is
a tombstone. All integers are big-endian and signed.

Keys::

    key version | struct                                        | decoded as
    ------------+-----------------------------------------------+-------------------------------
    0, 1        | group string, topic string, partition int32   | OffsetCommitKey
    2           | group string                                  | GroupMetadataKey
    3+          | (KIP-848 consumer/share/streams group records) | UnknownKey(version, rest)

The key structs are never flexible, whatever the version.

OffsetCommitValue (flexible from v4)::

    version | fields, in wire order
    --------+------------------------------------------------------------------------------
    0       | offset int64, metadata string, commitTimestamp int64
    1       | offset int64, metadata string, commitTimestamp int64, expireTimestamp int64
    2       | offset int64, metadata string, commitTimestamp int64
    3       | offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
    4       | offset int64, leaderEpoch int32, metadata compact string, commitTimestamp int64,
            | tagged fields

``expireTimestamp`` exists in v1 only (``"versions": "1"``); ``leaderEpoch`` from v3.

GroupMetadataValue (flexible from v4)::

    version | fields, in wire order
    --------+------------------------------------------------------------------------------
    0       | protocolType string, generation int32, protocol string?, leader string?,
            | members [MemberMetadata v0]
    1       | as v0, members [MemberMetadata v1]
    2       | protocolType, generation, protocol?, leader?, currentStateTimestamp int64,
            | members [MemberMetadata v2]
    3       | as v2, members [MemberMetadata v3]
    4       | as v3 with compact strings/bytes/arrays and tagged fields

    MemberMetadata: memberId string, groupInstanceId string? (v3+), clientId string,
    clientHost string, rebalanceTimeout int32 (v1+), sessionTimeout int32, subscription bytes,
    assignment bytes (+ tagged fields in v4)

``?`` marks a nullable string. Non-flexible encodings: string = int16 byte length + UTF-8
(-1 = null), bytes = int32 length, array = int32 count. Flexible (v4): compact string/bytes/array
= unsigned varint of length + 1 (0 = null), and every struct (the value and each member) ends with
a tagged-field section: unsigned varint count, then per field varint tag, varint size, data.
Decoders skip every tagged field (Kafka 4.1 writes the topic id as tag 0 of OffsetCommitValue
v4; nothing here needs it); encoders write none.

``subscription`` holds a ConsumerProtocolSubscription (int16 version, topics array of strings,
userData nullable bytes, then fields of later versions); only its topics are kept
(``MemberMetadata.subscribed_topics``). The encoder writes version 0 with null userData.

Writers pick the versions Kafka 4.0 writes: OffsetCommitKey 1, GroupMetadataKey 2,
GroupMetadataValue 3, and OffsetCommitValue 1 when the commit has an explicit expire timestamp,
else 3 (``offsetCommitValueVersion(expireTimestampPresent)``). Kafka 4.1 writes OffsetCommitValue
v4 instead of v3 (to carry the topic id tag); v3 stays readable by every Kafka version, v4 only
by Kafka 3.5 and later (KIP-915). Decoders accept every version.

Encoding contract: ``decode(encode(v)) == v`` or ``encode`` raises ``ValueError`` naming the field
that the chosen version cannot hold, with two exceptions: OffsetCommitValue below v3 drops
``leader_epoch`` (decoded as -1), as Kafka does when it writes v1 for a commit with an explicit
expire timestamp; and an ``expire_timestamp_ms`` of -1, Kafka's "none" marker, decodes as None.

Decoding is strict: truncated input, trailing bytes, a negative length other than the null
marker (-1), invalid UTF-8 or an unknown value version raise ``RecordFormatError``. (Kafka's
generated readers read any negative string length as null and decode invalid UTF-8 with
replacement characters; Kafka never writes either, so here both mean corruption.)
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Sequence
from typing import NoReturn

from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
    UnknownKey,
)

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "RecordFormatError",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_record",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_keys",
    "encode_offset_commit_value",
    "encode_offset_commit_values",
    "encode_record",
    "offset_commit_value_version",
]

#: Key version Kafka 4.x writes for offset commits (``OffsetCommitKey``; 0 is the legacy type).
OFFSET_COMMIT_KEY_VERSION = 1
#: Key version of group metadata records.
GROUP_METADATA_KEY_VERSION = 2
#: GroupMetadataValue version Kafka writes (the highest non-flexible one).
GROUP_METADATA_VALUE_VERSION = 3

_OFFSET_COMMIT_VALUE_MAX_VERSION = 4
_GROUP_METADATA_VALUE_MAX_VERSION = 4
_FLEXIBLE_VERSION = 4  # first flexible version of both value types
_MAX_STRING_BYTES = 0x7FFF  # Kafka's generated code rejects longer strings, compact or not
_INT16_MIN, _INT16_MAX = -(1 << 15), (1 << 15) - 1
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")
_HH = struct.Struct(">hh")
_HQH = struct.Struct(">hqh")  # value version, offset, metadata length (v0-v2)
_HQIH = struct.Struct(">hqih")  # value version, offset, leader epoch, metadata length (v3)
_HQI = struct.Struct(">hqi")  # value version, offset, leader epoch (v4, compact string follows)
_QIH = struct.Struct(">qih")  # offset, leader epoch, metadata length (decoding v3)
_QH = struct.Struct(">qh")  # offset, metadata length (decoding v1)

_NO_TAGGED_FIELDS = b"\x00"

# Exceptions the lean encoders let the stdlib raise for a bad field; the slow path then finds the
# field and raises a ValueError naming it.
_PACK_ERRORS = (struct.error, AttributeError, TypeError, UnicodeEncodeError, OverflowError)


class RecordFormatError(ValueError):
    """The bytes are not a valid ``__consumer_offsets`` record key or value.

    The message names the record type, its version and the field where decoding failed.
    """


# ---------------------------------------------------------------------------------------------
# Versions


def offset_commit_value_version(expire_timestamp_present: bool) -> int:
    """The OffsetCommitValue version Kafka 4.x writes: 1 if an expire timestamp is set, else 3."""
    return 1 if expire_timestamp_present else 3


# ---------------------------------------------------------------------------------------------
# Encoding helpers (slow path: validation with field names)


def _check_int(ctx: str, name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{ctx}: {name} must be an integer, got bool")
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{ctx}: {name} must be an integer, got {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{ctx}: {name}={v} is out of range [{lo}, {hi}]")
    return v


def _check_str(ctx: str, name: str, value: object, nullable: bool = False) -> bytes | None:
    if value is None:
        if nullable:
            return None
        raise ValueError(f"{ctx}: {name} must not be null")
    if not isinstance(value, str):
        raise ValueError(f"{ctx}: {name} must be a string, got {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{ctx}: {name} is not encodable as UTF-8: {e.reason}") from None
    if len(raw) > _MAX_STRING_BYTES:
        raise ValueError(f"{ctx}: {name} is {len(raw)} bytes, more than {_MAX_STRING_BYTES}")
    return raw


def _check_bytes(ctx: str, name: str, value: object) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ValueError(f"{ctx}: {name} must be bytes, got {type(value).__name__}")
    raw = bytes(value)
    if len(raw) > _INT32_MAX:
        raise ValueError(f"{ctx}: {name} is longer than {_INT32_MAX} bytes")
    return raw


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _w_string(out: list[bytes], raw: bytes | None, flexible: bool) -> None:
    if flexible:
        out.append(b"\x00" if raw is None else _uvarint(len(raw) + 1))
    else:
        out.append(_H.pack(-1 if raw is None else len(raw)))
    if raw:
        out.append(raw)


def _w_bytes(out: list[bytes], raw: bytes, flexible: bool) -> None:
    out.append(_uvarint(len(raw) + 1) if flexible else _I.pack(len(raw)))
    if raw:
        out.append(raw)


def _w_array_len(out: list[bytes], n: int, flexible: bool) -> None:
    out.append(_uvarint(n + 1) if flexible else _I.pack(n))


# ---------------------------------------------------------------------------------------------
# Keys


def _validate_offset_commit_key(group: object, topic: object, partition: object) -> None:
    ctx = "OffsetCommitKey"
    _check_str(ctx, "group", group)
    _check_str(ctx, "topic", topic)
    _check_int(ctx, "partition", partition, _INT32_MIN, _INT32_MAX)


def encode_offset_commit_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    """Encode an offset record key: int16 version (0 or 1), group, topic, partition.

    Raises ``ValueError`` naming the field if a value does not fit (a string over 32767 UTF-8
    bytes, a partition outside int32, a non-string) or the version is not 0 or 1.
    """
    if version != 1 and version != 0:
        raise ValueError(f"OffsetCommitKey: version must be 0 or 1, got {version!r}")
    try:
        g = group.encode("utf-8")
        t = topic.encode("utf-8")
        # struct rejects lengths over int16 and partitions outside int32 for us.
        return _HH.pack(version, len(g)) + g + _H.pack(len(t)) + t + _I.pack(partition)
    except _PACK_ERRORS as e:
        _validate_offset_commit_key(group, topic, partition)
        raise ValueError(f"OffsetCommitKey: cannot encode: {e}") from e


def encode_group_metadata_key(group: str) -> bytes:
    """Encode a group metadata record key: int16 version 2, then the group string."""
    raw = _check_str("GroupMetadataKey", "group", group)
    assert raw is not None  # non-nullable
    return _HH.pack(GROUP_METADATA_KEY_VERSION, len(raw)) + raw


def encode_offset_commit_keys(
    groups: Sequence[str], topics: Sequence[str], partitions: Sequence[int]
) -> list[bytes]:
    """Encode many offset record keys (version 1) at once; same contract as
    ``encode_offset_commit_key`` per item, the error message also giving the item index.

    Faster than one call per key: group and topic encodings are computed once per distinct value.
    Pass plain Python sequences (``Series.tolist()``), not NumPy arrays, for speed.
    """
    if not len(groups) == len(topics) == len(partitions):
        raise ValueError(
            f"OffsetCommitKey: groups, topics and partitions differ in length "
            f"({len(groups)}, {len(topics)}, {len(partitions)})"
        )
    group_prefix: dict[str, bytes] = {}
    topic_part: dict[str, bytes] = {}
    out: list[bytes] = []
    append = out.append
    pack_h, pack_i, pack_hh = _H.pack, _I.pack, _HH.pack
    try:
        for g, t, p in zip(groups, topics, partitions, strict=True):
            gb = group_prefix.get(g)
            if gb is None:
                raw = g.encode("utf-8")
                gb = group_prefix[g] = pack_hh(OFFSET_COMMIT_KEY_VERSION, len(raw)) + raw
            tb = topic_part.get(t)
            if tb is None:
                raw = t.encode("utf-8")
                tb = topic_part[t] = pack_h(len(raw)) + raw
            append(gb + tb + pack_i(p))
    except _PACK_ERRORS as e:
        i = len(out)
        try:
            _validate_offset_commit_key(groups[i], topics[i], partitions[i])
        except ValueError as bad:
            raise ValueError(f"item {i}: {bad}") from e
        raise ValueError(f"item {i}: OffsetCommitKey: cannot encode: {e}") from e
    return out


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    """Decode a record key.

    Key versions 0 and 1 give ``OffsetCommitKey``, 2 gives ``GroupMetadataKey``; 3 and above
    (KIP-848 and later record types) give ``UnknownKey(version, data after the version)`` without
    interpreting it. Raises ``RecordFormatError`` for a null, short, negative-version, truncated or
    over-long key; ``TypeError`` if ``data`` is not bytes-like.
    """
    buf = _as_bytes(data, "record key")
    if len(buf) < 2:
        raise RecordFormatError(f"record key: version: needs 2 bytes, got {len(buf)}")
    version = _H.unpack_from(buf)[0]
    if version >= 3:
        return UnknownKey(version, buf[2:])
    if version < 0:
        raise RecordFormatError(f"record key: version: negative version {version}")
    if version < 2:
        # Fast path for a well-formed offset key (the bulk of a restore); anything irregular
        # falls through to the checked reader, which names the field at fault.
        n = len(buf)
        if n >= 4:
            group_end = 4 + _H.unpack_from(buf, 2)[0]
            if 4 <= group_end <= n - 2:
                topic_end = group_end + 2 + _H.unpack_from(buf, group_end)[0]
                if group_end + 2 <= topic_end == n - 4:
                    try:
                        return OffsetCommitKey(
                            buf[4:group_end].decode("utf-8"),
                            buf[group_end + 2 : topic_end].decode("utf-8"),
                            _I.unpack_from(buf, topic_end)[0],
                        )
                    except UnicodeDecodeError:
                        pass
    r = _Reader(buf, 2, f"{'OffsetCommitKey' if version < 2 else 'GroupMetadataKey'} v{version}")
    group = r.string("group")
    if version == 2:
        r.finish()
        return GroupMetadataKey(group)
    topic = r.string("topic")
    partition = r.int32("partition")
    r.finish()
    return OffsetCommitKey(group, topic, partition)


# ---------------------------------------------------------------------------------------------
# OffsetCommitValue


def _validate_offset_commit_value(
    ctx: str,
    offset: object,
    leader_epoch: object,
    metadata: object,
    commit_ts: object,
    expire_ts: object,
) -> None:
    _check_int(ctx, "offset", offset, _INT64_MIN, _INT64_MAX)
    _check_int(ctx, "leaderEpoch", leader_epoch, _INT32_MIN, _INT32_MAX)
    _check_str(ctx, "metadata", metadata)
    _check_int(ctx, "commitTimestamp", commit_ts, _INT64_MIN, _INT64_MAX)
    if expire_ts is not None:
        _check_int(ctx, "expireTimestamp", expire_ts, _INT64_MIN, _INT64_MAX)


def _encode_ocv(
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
        return _HQIH.pack(3, offset, leader_epoch, len(m)) + m + _Q.pack(commit_ts)
    if version == 1:
        # v1 always carries the field; -1 is Kafka's "no explicit expiry".
        expire = -1 if expire_ts is None else expire_ts
        return _HQH.pack(1, offset, len(m)) + m + _QQ.pack(commit_ts, expire)
    if version == 4:
        if len(m) > _MAX_STRING_BYTES:
            raise struct.error("metadata too long")
        return (
            _HQI.pack(4, offset, leader_epoch)
            + _uvarint(len(m) + 1)
            + m
            + _Q.pack(commit_ts)
            + _NO_TAGGED_FIELDS
        )
    # v0 and v2 share a layout.
    _I.pack(leader_epoch)  # still range-check the epoch the version drops
    return _HQH.pack(version, offset, len(m)) + m + _Q.pack(commit_ts)


def encode_offset_commit_value(value: OffsetAndMetadata, version: int | None = None) -> bytes:
    """Encode an offset record value, version-prefixed.

    ``version=None`` picks Kafka's choice: 1 if ``expire_timestamp_ms`` is set, else 3. An
    explicit version must be able to hold the value: ``expire_timestamp_ms`` needs v1 (else
    ``ValueError`` naming expireTimestamp). Below v3 the leader epoch is dropped, as Kafka's own
    v1 writes do. Raises ``ValueError`` naming the field for out-of-range or wrong-typed values.
    """
    expire = value.expire_timestamp_ms
    if version is None:
        version = 3 if expire is None else 1
    elif type(version) is int and 0 <= version <= _OFFSET_COMMIT_VALUE_MAX_VERSION:
        if expire is not None and version != 1:
            raise ValueError(
                f"OffsetCommitValue v{version}: expireTimestamp={expire} can only be stored in "
                f"version 1"
            )
    else:
        raise ValueError(f"OffsetCommitValue: version must be 0-4, got {version!r}")
    try:
        return _encode_ocv(
            version,
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp_ms,
            expire,
        )
    except _PACK_ERRORS as e:
        ctx = f"OffsetCommitValue v{version}"
        _validate_offset_commit_value(
            ctx,
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp_ms,
            expire,
        )
        raise ValueError(f"{ctx}: cannot encode: {e}") from e


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
    pack3, pack1, pack_q, pack_qq = _HQIH.pack, _HQH.pack, _Q.pack, _QQ.pack
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
                _I.pack(le)  # v1 drops the epoch; still reject an out-of-range one
                append(pack1(1, off, len(m)) + m + pack_qq(ct, et))
    except _PACK_ERRORS as e:
        i = len(out)
        et = expire_timestamps[i]
        ctx = f"OffsetCommitValue v{3 if et is None else 1}"
        try:
            _validate_offset_commit_value(
                ctx, offsets[i], leader_epochs[i], metadatas[i], commit_timestamps[i], et
            )
        except ValueError as bad:
            raise ValueError(f"item {i}: {bad}") from e
        raise ValueError(f"item {i}: {ctx}: cannot encode: {e}") from e
    return out


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    """Decode an offset record value of any version 0-4.

    ``leader_epoch`` is -1 below v3; ``expire_timestamp_ms`` is None unless the value is v1 with
    an expire timestamp other than -1. Raises ``RecordFormatError`` for corrupt input.
    """
    buf = _as_bytes(data, "OffsetCommitValue")
    if len(buf) < 2:
        raise RecordFormatError(f"OffsetCommitValue: version: needs 2 bytes, got {len(buf)}")
    version = _H.unpack_from(buf)[0]
    if not 0 <= version <= _OFFSET_COMMIT_VALUE_MAX_VERSION:
        raise RecordFormatError(
            f"OffsetCommitValue: version: unsupported version {version} "
            f"(known 0-{_OFFSET_COMMIT_VALUE_MAX_VERSION})"
        )
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
                    offset, leader_epoch, metadata, _Q.unpack_from(buf, end)[0]
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
    flexible = version >= _FLEXIBLE_VERSION
    r = _Reader(buf, 2, f"OffsetCommitValue v{version}")
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


# ---------------------------------------------------------------------------------------------
# GroupMetadataValue and the ConsumerProtocolSubscription inside it


def _encode_subscription(ctx: str, topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, topics array, userData null."""
    if isinstance(topics, str):
        raise ValueError(f"{ctx}: subscription topics must be a sequence of strings, got str")
    parts = [_H.pack(0), _I.pack(len(topics))]
    for j, topic in enumerate(topics):
        raw = _check_str(ctx, f"subscription topics[{j}]", topic)
        assert raw is not None
        parts.append(_H.pack(len(raw)))
        parts.append(raw)
    parts.append(_I.pack(-1))  # userData: null
    return b"".join(parts)


def _decode_subscription_topics(raw: bytes) -> tuple[str, ...]:
    """Topics of a ConsumerProtocolSubscription of any version (topics come first in all of
    them); an undecodable subscription (e.g. another protocol type's metadata) gives ().

    Decoded whatever the group's protocol type, so that values round-trip; Kafka itself only
    interprets subscriptions of "consumer" groups, which is for the state machine to mirror."""
    try:
        r = _Reader(raw, 0, "ConsumerProtocolSubscription")
        if r.int16("version") < 0:
            return ()
        count = r.array_count("topics", flexible=False)
        return tuple(r.string("topics[]") for _ in range(count))
    except RecordFormatError:
        return ()


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    """Encode a group metadata record value, version-prefixed (default v3, as Kafka writes).

    Raises ``ValueError`` naming the field when a value does not fit its type or the version
    cannot hold it: ``currentStateTimestamp`` other than -1 below v2, a member's
    ``groupInstanceId`` below v3, a member's ``rebalanceTimeout`` different from its
    ``sessionTimeout`` in v0 (v0 readers take the session timeout for it).
    """
    if not isinstance(version, int) or not 0 <= version <= _GROUP_METADATA_VALUE_MAX_VERSION:
        raise ValueError(f"GroupMetadataValue: version must be 0-4, got {version!r}")
    ctx = f"GroupMetadataValue v{version}"
    flexible = version >= _FLEXIBLE_VERSION
    out: list[bytes] = [_H.pack(version)]
    _w_string(out, _check_str(ctx, "protocolType", value.protocol_type), flexible)
    out.append(_I.pack(_check_int(ctx, "generation", value.generation, _INT32_MIN, _INT32_MAX)))
    _w_string(out, _check_str(ctx, "protocol", value.protocol, nullable=True), flexible)
    _w_string(out, _check_str(ctx, "leader", value.leader, nullable=True), flexible)
    ts = _check_int(
        ctx, "currentStateTimestamp", value.current_state_timestamp_ms, _INT64_MIN, _INT64_MAX
    )
    if version >= 2:
        out.append(_Q.pack(ts))
    elif ts != -1:
        raise ValueError(f"{ctx}: currentStateTimestamp={ts} needs version 2 or later")
    members = value.members
    _w_array_len(out, len(members), flexible)
    for i, m in enumerate(members):
        if not isinstance(m, MemberMetadata):
            raise ValueError(f"{ctx}: members[{i}] must be MemberMetadata, got {type(m).__name__}")
        mctx = f"{ctx}: members[{i}]"
        _w_string(out, _check_str(mctx, "memberId", m.member_id), flexible)
        instance = _check_str(mctx, "groupInstanceId", m.group_instance_id, nullable=True)
        if version >= 3:
            _w_string(out, instance, flexible)
        elif instance is not None:
            raise ValueError(f"{mctx}: groupInstanceId needs version 3 or later")
        _w_string(out, _check_str(mctx, "clientId", m.client_id), flexible)
        _w_string(out, _check_str(mctx, "clientHost", m.client_host), flexible)
        rebalance = _check_int(
            mctx, "rebalanceTimeout", m.rebalance_timeout_ms, _INT32_MIN, _INT32_MAX
        )
        session = _check_int(mctx, "sessionTimeout", m.session_timeout_ms, _INT32_MIN, _INT32_MAX)
        if version >= 1:
            out.append(_I.pack(rebalance))
        elif rebalance != session:
            raise ValueError(
                f"{mctx}: rebalanceTimeout={rebalance} differs from sessionTimeout={session}, "
                f"which version 0 cannot hold"
            )
        out.append(_I.pack(session))
        _w_bytes(out, _encode_subscription(mctx, m.subscribed_topics), flexible)
        _w_bytes(out, _check_bytes(mctx, "assignment", m.assignment), flexible)
        if flexible:
            out.append(_NO_TAGGED_FIELDS)
    if flexible:
        out.append(_NO_TAGGED_FIELDS)
    return b"".join(out)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    """Decode a group metadata record value of any version 0-4.

    Absent fields take Kafka's defaults: ``current_state_timestamp_ms`` -1 below v2,
    ``group_instance_id`` None below v3, and ``rebalance_timeout_ms`` = the session timeout in v0
    (as Kafka's loader does). Raises ``RecordFormatError`` for corrupt input; an undecodable
    member subscription gives ``subscribed_topics == ()`` instead.
    """
    buf = _as_bytes(data, "GroupMetadataValue")
    if len(buf) < 2:
        raise RecordFormatError(f"GroupMetadataValue: version: needs 2 bytes, got {len(buf)}")
    version = _H.unpack_from(buf)[0]
    if not 0 <= version <= _GROUP_METADATA_VALUE_MAX_VERSION:
        raise RecordFormatError(
            f"GroupMetadataValue: version: unsupported version {version} "
            f"(known 0-{_GROUP_METADATA_VALUE_MAX_VERSION})"
        )
    flexible = version >= _FLEXIBLE_VERSION
    r = _Reader(buf, 2, f"GroupMetadataValue v{version}")
    protocol_type = r.string("protocolType", flexible=flexible)
    generation = r.int32("generation")
    protocol = r.nullable_string("protocol", flexible=flexible)
    leader = r.nullable_string("leader", flexible=flexible)
    ts = r.int64("currentStateTimestamp") if version >= 2 else -1
    count = r.array_count("members", flexible=flexible)
    members = []
    for i in range(count):
        p = f"members[{i}]."
        member_id = r.string(p + "memberId", flexible=flexible)
        instance = r.nullable_string(p + "groupInstanceId", flexible) if version >= 3 else None
        client_id = r.string(p + "clientId", flexible=flexible)
        client_host = r.string(p + "clientHost", flexible=flexible)
        rebalance = r.int32(p + "rebalanceTimeout") if version >= 1 else None
        session = r.int32(p + "sessionTimeout")
        subscription = r.bytes_(p + "subscription", flexible=flexible)
        assignment = r.bytes_(p + "assignment", flexible=flexible)
        if flexible:
            r.tagged_fields(p + "tagged fields")
        members.append(
            MemberMetadata(
                member_id=member_id,
                group_instance_id=instance,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout_ms=session if rebalance is None else rebalance,
                session_timeout_ms=session,
                subscribed_topics=_decode_subscription_topics(subscription),
                assignment=assignment,
            )
        )
    if flexible:
        r.tagged_fields("tagged fields")
    r.finish()
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp_ms=ts,
        members=tuple(members),
    )


# ---------------------------------------------------------------------------------------------
# Whole records


def decode_record(key: bytes, value: bytes | None) -> Record:
    """Decode one offsets-topic record. A null ``value`` is a tombstone (``Record(key, None)``).

    The value of an ``UnknownKey`` record is not interpreted and comes back as None: callers skip
    such records (Kafka's classic offset manager ignores them too). Raises ``RecordFormatError``.
    """
    k = decode_key(key)
    if value is None or isinstance(k, UnknownKey):
        return Record(k, None)
    if isinstance(k, OffsetCommitKey):
        return Record(k, decode_offset_commit_value(value))
    return Record(k, decode_group_metadata_value(value))


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    """Encode a record to its (key, value) bytes at the versions Kafka writes.

    The value must match the key type (OffsetAndMetadata for OffsetCommitKey, GroupMetadataValue
    for GroupMetadataKey) or be None (tombstone); an ``UnknownKey`` re-encodes its own bytes and
    must carry no value. Raises ``ValueError`` otherwise.
    """
    key, value = record
    if isinstance(key, OffsetCommitKey):
        kb = encode_offset_commit_key(key.group, key.topic, key.partition)
        if value is None:
            return kb, None
        if isinstance(value, OffsetAndMetadata):
            return kb, encode_offset_commit_value(value)
    elif isinstance(key, GroupMetadataKey):
        kb = encode_group_metadata_key(key.group)
        if value is None:
            return kb, None
        if isinstance(value, GroupMetadataValue):
            return kb, encode_group_metadata_value(value)
    elif isinstance(key, UnknownKey):
        version = _check_int("UnknownKey", "version", key.version, 3, _INT16_MAX)
        if value is None:
            return _H.pack(version) + bytes(key.data), None
    else:
        raise ValueError(f"record key must be a record key type, got {type(key).__name__}")
    raise ValueError(f"record value {type(value).__name__} does not match key {type(key).__name__}")


# ---------------------------------------------------------------------------------------------
# Decoding


def _as_bytes(data: object, what: str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if data is None:
        raise RecordFormatError(f"{what}: is null")
    raise TypeError(f"{what}: expected bytes, got {type(data).__name__}")


class _Reader:
    """A cursor over one struct's bytes; every failure names ``ctx`` (type and version) and the
    field being read."""

    __slots__ = ("buf", "ctx", "end", "pos")

    def __init__(self, buf: bytes, pos: int, ctx: str) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.ctx = ctx

    def fail(self, field: str, msg: str) -> NoReturn:
        raise RecordFormatError(f"{self.ctx}: {field}: {msg}")

    def _need(self, n: int, field: str) -> None:
        if self.pos + n > self.end:
            self.fail(
                field,
                f"truncated: needs {n} bytes at offset {self.pos}, {self.end - self.pos} left",
            )

    def int16(self, field: str) -> int:
        self._need(2, field)
        v = _H.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def int32(self, field: str) -> int:
        self._need(4, field)
        v = _I.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def int64(self, field: str) -> int:
        self._need(8, field)
        v = _Q.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def uvarint(self, field: str) -> int:
        """Kafka's unsigned varint: at most 5 bytes; values above int32 are rejected because
        Kafka's reader would see them as negative ints."""
        buf, pos, end = self.buf, self.pos, self.end
        value = 0
        for shift in range(0, 35, 7):
            if pos >= end:
                self.fail(field, f"truncated varint at offset {pos}")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                if value > _INT32_MAX:
                    self.fail(field, f"varint {value} exceeds int32")
                self.pos = pos
                return value
        self.fail(field, f"varint longer than 5 bytes at offset {self.pos}")

    def _length(self, field: str, flexible: bool, nullable: bool) -> int:
        """Length of a string or bytes field; -1 means null (only if ``nullable``)."""
        n = self.uvarint(field) - 1 if flexible else self.int16(field)
        if n < 0:
            # Only -1 is the null marker; Kafka never writes other negative lengths.
            if n != -1:
                self.fail(field, f"negative length {n}")
            if not nullable:
                self.fail(field, "non-nullable string is null")
        return n

    def _text(self, field: str, n: int) -> str:
        self._need(n, field)
        start = self.pos
        self.pos = start + n
        try:
            return self.buf[start : self.pos].decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail(field, f"invalid UTF-8: {e.reason}")

    def string(self, field: str, flexible: bool = False) -> str:
        n = self._length(field, flexible, nullable=False)
        if n > _MAX_STRING_BYTES:
            self.fail(field, f"string length {n} exceeds {_MAX_STRING_BYTES}")
        return self._text(field, n)

    def nullable_string(self, field: str, flexible: bool = False) -> str | None:
        n = self._length(field, flexible, nullable=True)
        if n == -1:
            return None
        if n > _MAX_STRING_BYTES:
            self.fail(field, f"string length {n} exceeds {_MAX_STRING_BYTES}")
        return self._text(field, n)

    def bytes_(self, field: str, flexible: bool = False) -> bytes:
        n = self.uvarint(field) - 1 if flexible else self.int32(field)
        if n < 0:
            self.fail(field, "non-nullable bytes is null" if n == -1 else f"negative length {n}")
        self._need(n, field)
        start = self.pos
        self.pos = start + n
        return self.buf[start : self.pos]

    def array_count(self, field: str, flexible: bool) -> int:
        n = self.uvarint(field) - 1 if flexible else self.int32(field)
        if n < 0:
            self.fail(field, "non-nullable array is null" if n == -1 else f"negative count {n}")
        # Every element takes at least one byte: a larger count is corrupt, and checking it here
        # keeps a corrupt count from driving a long loop.
        if n > self.end - self.pos:
            self.fail(field, f"count {n} exceeds the {self.end - self.pos} bytes left")
        return n

    def tagged_fields(self, field: str) -> None:
        """Skip a tagged-field section (none are defined for the versions decoded here)."""
        count = self.uvarint(field)
        for _ in range(count):
            self.uvarint(field + " tag")
            size = self.uvarint(field + " size")
            self._need(size, field + " data")
            self.pos += size

    def finish(self) -> None:
        if self.pos != self.end:
            self.fail("end", f"{self.end - self.pos} trailing bytes after offset {self.pos}")
