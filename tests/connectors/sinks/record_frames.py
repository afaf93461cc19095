"""Record frames for the sink tests: OffsetCommit and group metadata records, and reading back.

Key/value bytes are dummies: the sinks do not decode them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from connectors.sinks import BatchProgress, Sink
from state.formats.frames import RECORD_FRAME_SCHEMA


def commit(
    group: str,
    topic: str,
    partition: int,
    offset: int,
    *,
    leader_epoch: int | None = -1,
    metadata: str | None = "",
    commit_timestamp_ms: int | None = 1_000,
    expire_timestamp_ms: int | None = None,
) -> dict[str, Any]:
    """An OffsetCommit record; key/value bytes are dummies (the sink does not decode them)."""
    return {
        "kind": "offset",
        "group_id": group,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "leader_epoch": leader_epoch,
        "metadata": metadata,
        "commit_timestamp_ms": commit_timestamp_ms,
        "expire_timestamp_ms": expire_timestamp_ms,
        "generation": None,
        "members": None,
        "key": b"k",
        "value": b"v",
    }


def tombstone(group: str, topic: str, partition: int) -> dict[str, Any]:
    record = commit(group, topic, partition, 0)
    for name in ("offset", "leader_epoch", "metadata", "commit_timestamp_ms", "value"):
        record[name] = None
    return record


def group_metadata(group: str, generation: int, members: int) -> dict[str, Any]:
    record = commit(group, "", -1, 0)
    record.update(kind="group", topic=None, offset=None, leader_epoch=None, metadata=None)
    record.update(commit_timestamp_ms=None, generation=generation, members=members)
    return record


def group_tombstone(group: str) -> dict[str, Any]:
    record = group_metadata(group, 0, 0)
    record.update(generation=None, members=None, value=None)
    return record


def frame(*records: dict[str, Any]) -> pa.Table:
    return pa.Table.from_pylist(list(records), schema=RECORD_FRAME_SCHEMA)


def progress(batch_id: int, **fields: Any) -> BatchProgress:
    return BatchProgress(batch_id=batch_id, **fields)


def offsets_of(sink: Sink, group: str) -> dict[tuple[str, int], int]:
    return {(o.topic, o.partition): o.offset for o in sink.fetch_offsets(group)}
