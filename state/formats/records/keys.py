"""Record keys: ``OffsetCommitKey`` and ``GroupMetadataKey``.

A key is an int16 *key version* (Kafka 4.x calls it the record type) followed by the key struct::

    key version | struct                                        | decoded as
    ------------+-----------------------------------------------+-------------------------------
    0, 1        | group string, topic string, partition int32   | OffsetCommitKey
    2           | group string                                  | GroupMetadataKey
    3+          | (KIP-848 consumer/share/streams group records) | UnknownKey(version, rest)

The key structs are never flexible, whatever the version. Writers use version 1 for offset keys
(0 is the legacy type) and 2 for group keys, as Kafka 4.0 does.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from state.coordinator.model import GroupMetadataKey, OffsetCommitKey, UnknownKey
from state.formats.records.wire import (
    INT16,
    INT32,
    INT32_MAX,
    INT32_MIN,
    PACK_ERRORS,
    Reader,
    RecordFormatError,
    check_int,
    check_str,
    encode_failure,
    read_version,
)

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "decode_key",
    "encode_group_metadata_key",
    "encode_offset_commit_key",
    "encode_offset_commit_keys",
]

#: Key version Kafka 4.x writes for offset commits (``OffsetCommitKey``; 0 is the legacy type).
OFFSET_COMMIT_KEY_VERSION = 1
#: Key version of group metadata records.
GROUP_METADATA_KEY_VERSION = 2

_HH = struct.Struct(">hh")  # key version, length of the group string


def _validate_offset_commit_key(group: object, topic: object, partition: object) -> None:
    """Raise ``ValueError`` naming the first field of an offset key that cannot be encoded."""
    ctx = "OffsetCommitKey"
    check_str(ctx, "group", group)
    check_str(ctx, "topic", topic)
    check_int(ctx, "partition", partition, INT32_MIN, INT32_MAX)


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
        return _HH.pack(version, len(g)) + g + INT16.pack(len(t)) + t + INT32.pack(partition)
    except PACK_ERRORS as e:
        raise encode_failure(
            e, "OffsetCommitKey", lambda: _validate_offset_commit_key(group, topic, partition)
        ) from e


def encode_group_metadata_key(group: str) -> bytes:
    """Encode a group metadata record key: int16 version 2, then the group string."""
    raw = check_str("GroupMetadataKey", "group", group)
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
    pack_h, pack_i, pack_hh = INT16.pack, INT32.pack, _HH.pack
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
    except PACK_ERRORS as e:
        i = len(out)
        raise encode_failure(
            e,
            "OffsetCommitKey",
            lambda: _validate_offset_commit_key(groups[i], topics[i], partitions[i]),
            item=i,
        ) from e
    return out


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    """Decode a record key.

    Key versions 0 and 1 give ``OffsetCommitKey``, 2 gives ``GroupMetadataKey``; 3 and above
    (KIP-848 and later record types) give ``UnknownKey(version, data after the version)`` without
    interpreting it. Raises ``RecordFormatError`` for a null, short, negative-version, truncated or
    over-long key; ``TypeError`` if ``data`` is not bytes-like.
    """
    buf, version = read_version(data, "record key")
    if version >= 3:
        return UnknownKey(version, buf[2:])
    if version < 0:
        raise RecordFormatError(f"record key: version: negative version {version}")
    if version < 2:
        # Fast path for a well-formed offset key (the bulk of a restore); anything irregular
        # falls through to the checked reader, which names the field at fault.
        n = len(buf)
        if n >= 4:
            group_end = 4 + INT16.unpack_from(buf, 2)[0]
            if 4 <= group_end <= n - 2:
                topic_end = group_end + 2 + INT16.unpack_from(buf, group_end)[0]
                if group_end + 2 <= topic_end == n - 4:
                    try:
                        return OffsetCommitKey(
                            buf[4:group_end].decode("utf-8"),
                            buf[group_end + 2 : topic_end].decode("utf-8"),
                            INT32.unpack_from(buf, topic_end)[0],
                        )
                    except UnicodeDecodeError:
                        pass
    r = Reader(buf, 2, f"{'OffsetCommitKey' if version < 2 else 'GroupMetadataKey'} v{version}")
    group = r.string("group")
    if version == 2:
        r.finish()
        return GroupMetadataKey(group)
    topic = r.string("topic")
    partition = r.int32("partition")
    r.finish()
    return OffsetCommitKey(group, topic, partition)
