"""Whole records: a (key, value) pair decoded by the key's type.

A null value is a tombstone. Records of key types this project does not interpret (``UnknownKey``)
keep their key bytes and carry no value.
"""

from __future__ import annotations

from state.coordinator.model import OffsetCommitKey, Record, UnknownKey
from state.formats.records.group_metadata_value import decode_group_metadata_value
from state.formats.records.keys import decode_key
from state.formats.records.offset_commit_value import decode_offset_commit_value

__all__ = ["decode_record"]


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
