"""Raw ingest messages to a request frame: the frame is the reference's (every message through
the exact decoder, its rows as plain dicts), exactly."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings

from state.engine.request_frame import decode_request_messages, request_rows
from state.formats.frames import EXTENDED_REQUEST_FRAME_SCHEMA
from state.formats.request_codec import decode_request, encode_request
from tests.state.formats.request_documents import message_batches
from tests.state.formats.request_examples import COMMIT, DELETE, DELETE_GROUPS, GROUP, TXN_COMMIT

Messages = list[tuple[int, int, bytes | bytearray | memoryview | None]]


def reference_frame(messages: Messages) -> pa.Table:
    """Each message decoded by ``decode_request``, its rows as dicts (absent columns null)."""
    rows = [
        row
        for offset, timestamp_ms, value in messages
        for row in request_rows(
            decode_request(bytes(value) if value is not None and len(value) else None),
            offset,
            timestamp_ms,
        )
    ]
    return pa.Table.from_pylist(rows, schema=EXTENDED_REQUEST_FRAME_SCHEMA)


def assert_same_frame(messages: Messages) -> pa.Table:
    frame = decode_request_messages(messages)
    reference = reference_frame(messages)
    assert frame.schema == EXTENDED_REQUEST_FRAME_SCHEMA
    assert frame.equals(reference), (frame.to_pylist(), reference.to_pylist())
    return frame


@settings(max_examples=300, deadline=None)
@given(message_batches())
def test_frame_is_the_reference_frame(messages: Messages) -> None:
    assert_same_frame(messages)


def test_mixed_batch() -> None:
    commit = encode_request(COMMIT)
    unknown_field = commit[:-1] + b',"future":{"a":1,"a":2}}'
    duplicate = commit[:-1] + b',"groupId":"other"}'
    messages: Messages = [
        (10, 1_000, commit),
        (11, 1_001, None),
        (12, 1_002, b""),
        (13, 1_003, encode_request(DELETE)),
        (14, 1_004, bytearray(commit)),
        (15, 1_005, encode_request(GROUP)),
        (16, 1_006, unknown_field),
        (17, 1_007, duplicate),
        (18, 1_008, memoryview(commit)),
        (19, 1_009, encode_request(DELETE_GROUPS)),
        (20, 1_010, b"\xff"),
        (21, 1_011, encode_request(TXN_COMMIT)),
    ]
    frame = assert_same_frame(messages)
    rows = len(COMMIT.partitions)
    # Four commits, the delete's and the transactional commit's partitions, and one row for
    # each other message.
    assert frame.num_rows == 4 * rows + len(DELETE.partitions) + len(TXN_COMMIT.partitions) + 6
    assert frame["ingest_offset"].to_pylist()[: rows + 1] == [10] * rows + [11]
    txn_rows = frame.filter(pc.equal(frame["ingest_offset"], 21))
    assert txn_rows["api"].to_pylist() == ["TxnOffsetCommit"] * len(TXN_COMMIT.partitions)
    assert txn_rows["retention_time_ms"].to_pylist() == [-1] * len(TXN_COMMIT.partitions)


def test_empty_batch() -> None:
    assert assert_same_frame([]).num_rows == 0
