"""Whole records: a (key, value) pair decoded or encoded by the key's type.

A null value is a tombstone. Records of key types this project does not interpret (``UnknownKey``)
keep their key bytes and carry no value.
"""

from __future__ import annotations

from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
    UnknownKey,
)
from state.formats.records.group_metadata_value import (
    decode_group_metadata_value,
    encode_group_metadata_value,
)
from state.formats.records.keys import (
    decode_key,
    encode_group_metadata_key,
    encode_offset_commit_key,
)
from state.formats.records.offset_commit_value import (
    decode_offset_commit_value,
    encode_offset_commit_value,
)
from state.formats.records.wire import INT16, INT16_MAX, check_int

__all__ = ["decode_record", "encode_record"]


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
        version = check_int("UnknownKey", "version", key.version, 3, INT16_MAX)
        if value is None:
            return INT16.pack(version) + bytes(key.data), None
    else:
        raise ValueError(f"record key must be a record key type, got {type(key).__name__}")
    raise ValueError(f"record value {type(value).__name__} does not match key {type(key).__name__}")
