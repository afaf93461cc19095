"""Request frames (``REQUEST_FRAME_SCHEMA``) from request objects (tests, benchmarks, clients)
and from raw ingest messages (the streaming job, for messages its own parser did not vouch for).

A frame may carry columns beyond ``REQUEST_FRAME_SCHEMA``: a GroupMetadata request's protocol
type, protocol and leader (``GROUP_METADATA_FIELDS``; without them the shard stores "consumer",
null and null), and the request's timeout (``REQUEST_TIMEOUT_FIELD``; without it every request
gets the coordinator's ``request_timeout_ms``). These build frames with all of them.

Raw messages take a fast path (``decode_request_messages``: valid OffsetCommits read straight
into columns, ``state.formats.request_fast``, into a ``SegmentedFrame``) held equal to the
reference (``decode_request_messages_exact``: every message a request object, then its rows).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa

from state.coordinator.requests import (
    Api,
    DecodeError,
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    Request,
)
from state.engine.request_segments import SegmentedFrame
from state.formats.frames import EXTENDED_REQUEST_FRAME_SCHEMA
from state.formats.request_codec import decode_request, encode_members
from state.formats.request_fast import commit_columns, decode_commit_columns


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
    """The frame rows of one ingest message holding ``request``: one per partition, or one row with
    null topic and partition for a request without partitions or a decode error."""
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
        "timeout_ms": request.timeout_ms,
    }
    if isinstance(request, OffsetCommitRequest):
        head.update(
            api=Api.OFFSET_COMMIT.value,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            retention_time_ms=request.retention_time_ms,
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


class _FrameColumns:
    """A request frame built a column at a time: an OffsetCommit's partitions extend the columns
    in bulk (the hot path), any other request goes through :func:`request_rows`."""

    def __init__(self) -> None:
        self.columns: dict[str, list[object]] = {n: [] for n in EXTENDED_REQUEST_FRAME_SCHEMA.names}

    def add(self, request: Request | DecodeError, ingest_offset: int, timestamp_ms: int) -> None:
        columns = self.columns
        if isinstance(request, OffsetCommitRequest) and request.partitions:
            partitions = request.partitions
            n = len(partitions)
            for name, value in (
                ("ingest_offset", ingest_offset),
                ("timestamp_ms", timestamp_ms),
                ("api", Api.OFFSET_COMMIT.value),
                ("request_id", request.request_id),
                ("group_id", request.group_id),
                ("generation_id", request.generation_id),
                ("member_id", request.member_id),
                ("group_instance_id", request.group_instance_id),
                ("retention_time_ms", request.retention_time_ms),
                ("timeout_ms", request.timeout_ms),
                ("members_json", None),
                ("error_code", 0),
                ("error_reason", None),
                ("protocol_type", None),
                ("protocol", None),
                ("leader", None),
            ):
                columns[name].extend([value] * n)
            columns["partition_index"].extend(range(n))
            columns["topic"].extend([p.topic for p in partitions])
            columns["partition"].extend([p.partition for p in partitions])
            columns["offset"].extend([p.offset for p in partitions])
            columns["leader_epoch"].extend([p.leader_epoch for p in partitions])
            columns["metadata"].extend([p.metadata for p in partitions])
            return
        for row in request_rows(request, ingest_offset, timestamp_ms):
            for name, values in columns.items():
                values.append(row.get(name))

    def table(self) -> pa.Table:
        return pa.table(
            [pa.array(self.columns[f.name], f.type) for f in EXTENDED_REQUEST_FRAME_SCHEMA],
            schema=EXTENDED_REQUEST_FRAME_SCHEMA,
        )


def frame_from_requests(
    requests: Sequence[Request | DecodeError],
    start_offset: int = 0,
    timestamps: int | Sequence[int] = 0,
) -> pa.Table:
    """A request frame (``EXTENDED_REQUEST_FRAME_SCHEMA``) for ``requests``, one ingest message
    each, at ingest offsets ``start_offset``, ``start_offset + 1``, ...; ``timestamps`` is every
    message's append time, or one per request."""
    if isinstance(timestamps, int):
        stamps: Sequence[int] = [timestamps] * len(requests)
    else:
        stamps = timestamps
        if len(stamps) != len(requests):
            raise ValueError(f"{len(stamps)} timestamps for {len(requests)} requests")
    frame = _FrameColumns()
    for i, (request, ts) in enumerate(zip(requests, stamps, strict=True)):
        frame.add(request, start_offset + i, ts)
    return frame.table()


def decode_request_messages(
    messages: Iterable[tuple[int, int, bytes | bytearray | memoryview | None]],
) -> pa.Table:
    """A request frame (``EXTENDED_REQUEST_FRAME_SCHEMA``) for raw ingest messages given as
    (ingest offset, append time in ms, value bytes): a valid request becomes its rows, anything
    else (a null or empty value included) one row carrying the decoder's error code and reason,
    for the shard to answer.

    Equal to ``decode_request_messages_exact(messages)`` for every input, faster: a valid
    OffsetCommit is read straight into columns (``request_fast``); every message that reading
    does not vouch for goes through ``request_codec.decode_request``, the reference.
    """
    frame = SegmentedFrame()
    for offset, timestamp_ms, value in messages:
        data = bytes(value) if value is not None and len(value) else None
        if data is not None:
            commit = decode_commit_columns(data)
            if commit is not None:
                frame.add_commit(commit, int(offset), int(timestamp_ms))
                continue
        decoded = decode_request(data)
        if isinstance(decoded, OffsetCommitRequest) and decoded.partitions:
            frame.add_commit(commit_columns(decoded), int(offset), int(timestamp_ms))
        else:
            for row in request_rows(decoded, int(offset), int(timestamp_ms)):
                frame.add_row(row)
    return frame.table()


def decode_request_messages_exact(
    messages: Iterable[tuple[int, int, bytes | bytearray | memoryview | None]],
) -> pa.Table:
    """``decode_request_messages`` the reference way: every message decoded by
    ``request_codec.decode_request`` into a request object, whose rows make the frame. Kept for
    the tests and benchmarks that hold the fast path to it."""
    frame = _FrameColumns()
    for offset, timestamp_ms, value in messages:
        decoded = decode_request(bytes(value) if value is not None and len(value) else None)
        frame.add(decoded, int(offset), int(timestamp_ms))
    return frame.table()
