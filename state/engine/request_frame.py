"""Request frames (``EXTENDED_REQUEST_FRAME_SCHEMA``) from raw ingest messages (the job) and from
request objects (tests, benchmarks, clients).

A valid OffsetCommit is read straight into columns (``state.formats.request_fast``), any other
message by ``request_codec.decode_request``. Request-level fields are kept once per message and
repeated by Arrow, so a 1,000-partition commit costs one append per request-level column."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from state.coordinator.requests import (
    Api,
    DecodeError,
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    Request,
    TxnOffsetCommitRequest,
)
from state.formats.frames import EXTENDED_REQUEST_FRAME_SCHEMA
from state.formats.request_codec import decode_request, encode_members, keyed_request
from state.formats.request_fast import CommitColumns, commit_columns, decode_commit_columns

_SCHEMA = EXTENDED_REQUEST_FRAME_SCHEMA


def _row(ingest_offset: int, index: int, timestamp_ms: int, **values: object) -> dict[str, object]:
    """A frame row: the non-null columns' defaults, overridden by ``values``."""
    row: dict[str, object] = {
        "ingest_offset": ingest_offset,
        "partition_index": index,
        "timestamp_ms": timestamp_ms,
        "generation_id": -1,
        "member_id": "",
        "retention_time_ms": -1,
        "leader_epoch": -1,
        "error_code": 0,
    }
    row.update(values)
    return row


def request_rows(
    request: Request | DecodeError, ingest_offset: int, timestamp_ms: int
) -> list[dict[str, object]]:
    """The frame rows of one message holding ``request``: one per partition, or one with null
    topic and partition (no partitions, or a decode error)."""
    if isinstance(request, DecodeError):
        return [
            _row(
                ingest_offset,
                0,
                timestamp_ms,
                api=request.api,
                request_id=request.request_id,
                group_id=request.group_id,
                error_code=int(request.error_code),
                error_reason=request.reason,
            )
        ]
    head = {
        "request_id": request.request_id,
        "group_id": request.group_id,
        "timeout_ms": None if isinstance(request, TxnOffsetCommitRequest) else request.timeout_ms,
    }
    if isinstance(request, OffsetCommitRequest | TxnOffsetCommitRequest):
        # A TxnOffsetCommit's rows are an OffsetCommit's without retention, with its
        # transactional id (a tenant's ACLs check it); producer id and epoch stay out: the
        # transaction committed before the job read it, and no rule reads them.
        transactional = isinstance(request, TxnOffsetCommitRequest)
        if transactional:
            head["transactional_id"] = request.transactional_id
        head.update(
            api=(Api.TXN_OFFSET_COMMIT if transactional else Api.OFFSET_COMMIT).value,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            retention_time_ms=(
                request.retention_time_ms if isinstance(request, OffsetCommitRequest) else -1
            ),
        )
        if not request.partitions:
            return [_row(ingest_offset, 0, timestamp_ms, **head)]
        return [
            _row(
                ingest_offset,
                i,
                timestamp_ms,
                **head,
                topic=p.topic,
                partition=p.partition,
                offset=p.offset,
                leader_epoch=p.leader_epoch,
                metadata=p.metadata,
            )
            for i, p in enumerate(request.partitions)
        ]
    if isinstance(request, OffsetDeleteRequest):
        head["api"] = Api.OFFSET_DELETE.value
        if not request.partitions:
            return [_row(ingest_offset, 0, timestamp_ms, **head)]
        return [
            _row(ingest_offset, i, timestamp_ms, **head, topic=tp[0], partition=tp[1])
            for i, tp in enumerate(request.partitions)
        ]
    if isinstance(request, DeleteGroupsRequest):
        return [_row(ingest_offset, 0, timestamp_ms, **head, api=Api.DELETE_GROUPS.value)]
    if isinstance(request, GroupMetadataRequest):
        return [
            _row(
                ingest_offset,
                0,
                timestamp_ms,
                **head,
                api=Api.GROUP_METADATA.value,
                generation_id=request.generation_id,
                members_json=encode_members(request.members),
                protocol_type=request.protocol_type,
                protocol=request.protocol,
                leader=request.leader,
            )
        ]
    raise TypeError(f"not a request: {type(request).__name__}")


#: The columns that vary between the rows of one message.
_ROW_COLUMNS = ("partition_index", "topic", "partition", "offset", "leader_epoch", "metadata")
#: The message's own columns, in the order of ``SegmentedFrame.add_commit``'s tuple.
_HEAD_COLUMNS = (
    "ingest_offset",
    "timestamp_ms",
    "api",
    "request_id",
    "group_id",
    "generation_id",
    "member_id",
    "group_instance_id",
    "retention_time_ms",
    "members_json",
    "error_code",
    "error_reason",
    "protocol_type",
    "protocol",
    "leader",
    "timeout_ms",
    "transactional_id",
)


class SegmentedFrame:
    """A request frame built message by message, in order."""

    def __init__(self) -> None:
        self._heads: list[tuple[object, ...]] = []  # per message, in _HEAD_COLUMNS order
        self._counts: list[int] = []
        self._rows: dict[str, list[object]] = {n: [] for n in _ROW_COLUMNS}

    def add_commit(self, commit: CommitColumns, ingest_offset: int, timestamp_ms: int) -> None:
        """The rows of an OffsetCommit with partitions, in request order."""
        self._heads.append(
            (
                ingest_offset,
                timestamp_ms,
                Api.OFFSET_COMMIT.value,
                commit.request_id,
                commit.group_id,
                commit.generation_id,
                commit.member_id,
                commit.group_instance_id,
                commit.retention_time_ms,
                None,  # members_json
                0,  # error_code
                None,  # error_reason
                None,  # protocol_type
                None,  # protocol
                None,  # leader
                commit.timeout_ms,
                None,  # transactional_id
            )
        )
        n = len(commit.partitions)
        self._counts.append(n)
        rows = self._rows
        rows["partition_index"] += range(n)
        rows["topic"] += commit.topics
        rows["partition"] += commit.partitions
        rows["offset"] += commit.offsets
        rows["leader_epoch"] += commit.leader_epochs
        rows["metadata"] += commit.metadata

    def add_row(self, row: Mapping[str, object]) -> None:
        """One frame row (``request_rows``) as a segment of its own."""
        self._heads.append(tuple(row.get(name) for name in _HEAD_COLUMNS))
        self._counts.append(1)
        for name, values in self._rows.items():
            values.append(row.get(name))

    def add(self, request: Request | DecodeError, ingest_offset: int, timestamp_ms: int) -> None:
        """The rows of one ingest message holding ``request``."""
        if isinstance(request, OffsetCommitRequest) and request.partitions:
            self.add_commit(commit_columns(request), ingest_offset, timestamp_ms)
        else:
            for row in request_rows(request, ingest_offset, timestamp_ms):
                self.add_row(row)

    def table(self) -> pa.Table:
        counts = self._counts
        n = len(self._rows["partition_index"])
        # Row i of the frame belongs to segment repeat[i]; no take when every segment is one row.
        repeat = (
            None if n == len(counts) else np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        )
        heads = {
            name: _head_column(values, _SCHEMA.field(name).type, n, repeat)
            for name, values in zip(_HEAD_COLUMNS, _transposed(self._heads), strict=True)
        }
        columns = [
            pa.array(self._rows[f.name], f.type) if f.name in self._rows else heads[f.name]
            for f in _SCHEMA
        ]
        return pa.Table.from_arrays(columns, schema=_SCHEMA)


def _head_column(
    values: tuple[object, ...], kind: pa.DataType, n: int, repeat: np.ndarray | None
) -> pa.Array:
    """A message-level column over the frame's ``n`` rows: message ``repeat[i]``'s value on row
    ``i``. Most are one value for the whole batch (the api, a null), made without a take."""
    if not values or values.count(values[0]) == len(values):
        first = values[0] if values else None
        return pa.nulls(n, kind) if first is None else pa.repeat(pa.scalar(first, kind), n)
    column = pa.array(values, kind)
    return column if repeat is None else column.take(repeat)


def _transposed(heads: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return list(zip(*heads, strict=True)) if heads else [() for _ in _HEAD_COLUMNS]


def frame_from_requests(
    requests: Sequence[Request | DecodeError],
    start_offset: int = 0,
    timestamps: int | Sequence[int] = 0,
) -> pa.Table:
    """A request frame of ``requests``, one message each from ``start_offset``; ``timestamps``:
    one append time for all, or one per request."""
    if isinstance(timestamps, int):
        stamps: Sequence[int] = [timestamps] * len(requests)
    else:
        stamps = timestamps
        if len(stamps) != len(requests):
            raise ValueError(f"{len(stamps)} timestamps for {len(requests)} requests")
    frame = SegmentedFrame()
    for i, (request, ts) in enumerate(zip(requests, stamps, strict=True)):
        frame.add(request, start_offset + i, ts)
    return frame.table()


#: A raw ingest message: ingest offset, append time in ms, value bytes.
_Message = tuple[int, int, bytes | bytearray | memoryview | None]


def decode_request_messages(
    messages: Iterable[_Message],
    keys: Iterable[bytes | None] | None = None,
) -> pa.Table:
    """A request frame of raw messages (ingest offset, append time in ms, value bytes): a valid
    request becomes its rows, anything else one row with the decoder's error code and reason.
    With ``keys`` (the messages' keys, in order) a TxnOffsetCommit must be keyed by its group id
    (``request_codec.keyed_request``); without, keys are not looked at."""
    frame = SegmentedFrame()
    checked = keys is not None
    with_keys = zip(messages, keys, strict=True) if keys is not None else _unkeyed(messages)
    for (offset, timestamp_ms, value), key in with_keys:
        data = bytes(value) if value is not None and len(value) else None
        if data is not None:
            # The fast path reads OffsetCommits only: no key to check.
            commit = decode_commit_columns(data)
            if commit is not None:
                frame.add_commit(commit, int(offset), int(timestamp_ms))
                continue
        request = decode_request(data)
        if checked:
            request = keyed_request(request, key)
        frame.add(request, int(offset), int(timestamp_ms))
    return frame.table()


def _unkeyed(messages: Iterable[_Message]) -> Iterator[tuple[_Message, None]]:
    for message in messages:
        yield message, None
