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

The job writes Kafka 4.0's versions (``state.formats.record_columns``): 1 with an explicit
expire timestamp, else 3, which every Kafka reads (Kafka 4.1 writes v4 for its topic id tag).
"""

from __future__ import annotations

from state.coordinator.model import OffsetAndMetadata
from state.formats.records.wire import FLEXIBLE_VERSION, Reader, read_version

_MAX_VERSION = 4


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    """Decode an offset record value v0-v4: ``leader_epoch`` -1 below v3, ``expire_timestamp_ms``
    None unless v1 with one other than -1. Raises ``RecordFormatError``."""
    buf, version = read_version(data, "OffsetCommitValue", _MAX_VERSION)
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
