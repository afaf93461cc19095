"""Applying a request frame to a shard: ``apply_batch``.

A batch is answered in three steps, all before the state changes:

1. Row checks over columns: rows the decoder rejected, dead letters, unknown APIs, unknown topics,
   invalid group ids and groups of other shards.
2. The fast path, over columns: groups whose rows in this batch are all OffsetCommits and that have
   no members. Their only state dependence is whether the group exists, which within the batch
   changes only when a commit writes.
3. The exact path: every other group, request by request through ``state.coordinator.handlers``
(Kafka's
   handlers, shared with the reference coordinator), over a view of the group's state that sees the
   batch's earlier records.

The records of steps 2 and 3 are reduced to the last record per key (as compaction would) and
replayed; expiry at ``now_ms`` runs first and its tombstones lead the records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.handlers import handle
from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
    TopicPartition,
)
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    REQUEST_FRAME_SCHEMA,
    Api,
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    Request,
)
from state.coordinator.rules import (
    CONSUMER_PROTOCOL_TYPE,
    INT64_MAX,
    MAX_RECORD_STRING_BYTES,
    error_reason,
    is_valid_topic,
)
from state.engine.hashing import key_hash, string_hash
from state.engine.offset_table import NO_EXPIRE, Located
from state.engine.outputs import RECORD_FRAME_SCHEMA, RESPONSE_FRAME_SCHEMA
from state.engine.record_frame import offset_records, records_table
from state.engine.shard_state import (
    ShardState,
    expire,
    next_expiry_ms,
    offset_items,
    replay_records,
)
from state.formats.records import encode_group_metadata_value
from state.formats.request_codec import decode_members

_APIS = [
    Api.OFFSET_COMMIT.value,
    Api.OFFSET_DELETE.value,
    Api.DELETE_GROUPS.value,
    Api.GROUP_METADATA.value,
]
_COMMIT, _OFFSET_DELETE, _DELETE_GROUPS, _GROUP_METADATA = range(4)
_OPTIONAL_COLUMNS = {"protocol_type": pa.string(), "protocol": pa.string(), "leader": pa.string()}


class ApplyResult(NamedTuple):
    """The shard after the batch, the records to append (``RECORD_FRAME_SCHEMA``, in the order to
    apply them: expiry tombstones first), one response row per partition or request
    (``RESPONSE_FRAME_SCHEMA``, in log order), and the earliest time anything can expire next."""

    state: ShardState
    records: pa.Table
    responses: pa.Table
    next_expiry_ms: int | None


def apply_batch(
    state: ShardState,
    frame: pa.Table | pd.DataFrame,
    now_ms: int,
    config: CoordinatorConfig,
) -> ApplyResult:
    """Expire what is due at ``now_ms``, then validate and apply the requests of ``frame``.

    ``frame`` holds ``REQUEST_FRAME_SCHEMA`` rows of this shard's groups in any order (rows are
    applied in log order: ``ingest_offset``, ``partition_index``), optionally with the
    ``protocol_type``/``protocol``/``leader`` columns of ``state.engine.request_frame``. Every row
    is answered:
    rows the decoder rejected with their own code, requests for another shard's group with
    NOT_COORDINATOR, and the rest by Kafka's rules. The state changes only by replaying the
    returned records. Equivalent to the reference coordinator expiring at ``now_ms`` and then
    handling the requests one by one.
    """
    expired = expire(state, now_ms, config)
    state = expired.state
    batch = _Batch.of(frame)
    answers = _Answers()
    writes = _Writes()
    if batch.n:
        _check_rows(batch, answers, state, config)
        fast, slow = _split_groups(batch, state)
        _fast_commits(batch, fast, state, config, answers, writes)
        _exact_path(batch, slow, state, config, answers, writes)
    request_records = writes.table()
    if request_records.num_rows:
        state = replay_records(state, request_records)
    records = (
        pa.concat_tables([expired.records, request_records])
        if expired.records.num_rows
        else request_records
    )
    return ApplyResult(state, records, answers.table(batch), next_expiry_ms(state))


# --- the batch -------------------------------------------------------------------------------


@dataclass
class _Batch:
    """The frame in log order, numeric columns as numpy, strings as Arrow."""

    table: pa.Table
    n: int
    ingest_offset: np.ndarray
    timestamp: np.ndarray
    generation: np.ndarray
    retention: np.ndarray
    leader_epoch: np.ndarray
    error_code: np.ndarray
    partition: np.ndarray  # int64, -1 where null
    partition_null: np.ndarray
    offset: np.ndarray  # int64, 0 where null
    offset_null: np.ndarray
    topic_null: np.ndarray
    api: np.ndarray  # index in _APIS, -1 unknown
    request_start: np.ndarray  # first row of its request
    rows: _Rows | None = None  # set by the row checks

    @staticmethod
    def of(frame: pa.Table | pd.DataFrame) -> _Batch:
        table = _as_table(frame)
        n = table.num_rows
        if n:
            order = np.lexsort(
                (_np(table, "partition_index", np.int64), _np(table, "ingest_offset", np.int64))
            )
            if (order != np.arange(n)).any():
                table = table.take(pa.array(order))
        table = table.combine_chunks()
        ingest = _np(table, "ingest_offset", np.int64)
        start = np.ones(n, dtype=bool)
        start[1:] = ingest[1:] != ingest[:-1]
        api = np.asarray(pc.fill_null(pc.index_in(table["api"], value_set=pa.array(_APIS)), -1))
        return _Batch(
            table=table,
            n=n,
            ingest_offset=ingest,
            timestamp=_np(table, "timestamp_ms", np.int64),
            generation=_np(table, "generation_id", np.int64),
            retention=_np(table, "retention_time_ms", np.int64),
            leader_epoch=_np(table, "leader_epoch", np.int64),
            error_code=_np(table, "error_code", np.int64),
            partition=_np(table, "partition", np.int64, -1),
            partition_null=np.asarray(table["partition"].is_null()),
            offset=_np(table, "offset", np.int64, 0),
            offset_null=np.asarray(table["offset"].is_null()),
            topic_null=np.asarray(table["topic"].is_null()),
            api=api.astype(np.int64),
            request_start=start,
        )

    def col(self, name: str) -> pa.Array:
        return self.table[name].combine_chunks()

    def strings(self, name: str, rows: np.ndarray) -> list[str | None]:
        return self.col(name).take(pa.array(rows, pa.int64())).to_pylist()


def _as_table(frame: pa.Table | pd.DataFrame) -> pa.Table:
    if isinstance(frame, pd.DataFrame):
        names = [f.name for f in REQUEST_FRAME_SCHEMA] + [
            c for c in _OPTIONAL_COLUMNS if c in frame.columns
        ]
        schema = pa.schema(
            list(REQUEST_FRAME_SCHEMA)
            + [pa.field(c, t) for c, t in _OPTIONAL_COLUMNS.items() if c in frame.columns]
        )
        frame = pa.Table.from_pandas(frame[names], schema=schema, preserve_index=False)
    present = set(frame.column_names)
    missing = [f.name for f in REQUEST_FRAME_SCHEMA if f.name not in present]
    if missing:
        raise ValueError(f"request frame lacks columns {missing}")
    for name, type_ in _OPTIONAL_COLUMNS.items():
        if name not in present:
            frame = frame.append_column(name, pa.nulls(frame.num_rows, type_))
    return frame


def _np(table: pa.Table, name: str, dtype: type, fill: int | None = None) -> np.ndarray:
    col = table[name]
    if fill is not None and col.null_count:
        col = pc.fill_null(col, fill)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks else pa.array([], col.type)
    return np.asarray(col).astype(dtype, copy=False)


# --- outputs ---------------------------------------------------------------------------------


@dataclass
class _Answers:
    """Responses as (row, request-level?, code, reason) in any order; sorted by row at the end."""

    rows: list[np.ndarray] = field(default_factory=list)
    request_level: list[np.ndarray] = field(default_factory=list)
    codes: list[np.ndarray] = field(default_factory=list)
    reasons: list[list[str | None]] = field(default_factory=list)

    def add(
        self,
        rows: np.ndarray,
        codes: np.ndarray | int,
        request_level: bool,
        reasons: list[str | None] | None = None,
    ) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        codes_arr = np.broadcast_to(np.asarray(codes, dtype=np.int64), rows.shape).copy()
        self.rows.append(rows)
        self.request_level.append(np.full(rows.size, request_level))
        self.codes.append(codes_arr)
        if reasons is None:
            table = {int(c): error_reason(int(c)) for c in np.unique(codes_arr)}
            reasons = [table[c] for c in codes_arr.tolist()]
        self.reasons.append(reasons)

    def table(self, batch: _Batch) -> pa.Table:
        if not self.rows:
            return RESPONSE_FRAME_SCHEMA.empty_table()
        rows = np.concatenate(self.rows)
        level = np.concatenate(self.request_level)
        codes = np.concatenate(self.codes)
        reasons = [r for part in self.reasons for r in part]
        order = np.argsort(rows, kind="stable")
        rows, level, codes = rows[order], level[order], codes[order]
        reasons_arr = pa.array(reasons, pa.string()).take(pa.array(order))
        take = pa.array(rows)
        src = batch.table
        mask = pa.array(level)
        topic = pc.if_else(
            mask, pa.scalar(None, pa.string()), src["topic"].combine_chunks().take(take)
        )
        partition = pc.if_else(
            mask, pa.scalar(None, pa.int32()), src["partition"].combine_chunks().take(take)
        )
        return pa.Table.from_arrays(
            [
                src["ingest_offset"].combine_chunks().take(take),
                src["request_id"].combine_chunks().take(take),
                src["group_id"].combine_chunks().take(take),
                src["api"].combine_chunks().take(take),
                topic,
                partition,
                pa.array(codes, pa.int16()),
                reasons_arr,
            ],
            schema=RESPONSE_FRAME_SCHEMA,
        )


@dataclass
class _Writes:
    """Records from the request paths with the batch row that wrote them (their log position)."""

    tables: list[pa.Table] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)

    def add(self, table: pa.Table, positions: np.ndarray) -> None:
        if table.num_rows:
            self.tables.append(table)
            self.positions.append(np.asarray(positions, dtype=np.float64))

    def table(self) -> pa.Table:
        if not self.tables:
            return RECORD_FRAME_SCHEMA.empty_table()
        table = pa.concat_tables(self.tables)
        order = np.argsort(np.concatenate(self.positions), kind="stable")
        return table.take(pa.array(order))


# --- step 1: row checks ----------------------------------------------------------------------


@dataclass
class _Rows:
    """Rows still to answer after the row checks, and the group of each."""

    commit: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # valid partitions
    other: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # other APIs' rows
    group_of_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per batch row
    group_names: list[str] = field(default_factory=list)  # batch-local group index -> id
    group_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # state code, -1


def _check_rows(
    batch: _Batch, answers: _Answers, state: ShardState, config: CoordinatorConfig
) -> None:
    n = batch.n
    all_rows = np.arange(n)
    rejected = batch.error_code != 0
    if rejected.any():
        idx = all_rows[rejected]
        reasons = batch.col("error_reason").take(pa.array(idx)).to_pylist()
        answers.add(
            idx,
            batch.error_code[idx],
            False,
            [r or "rejected by the request decoder" for r in reasons],
        )
    alive = ~rejected
    no_id = alive & np.asarray(batch.table["request_id"].is_null())
    # Nothing to answer to: a dead letter, whose reason says why.
    answers.add(
        all_rows[no_id],
        ErrorCode.INVALID_REQUEST,
        False,
        ["request has no request_id"] * int(no_id.sum()),
    )
    alive &= ~no_id
    # A request's alive rows: the first one answers for request-level errors.
    alive_idx = all_rows[alive]
    first = np.zeros(n, dtype=bool)
    if alive_idx.size:
        first_alive = np.ones(alive_idx.size, dtype=bool)
        first_alive[1:] = batch.ingest_offset[alive_idx[1:]] != batch.ingest_offset[alive_idx[:-1]]
        first[alive_idx[first_alive]] = True
    rows_in_request = np.zeros(n, dtype=np.int64)
    if alive_idx.size:
        _, inverse, counts = np.unique(
            batch.ingest_offset[alive_idx], return_inverse=True, return_counts=True
        )
        rows_in_request[alive_idx] = counts[inverse]

    unknown_api = alive & (batch.api < 0)
    if unknown_api.any():
        idx = all_rows[unknown_api & first]
        apis = batch.strings("api", idx)
        answers.add(
            idx,
            ErrorCode.INVALID_REQUEST,
            True,
            [f"unknown api {a!r} (known: {', '.join(_APIS)})" for a in apis],
        )
    alive &= ~unknown_api

    commit = alive & (batch.api == _COMMIT)
    # A commit listing no partitions is one row with null topic and partition: Kafka answers it
    # without consulting the coordinator.
    marker = commit & batch.topic_null & batch.partition_null & (rows_in_request == 1)
    answers.add(all_rows[marker], ErrorCode.NONE, True)
    commit &= ~marker
    null_offset = commit & batch.offset_null
    answers.add(
        all_rows[null_offset],
        ErrorCode.INVALID_REQUEST,
        False,
        ["committed offset is null"] * int(null_offset.sum()),
    )
    commit &= ~null_offset
    bad_topic = commit & ~_valid_partitions(batch)
    answers.add(all_rows[bad_topic], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False)
    commit &= ~bad_topic
    other = alive & (batch.api != _COMMIT)

    # Group checks, per row: INVALID_GROUP_ID, then NOT_COORDINATOR.
    group_col = batch.col("group_id")
    group_bytes = np.asarray(pc.fill_null(pc.binary_length(group_col), 0))
    valid_group = (group_bytes > 0) & (group_bytes <= MAX_RECORD_STRING_BYTES)
    candidates = (commit | other) & valid_group
    cand_idx = all_rows[candidates]
    names = group_col.take(pa.array(cand_idx))
    unique = pc.unique(names)
    local = np.asarray(pc.index_in(names, value_set=unique)).astype(np.int64)
    unique_names = unique.to_pylist()
    unique_large = unique.cast(pa.large_string())
    unique_codes = state.groups.names.lookup(unique_large, string_hash(unique_large))
    # Groups in the shard's dictionary were routed here when they were added.
    routed_unique = unique_codes >= 0
    for i in np.flatnonzero(~routed_unique).tolist():
        routed_unique[i] = (
            partition_for(unique_names[i], config.offsets_topic_partitions) == state.shard_id
        )
    routed = np.zeros(n, dtype=bool)
    routed[cand_idx] = routed_unique[local] if cand_idx.size else False
    code = np.where(~valid_group, ErrorCode.INVALID_GROUP_ID, ErrorCode.NOT_COORDINATOR)
    failed = (commit | other) & ~routed
    answers.add(all_rows[failed & commit], code[failed & commit], False)
    answers.add(all_rows[failed & other & first], code[failed & other & first], True)
    commit &= routed
    other &= routed

    group_of_row = np.full(n, -1, dtype=np.int64)
    group_of_row[cand_idx] = local
    # Keep only routed groups, renumbered; find their codes in the state.
    keep = np.flatnonzero(routed_unique)
    renumber = np.full(len(unique_names), -1, dtype=np.int64)
    renumber[keep] = np.arange(keep.size)
    has_group = np.flatnonzero(group_of_row >= 0)
    group_of_row[has_group] = renumber[group_of_row[has_group]]
    kept_names = [unique_names[i] for i in keep.tolist()]
    codes = unique_codes[keep]
    batch_rows = _Rows(all_rows[commit], all_rows[other], group_of_row, kept_names, codes)
    batch.rows = batch_rows


def _valid_partitions(batch: _Batch) -> np.ndarray:
    """Kafka's topic name rules and a non-negative partition, per row."""
    topic = batch.col("topic")
    # A batch names few distinct topics: check each once, with the rule the handlers use.
    unique = pc.unique(topic)
    valid = np.array([is_valid_topic(t) for t in unique.to_pylist()] + [False], dtype=bool)
    at = np.asarray(pc.fill_null(pc.index_in(topic, value_set=unique), len(unique)))
    return valid[at] & ~batch.partition_null & (batch.partition >= 0)


def _split_groups(batch: _Batch, state: ShardState) -> tuple[np.ndarray, np.ndarray]:
    """Batch-local group indexes of the fast path (commit-only in this batch, no members) and of
    the exact path."""
    rows = batch.rows
    assert rows is not None
    k = len(rows.group_names)
    slow = np.zeros(k, dtype=bool)
    slow[rows.group_of_row[rows.other]] = True
    known = rows.group_codes >= 0
    members = np.zeros(k, dtype=np.int64)
    members[known] = state.groups.members[rows.group_codes[known]]
    slow |= members > 0
    return np.flatnonzero(~slow), np.flatnonzero(slow)


# --- step 2: fast path -----------------------------------------------------------------------


def _fast_commits(
    batch: _Batch,
    fast_groups: np.ndarray,
    state: ShardState,
    config: CoordinatorConfig,
    answers: _Answers,
    writes: _Writes,
) -> None:
    rows = batch.rows
    assert rows is not None
    is_fast = np.zeros(len(rows.group_names), dtype=bool)
    is_fast[fast_groups] = True
    idx = rows.commit[is_fast[rows.group_of_row[rows.commit]]]
    if idx.size == 0:
        return
    local = rows.group_of_row[idx]
    k = len(rows.group_names)
    known = rows.group_codes >= 0
    exists_at_start = np.zeros(k, dtype=bool)
    exists_at_start[known] = state.groups.exists()[rows.group_codes[known]]

    take = pa.array(idx)
    metadata = batch.col("metadata").take(take)
    too_large = (
        np.asarray(pc.fill_null(pc.binary_length(metadata), 0)) > config.offset_metadata_max_bytes
    )
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
    code = np.where(
        group_error != ErrorCode.NONE,
        group_error,
        np.where(too_large, ErrorCode.OFFSET_METADATA_TOO_LARGE, ErrorCode.NONE),
    )
    answers.add(idx, code, False)

    ok = np.flatnonzero(code == ErrorCode.NONE)
    if ok.size == 0:
        return
    w = idx[ok]
    topics = batch.col("topic").take(pa.array(w))
    topic_local = np.asarray(pc.index_in(topics, value_set=pc.unique(topics))).astype(np.int64)
    g, t, p = local[ok], topic_local, batch.partition[w]
    # Last write per key wins: keep each key's last row in log order.
    order = np.lexsort((w, p, t, g))
    last = np.ones(w.size, dtype=bool)
    last[:-1] = (
        (g[order][1:] != g[order][:-1])
        | (t[order][1:] != t[order][:-1])
        | (p[order][1:] != p[order][:-1])
    )
    keep = np.sort(order[last])
    w = w[keep]
    take = pa.array(w)
    ts = batch.timestamp[w]
    retention = batch.retention[w]
    explicit = retention > 0
    expire_ts = np.where(
        explicit,
        np.where(
            ts > INT64_MAX - np.maximum(retention, 0),
            INT64_MAX,
            ts + np.where(explicit, retention, 0),
        ),
        NO_EXPIRE,
    )
    # OffsetCommitValue v1 (explicit expiry) has no leader epoch; keep what the record holds.
    epoch = np.where(explicit, -1, batch.leader_epoch[w])
    table = offset_records(
        batch.col("group_id").take(take),
        batch.col("topic").take(take),
        batch.partition[w].astype(np.int32),
        batch.offset[w],
        epoch.astype(np.int32),
        pc.fill_null(batch.col("metadata").take(take), ""),
        ts,
        expire_ts.astype(np.int64),
    )
    writes.add(table, w)


# --- step 3: exact path ----------------------------------------------------------------------


class _GroupView:
    """A group's state as the batch's earlier requests left it (``handlers.GroupView``)."""

    def __init__(
        self,
        metadata: GroupMetadataValue | None,
        count: int,
        known: dict[TopicPartition, OffsetAndMetadata | None],
        complete: bool,
    ) -> None:
        self._metadata = metadata
        self._count = count
        self._known = known
        self._complete = complete

    @property
    def metadata(self) -> GroupMetadataValue | None:
        return self._metadata

    def exists(self) -> bool:
        return self._metadata is not None or self._count > 0

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        if tp in self._known:
            return self._known[tp]
        if self._complete:
            return None
        raise KeyError(f"offset of {tp} was not loaded")

    def topic_partitions(self) -> list[TopicPartition]:
        if not self._complete:
            raise KeyError("the group's offsets were not loaded")
        return sorted(tp for tp, v in self._known.items() if v is not None)

    def apply(self, record: Record) -> None:
        key, value = record
        if isinstance(key, GroupMetadataKey):
            assert value is None or isinstance(value, GroupMetadataValue)
            self._metadata = value
        elif isinstance(key, OffsetCommitKey):
            tp = TopicPartition(key.topic, key.partition)
            before = self.offset(tp) is not None
            after = value is not None
            self._count += int(after) - int(before)
            self._known[tp] = value  # type: ignore[assignment]


def _exact_path(
    batch: _Batch,
    slow_groups: np.ndarray,
    state: ShardState,
    config: CoordinatorConfig,
    answers: _Answers,
    writes: _Writes,
) -> None:
    if slow_groups.size == 0:
        return
    rows = batch.rows
    assert rows is not None
    is_slow = np.zeros(len(rows.group_names), dtype=bool)
    is_slow[slow_groups] = True
    idx = np.sort(
        np.concatenate(
            [
                rows.commit[is_slow[rows.group_of_row[rows.commit]]],
                rows.other[is_slow[rows.group_of_row[rows.other]]],
            ]
        )
    )
    views = _load_views(batch, idx, slow_groups, state)
    table = batch.table
    cols = {
        name: table[name].combine_chunks().take(pa.array(idx)).to_pylist()
        for name in (
            "request_id",
            "group_id",
            "member_id",
            "group_instance_id",
            "topic",
            "metadata",
            "members_json",
            "protocol_type",
            "protocol",
            "leader",
        )
    }
    records: dict[object, tuple[float, Record]] = {}
    # Requests of one group in log order; groups are independent, so any group order will do.
    starts = np.flatnonzero(
        np.r_[True, batch.ingest_offset[idx][1:] != batch.ingest_offset[idx][:-1]]
    )
    stops = np.r_[starts[1:], idx.size]
    for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
        row = int(idx[a])
        group = cols["group_id"][a]
        view = views[group]
        request, problem = _request_of(batch, idx, cols, a, b)
        if request is None:
            answers.add(np.array([row]), ErrorCode.INVALID_REQUEST, True, [problem])
            continue
        result = handle(request, view, int(batch.timestamp[row]), state.shard_id, config)
        for seq, record in enumerate(result.records):
            view.apply(record)
            records.pop(record.key, None)  # re-inserting puts the key in last-write order
            records[record.key] = (row + seq / (len(result.records) + 1), record)
        single = result.responses[0] if len(result.responses) == 1 else None
        if single is None or single.topic is not None or single.partition is not None:
            answers.add(
                idx[a:b],
                np.array([r.error_code for r in result.responses]),
                False,
                [r.error_reason for r in result.responses],
            )
        else:
            (response,) = result.responses
            answers.add(np.array([row]), response.error_code, True, [response.error_reason])
    if records:
        positions = np.array([pos for pos, _ in records.values()])
        writes.add(records_table([r for _, r in records.values()]), positions)


def _request_of(
    batch: _Batch, idx: np.ndarray, cols: dict[str, list], a: int, b: int
) -> tuple[Request | None, str | None]:
    """The request of rows ``idx[a:b]`` (one ingest message), or None and why it is invalid."""
    row = int(idx[a])
    api = int(batch.api[row])
    request_id, group_id = cols["request_id"][a], cols["group_id"][a]
    if api == _COMMIT:
        parts = tuple(
            PartitionCommit(
                topic=cols["topic"][i],
                partition=int(batch.partition[idx[i]]),
                offset=int(batch.offset[idx[i]]),
                leader_epoch=int(batch.leader_epoch[idx[i]]),
                metadata=cols["metadata"][i] or "",
            )
            for i in range(a, b)
        )
        return (
            OffsetCommitRequest(
                request_id=request_id,
                group_id=group_id,
                partitions=parts,
                generation_id=int(batch.generation[row]),
                member_id=cols["member_id"][a] or "",
                group_instance_id=cols["group_instance_id"][a],
                retention_time_ms=int(batch.retention[row]),
            ),
            None,
        )
    if api == _OFFSET_DELETE:
        marker = b - a == 1 and batch.topic_null[row] and batch.partition_null[row]
        tps = (
            ()
            if marker
            else tuple(
                TopicPartition(cols["topic"][i] or "", int(batch.partition[idx[i]]))
                for i in range(a, b)
            )
        )
        return OffsetDeleteRequest(request_id, group_id, tps), None
    if api == _DELETE_GROUPS:
        return DeleteGroupsRequest(request_id, group_id), None
    try:
        members = decode_members(cols["members_json"][a] or "[]")
        request = GroupMetadataRequest(
            request_id=request_id,
            group_id=group_id,
            generation_id=int(batch.generation[row]),
            protocol_type=cols["protocol_type"][a] or CONSUMER_PROTOCOL_TYPE,
            protocol=cols["protocol"][a],
            leader=cols["leader"][a],
            members=members,
        )
        # A value the record cannot hold (e.g. a string over 32767 bytes) is the request's fault.
        encode_group_metadata_value(
            GroupMetadataValue(
                request.protocol_type,
                request.generation_id,
                request.protocol,
                request.leader,
                0,
                members,
            )
        )
    except ValueError as e:
        return None, f"members_json: {e}"
    return request, None


def _load_views(
    batch: _Batch, idx: np.ndarray, slow_groups: np.ndarray, state: ShardState
) -> dict[str, _GroupView]:
    """Views of the exact path's groups holding what their requests read: the keys they name, and
    every offset of groups with a DeleteGroups request."""
    rows = batch.rows
    assert rows is not None
    groups = state.groups
    codes = rows.group_codes[slow_groups]
    known_by_group: dict[int, dict[TopicPartition, OffsetAndMetadata | None]] = {
        int(g): {} for g in slow_groups
    }
    # Named keys of existing groups, found in one vectorized lookup.
    keyed = idx[
        (batch.api[idx] != _DELETE_GROUPS)
        & (batch.api[idx] != _GROUP_METADATA)
        & ~batch.topic_null[idx]
        & (batch.partition[idx] >= 0)
    ]
    local = rows.group_of_row[keyed]
    gcode = rows.group_codes[local]
    topic_names = batch.col("topic").take(pa.array(keyed)).cast(pa.large_string())
    tcode = state.topics.lookup(topic_names, string_hash(topic_names))
    names_list = topic_names.to_pylist()
    parts = batch.partition[keyed]
    for g, t, p in zip(local.tolist(), names_list, parts.tolist(), strict=True):
        known_by_group[g][TopicPartition(t, p)] = None
    present = (gcode >= 0) & (tcode >= 0)
    if present.any():
        q = np.flatnonzero(present)
        pg, pt, pp = gcode[q], tcode[q], parts[q].astype(np.int32)
        khash = key_hash(groups.names.hashes[pg], state.topics.hashes[pt], pp)
        loc = state.offsets.locate(khash, pg.astype(np.int32), pt.astype(np.int32), pp)
        live = np.flatnonzero(loc.live)
        if live.size:
            found = state.offsets.gather(Located(loc.delta[live], loc.base[live], loc.live[live]))
            for i, (tp, v) in zip(q[live].tolist(), offset_items(state, found), strict=True):
                known_by_group[int(local[i])][tp] = v

    # Whole groups for DeleteGroups.
    complete = set(rows.group_of_row[idx[batch.api[idx] == _DELETE_GROUPS]].tolist())
    whole = [g for g in complete if rows.group_codes[g] >= 0]
    if whole:
        wc = rows.group_codes[whole]
        all_rows = state.offsets.group_rows(wc, groups.names.hashes[wc])
        by_code = {int(c): g for g, c in zip(whole, wc.tolist(), strict=True)}
        for code in np.unique(all_rows.gcode).tolist():
            part = all_rows.take(np.flatnonzero(all_rows.gcode == code))
            known_by_group[by_code[code]].update(offset_items(state, part))

    views: dict[str, _GroupView] = {}
    for g, code in zip(slow_groups.tolist(), codes.tolist(), strict=True):
        metadata = groups.group_metadata(code) if code >= 0 else None
        count = int(groups.offset_count[code]) if code >= 0 else 0
        views[rows.group_names[g]] = _GroupView(metadata, count, known_by_group[g], g in complete)
    return views
