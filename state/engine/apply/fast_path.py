"""Step 3 of ``apply_batch``: commits of groups without members, over columns.

Kafka's rules reduce to: a negative generation writes (unless the metadata is too large); any
other is UNKNOWN_MEMBER_ID if the group exists at that point of the log, else ILLEGAL_GENERATION.
Existence changes within the batch only when a commit writes, so one pass answers every row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.rules import metadata_too_large
from state.engine.apply.accumulators import Answers, Writes
from state.engine.apply.batch import Batch
from state.engine.apply.routing import Routing
from state.engine.columns import INT64_MAX, last_index_per_key, saturating_add
from state.engine.offset_table import NO_EXPIRE
from state.engine.record_frame import offset_records
from state.engine.shard_state import ShardState


def fast_commits(
    batch: Batch,
    routing: Routing,
    fast_groups: np.ndarray,
    state: ShardState,
    config: CoordinatorConfig,
    answers: Answers,
    writes: Writes,
) -> None:
    """Answer the commit partitions of fast_groups (local indexes); write the last offset
    per key."""
    is_fast = np.zeros(len(routing.group_names), dtype=bool)
    is_fast[fast_groups] = True
    idx = routing.commit[is_fast[routing.group_of_row[routing.commit]]]
    if idx.size == 0:
        return
    code = _commit_codes(batch, routing, idx, state, config)
    answers.add(idx, code, False)
    ok = np.flatnonzero(code == ErrorCode.NONE)
    if ok.size:
        _write_commits(batch, routing.group_of_row[idx[ok]], idx[ok], writes)


def _commit_codes(
    batch: Batch,
    routing: Routing,
    idx: np.ndarray,
    state: ShardState,
    config: CoordinatorConfig,
) -> np.ndarray:
    """The error code of each commit partition at rows ``idx`` (sorted)."""
    local = routing.group_of_row[idx]
    k = len(routing.group_names)
    known = routing.group_codes >= 0
    exists_at_start = np.zeros(k, dtype=bool)
    exists_at_start[known] = state.groups.exists()[routing.group_codes[known]]

    too_large = _metadata_too_large(batch.col("metadata").take(pa.array(idx)), config)
    generation = batch.generation[idx]
    ingest = batch.ingest_offset[idx]
    # A group that does not exist comes to exist with the first commit that writes; later requests
    # (not later partitions of the same request) see it. Only negative-generation commits can write
    # to a group without members.
    writes_any = (generation < 0) & ~too_large
    first_write = np.full(k, INT64_MAX, dtype=np.int64)
    np.minimum.at(first_write, local[writes_any], ingest[writes_any])
    exists = exists_at_start[local] | (ingest > first_write[local])
    group_error = np.where(
        generation < 0,
        ErrorCode.NONE,
        np.where(exists, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION),
    )
    return np.where(
        group_error != ErrorCode.NONE,
        group_error,
        np.where(too_large, ErrorCode.OFFSET_METADATA_TOO_LARGE, ErrorCode.NONE),
    )


def _metadata_too_large(metadata: pa.Array, config: CoordinatorConfig) -> np.ndarray:
    """``rules.metadata_too_large`` over a column; only metadata of more bytes than the limit can
    have too many UTF-16 code units, and those few are counted one at a time."""
    limit = config.offset_metadata_max_bytes
    too_large = np.asarray(pc.fill_null(pc.binary_length(metadata), 0)) > limit
    longer = np.flatnonzero(too_large)
    if longer.size:
        texts = metadata.take(pa.array(longer)).to_pylist()
        too_large[longer] = [metadata_too_large(text, config) for text in texts]
    return too_large


def _write_commits(batch: Batch, local: np.ndarray, rows: np.ndarray, writes: Writes) -> None:
    """Write the records of the accepted commits at rows ``rows`` (``local``: their groups), the
    last per key."""
    topics = batch.col("topic").take(pa.array(rows))
    topic_local = topics.dictionary_encode(null_encoding="encode").indices.to_numpy()
    rows = rows[last_index_per_key(local, topic_local.astype(np.int64), batch.partition[rows])]
    take = pa.array(rows)
    ts = batch.timestamp[rows]
    retention = batch.retention[rows]
    explicit = retention != -1
    # A retention_time_ms other than -1 sets an explicit expire timestamp; the sum saturates as in
    # ``rules.expire_timestamp``, so both paths write the same record.
    expire_ts = np.where(explicit, saturating_add(ts, np.where(explicit, retention, 0)), NO_EXPIRE)
    # OffsetCommitValue v1 (explicit expiry) has no leader epoch; keep what the record holds.
    epoch = np.where(explicit, -1, batch.leader_epoch[rows])
    table = offset_records(
        batch.col("group_id").take(take),
        batch.col("topic").take(take),
        batch.partition[rows].astype(np.int32),
        batch.offset[rows],
        epoch.astype(np.int32),
        pc.fill_null(batch.col("metadata").take(take), ""),
        ts,
        expire_ts.astype(np.int64),
    )
    writes.add(table, rows)
