"""Record keys: ``OffsetCommitKey`` and ``GroupMetadataKey``.

A key is an int16 *key version* (Kafka 4.x calls it the record type) followed by the key struct::

    key version | struct                                        | decoded as
    ------------+-----------------------------------------------+-------------------------------
    0, 1        | group string, topic string, partition int32   | OffsetCommitKey
    2           | group string                                  | GroupMetadataKey
    3+          | (KIP-848 consumer/share/streams group records) | UnknownKey(version, rest)

Key structs are never flexible. Writers use 1 for offset keys (``state.formats.record_columns``)
and 2 for group keys, as Kafka 4.0 does.
"""

from __future__ import annotations

import struct

from state.coordinator.model import GroupMetadataKey, OffsetCommitKey, UnknownKey
from state.formats.records.wire import (
    INT16,
    INT32,
    Reader,
    RecordFormatError,
    check_str,
    read_version,
)

OFFSET_COMMIT_KEY_VERSION = 1  # 0 is the legacy type
GROUP_METADATA_KEY_VERSION = 2

_HH = struct.Struct(">hh")  # key version, length of the group string


def encode_group_metadata_key(group: str) -> bytes:
    """A group metadata record key: int16 version 2, then the group string."""
    raw = check_str("GroupMetadataKey", "group", group)
    assert raw is not None  # non-nullable
    return _HH.pack(GROUP_METADATA_KEY_VERSION, len(raw)) + raw


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    """Decode a record key (table above; 3+ as ``UnknownKey(version, rest)``, uninterpreted).
    ``RecordFormatError`` for a broken key, ``TypeError`` if ``data`` is not bytes-like."""
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
