"""Offset records a record at a time, at any version: the tests' statement of the layouts that
``state.formats.record_columns`` writes a column at a time, and bytes of the versions the job
never writes, for the decoders. Raises ``ValueError`` naming the field a value cannot hold.
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
from state.formats.records import encode_group_metadata_key, encode_group_metadata_value
from state.formats.records.wire import (
    FLEXIBLE_VERSION,
    INT16,
    INT16_MAX,
    INT32,
    INT32_MAX,
    INT32_MIN,
    INT64,
    INT64_MAX,
    INT64_MIN,
    NO_TAGGED_FIELDS,
    check_int,
    check_str,
    write_string,
)


def offset_commit_value_version(expire_timestamp_present: bool) -> int:
    """The OffsetCommitValue version Kafka 4.0 writes: 1 if an expire timestamp is set, else 3."""
    return 1 if expire_timestamp_present else 3


def encode_offset_commit_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    """An offset record key: int16 version (0 or 1), group, topic, partition."""
    if version not in (0, 1):
        raise ValueError(f"OffsetCommitKey: version must be 0 or 1, got {version!r}")
    ctx = "OffsetCommitKey"
    out = [INT16.pack(version)]
    write_string(out, check_str(ctx, "group", group), flexible=False)
    write_string(out, check_str(ctx, "topic", topic), flexible=False)
    out.append(INT32.pack(check_int(ctx, "partition", partition, INT32_MIN, INT32_MAX)))
    return b"".join(out)


def encode_offset_commit_value(value: OffsetAndMetadata, version: int | None = None) -> bytes:
    """An offset record value, version-prefixed; ``None`` picks Kafka's version. Only v1 holds an
    expire timestamp; below v3 the leader epoch is dropped (still range-checked)."""
    expire = value.expire_timestamp_ms
    if version is None:
        version = offset_commit_value_version(expire is not None)
    elif type(version) is not int or not 0 <= version <= 4:
        raise ValueError(f"OffsetCommitValue: version must be 0-4, got {version!r}")
    elif expire is not None and version != 1:
        raise ValueError(
            f"OffsetCommitValue v{version}: expireTimestamp={expire} can only be stored in "
            f"version 1"
        )
    ctx = f"OffsetCommitValue v{version}"
    offset = check_int(ctx, "offset", value.offset, INT64_MIN, INT64_MAX)
    epoch = check_int(ctx, "leaderEpoch", value.leader_epoch, INT32_MIN, INT32_MAX)
    metadata = check_str(ctx, "metadata", value.metadata)
    commit_ts = check_int(ctx, "commitTimestamp", value.commit_timestamp_ms, INT64_MIN, INT64_MAX)
    if expire is not None:
        expire = check_int(ctx, "expireTimestamp", expire, INT64_MIN, INT64_MAX)
    out = [INT16.pack(version), INT64.pack(offset)]
    if version >= 3:
        out.append(INT32.pack(epoch))
    write_string(out, metadata, flexible=version >= FLEXIBLE_VERSION)
    out.append(INT64.pack(commit_ts))
    if version == 1:
        out.append(INT64.pack(-1 if expire is None else expire))
    if version >= FLEXIBLE_VERSION:
        out.append(NO_TAGGED_FIELDS)
    return b"".join(out)


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    """A record's (key, value) bytes at the versions Kafka writes; ``ValueError`` when the value
    does not match the key type (an ``UnknownKey`` carries no value)."""
    key, value = record
    if isinstance(key, OffsetCommitKey):
        kb = encode_offset_commit_key(key.group, key.topic, key.partition)
        if value is None or isinstance(value, OffsetAndMetadata):
            return kb, None if value is None else encode_offset_commit_value(value)
    elif isinstance(key, GroupMetadataKey):
        kb = encode_group_metadata_key(key.group)
        if value is None or isinstance(value, GroupMetadataValue):
            return kb, None if value is None else encode_group_metadata_value(value)
    elif isinstance(key, UnknownKey):
        version = check_int("UnknownKey", "version", key.version, 3, INT16_MAX)
        if value is None:
            return INT16.pack(version) + bytes(key.data), None
    else:
        raise ValueError(f"record key must be a record key type, got {type(key).__name__}")
    raise ValueError(f"record value {type(value).__name__} does not match key {type(key).__name__}")
