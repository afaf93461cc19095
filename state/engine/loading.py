"""A shard and its offsets-topic partition: loading the shard by replaying the partition, and the
shard as the records compaction of the partition would leave.

Kafka's coordinator loads a shard the same way when it becomes its leader: every record of the
partition in order, skipping what it cannot read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice, pairwise
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.config import CoordinatorConfig
from state.coordinator.model import GroupMetadataKey, Record, UnknownKey
from state.coordinator.partitioner import partition_for
from state.engine.offset_rows import Rows
from state.engine.offset_table import NO_EXPIRE
from state.engine.record_frame import offset_records, records_table
from state.engine.shard_state import ShardState, empty_shard, replay_records
from state.formats.frames import RECORD_FRAME_SCHEMA
from state.formats.record_column_decoding import decode_offset_commit_columns
from state.formats.records import RecordFormatError, decode_record

#: Records decoded and replayed at a time when loading from (key, value) pairs.
LOAD_CHUNK = 100_000
#: Offsets per piece of a rebuilt shard's snapshot written to a sink (``snapshot_record_chunks``).
SNAPSHOT_CHUNK = 500_000


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
    return replay_log_chunks(shard_id, _chunks(log), on_unreadable, config)


def replay_log_chunks(
    shard_id: int,
    chunks: Iterable[tuple[pa.Array, pa.Array]],
    on_unreadable: Callable[[RecordFormatError], None] | None = None,
    config: CoordinatorConfig | None = None,
) -> LoadedShard:
    """``replay_log`` over the partition as chunks of (keys, values) binary columns: each chunk
    is decoded a column at a time where the layout allows (``record_column_decoding``) and
    replayed, so memory follows the chunk and the state, not the partition."""
    state = empty_shard(shard_id, config)
    read = 0
    for keys, values in chunks:
        frame, _, count = positioned_record_frame_of(keys, values, on_unreadable)
        state = replay_records(state, frame)
        read += count
    return LoadedShard(state, read)


def _chunks(
    log: Iterable[tuple[bytes | None, bytes | None]],
) -> Iterator[tuple[pa.Array, pa.Array]]:
    pairs = iter(log)
    while chunk := list(islice(pairs, LOAD_CHUNK)):
        keys, values = zip(*chunk, strict=True)
        yield pa.array(keys, pa.binary()), pa.array(values, pa.binary())


def positioned_record_frame_of(
    keys: pa.Array,
    values: pa.Array,
    on_unreadable: Callable[[RecordFormatError], None] | None = None,
) -> tuple[pa.Table, np.ndarray, int]:
    """The record frame of offsets-topic records given as binary columns, in their order, each
    row's position among the input records, and how many were readable. Unreadable records go to
    ``on_unreadable``; records of key types not interpreted here are counted and left out."""
    columns = decode_offset_commit_columns(keys, values)
    rows = np.flatnonzero(columns.decoded)
    n = len(rows)
    mask = pa.array(columns.decoded)
    fast = pa.table(
        {
            "kind": pa.array(["offset"] * n, pa.string()),
            "group_id": columns.group_id,
            "topic": columns.topic,
            "partition": pa.array(columns.partition, pa.int32()),
            "offset": columns.offset,
            "leader_epoch": columns.leader_epoch,
            "metadata": columns.metadata,
            "commit_timestamp_ms": columns.commit_timestamp_ms,
            "expire_timestamp_ms": columns.expire_timestamp_ms,
            "generation": pa.nulls(n, pa.int32()),
            "members": pa.nulls(n, pa.int32()),
            "key": keys.filter(mask).cast(pa.binary()),
            "value": values.filter(mask).cast(pa.binary()),
        },
        schema=RECORD_FRAME_SCHEMA,
    )
    if n == len(keys):
        return fast, rows.astype(np.int64), n
    records: list[Record] = []
    positions: list[int] = []
    unknown = 0
    for i in np.flatnonzero(~columns.decoded).tolist():
        try:
            record = decode_record(keys[i].as_py(), values[i].as_py())
        except RecordFormatError as error:
            if on_unreadable is not None:
                on_unreadable(error)
            continue
        if isinstance(record.key, UnknownKey):
            unknown += 1
            continue
        records.append(record)
        positions.append(i)
    if not records:
        return fast, rows.astype(np.int64), n + unknown
    both = pa.concat_tables([fast, records_table(records)])
    all_positions = np.concatenate([rows, np.array(positions, np.int64)]).astype(np.int64)
    order = np.argsort(all_positions, kind="stable")
    return both.take(pa.array(order)), all_positions[order], n + unknown + len(records)


def snapshot_records(state: ShardState) -> pa.Table:
    """The shard's whole state as records (``RECORD_FRAME_SCHEMA``): what compaction of its
    offsets-topic partition would leave. Per group: its metadata record, then its offsets by
    topic and partition. Built a column at a time: a loaded shard can hold millions."""
    rows = state.offsets.live_rows()
    return _snapshot_table(state, rows, np.flatnonzero(state.groups.has_metadata))


def snapshot_record_chunks(
    state: ShardState, chunk_rows: int = SNAPSHOT_CHUNK
) -> Iterator[pa.Table]:
    """``snapshot_records`` in pieces of whole groups, about ``chunk_rows`` offsets each, in its
    order: a rebuilt shard of millions of keys goes to a sink without its whole snapshot in
    memory."""
    rows = state.offsets.live_rows()
    by_group = np.argsort(rows.gcode, kind="stable")
    codes = rows.gcode[by_group]
    with_metadata = np.flatnonzero(state.groups.has_metadata)
    count = max(len(state.groups.has_metadata), int(codes[-1]) + 1 if len(codes) else 0)
    # Cut after the group where each multiple of chunk_rows offsets falls.
    per_group = np.cumsum(np.bincount(codes, minlength=count))
    cuts = np.searchsorted(per_group, np.arange(chunk_rows, len(codes), chunk_rows)) + 1
    bounds = np.unique(np.concatenate([[0], cuts, [count]]))
    for lo, hi in pairwise(bounds.tolist()):
        first, last = np.searchsorted(codes, [lo, hi])
        metadata = with_metadata[(with_metadata >= lo) & (with_metadata < hi)]
        if last > first or len(metadata):
            yield _snapshot_table(state, rows.take(by_group[first:last]), metadata)


def _snapshot_table(state: ShardState, rows: Rows, with_metadata: np.ndarray) -> pa.Table:
    """The records of ``rows`` and of the metadata of groups ``with_metadata`` (codes), in
    ``snapshot_records``' order."""
    groups = state.groups
    offsets = offset_records(
        groups.names.names.take(pa.array(rows.gcode, pa.int64())),
        state.topics.names.take(pa.array(rows.tcode, pa.int64())),
        rows.partition,
        rows.offset,
        rows.leader_epoch,
        rows.metadata,
        rows.commit_ts,
        np.where(rows.expire_ts == NO_EXPIRE, -1, rows.expire_ts),
    )
    names = groups.names.names
    metadata = records_table(
        Record(GroupMetadataKey(names[code].as_py()), groups.group_metadata(code))
        for code in with_metadata.tolist()
    )
    table = pa.concat_tables([metadata, offsets])
    order = pa.table(
        {
            "group": np.concatenate([with_metadata.astype(np.int64), rows.gcode]),
            "rank": np.concatenate(
                [np.zeros(len(with_metadata), np.int8), np.ones(len(rows), np.int8)]
            ),
            "topic": table["topic"],
            "partition": table["partition"],
        }
    )
    index = pc.sort_indices(
        order,
        sort_keys=[
            ("group", "ascending"),
            ("rank", "ascending"),
            ("topic", "ascending"),
            ("partition", "ascending"),
        ],
    )
    return table.take(index)


def record_partitions(records: pa.Table, config: CoordinatorConfig) -> pa.Array | None:
    """The offsets-topic partition of each record (its group's ``partition_for``); None when
    a state holds one partition (the shard is the partition)."""
    if config.shard_count == config.offsets_topic_partitions:
        return None
    groups = records["group_id"].combine_chunks().dictionary_encode()
    partitions = [
        partition_for(group, config.offsets_topic_partitions)
        for group in groups.dictionary.to_pylist()
    ]
    return pa.array(partitions, pa.int32()).take(groups.indices)
