"""Raw ingest messages to a request frame: the fast path's frame is the reference's, exactly."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings

from state.engine.request_frame import decode_request_messages, decode_request_messages_exact
from state.formats.frames import EXTENDED_REQUEST_FRAME_SCHEMA
from state.formats.request_codec import encode_request
from tests.state.formats.request_documents import message_batches
from tests.state.formats.request_examples import COMMIT, DELETE, DELETE_GROUPS, GROUP

Messages = list[tuple[int, int, bytes | bytearray | memoryview | None]]


def assert_same_frame(messages: Messages) -> pa.Table:
    fast = decode_request_messages(messages)
    exact = decode_request_messages_exact(messages)
    assert fast.schema == exact.schema == EXTENDED_REQUEST_FRAME_SCHEMA
    assert fast.equals(exact), (fast.to_pylist(), exact.to_pylist())
    return fast


@settings(max_examples=300, deadline=None)
@given(message_batches())
def test_fast_frame_is_the_exact_frame(messages: Messages) -> None:
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
    ]
    frame = assert_same_frame(messages)
    rows = len(COMMIT.partitions)
    # Four commits, the delete's partitions, and one row for each other message.
    assert frame.num_rows == 4 * rows + len(DELETE.partitions) + 6
    assert frame["ingest_offset"].to_pylist()[: rows + 1] == [10] * rows + [11]


def test_empty_batch() -> None:
    assert assert_same_frame([]).num_rows == 0
