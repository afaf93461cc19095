"""A shard and its offsets-topic partition: loading the shard by replaying the partition, and the
shard as the records compaction of the partition would leave.

Kafka's coordinator loads a shard the same way when it becomes its leader: every record of the
partition in order, skipping what it cannot read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

import pyarrow as pa

from state.coordinator.config import CoordinatorConfig
from state.coordinator.model import GroupMetadataKey, OffsetCommitKey, Record
from state.engine.record_frame import records_table
from state.engine.shard_reads import snapshot
from state.engine.shard_state import ShardState, empty_shard, replay_records
from state.formats.records import RecordFormatError, decode_record


class LoadedShard(NamedTuple):
    """A shard rebuilt from its partition, and how many records it was rebuilt from."""

    state: ShardState
    records_read: int


def replay_log(
    shard_id: int,
    log: Iterable[tuple[bytes | None, bytes | None]],
    on_unreadable: Callable[[RecordFormatError], None] | None = None,
    config: CoordinatorConfig | None = None,
) -> LoadedShard:
    """The shard ``shard_id`` rebuilt from the (key, value) bytes of its offsets-topic partition,
    in log order. A record this code cannot read is skipped, as Kafka's loader skips what it does
    not understand, and passed to ``on_unreadable``; ``records_read`` counts the others."""
    records: list[Record] = []
    for key, value in log:
        try:
            records.append(decode_record(key, value))
        except RecordFormatError as error:
            if on_unreadable is not None:
                on_unreadable(error)
    return LoadedShard(replay_records(empty_shard(shard_id, config), records), len(records))


def snapshot_records(state: ShardState) -> pa.Table:
    """The shard's whole state as records (``RECORD_FRAME_SCHEMA``): what compaction of its
    offsets-topic partition would leave. Per group: its metadata record, then its offsets by
    topic and partition."""
    records: list[Record] = []
    for group_id, group in snapshot(state).items():
        if group.metadata is not None:
            records.append(Record(GroupMetadataKey(group_id), group.metadata))
        for (topic, partition), value in sorted(group.offsets.items()):
            records.append(Record(OffsetCommitKey(group_id, topic, partition), value))
    return records_table(records)
