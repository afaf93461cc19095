"""A shard as a base and a log of records: replaying the log gives the state; chunks are checked."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.coordinator.config import CoordinatorConfig
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.engine.request_frame import frame_from_requests
from state.engine.shard_log import LOG_FLOOR_BYTES, _decode_chunk
from state.shard import (
    StateFormatError,
    apply_batch,
    decode_state,
    empty_shard,
    encode_log_chunk,
    encode_state,
    next_expiry_ms,
    replay_log_chunk,
    replay_log_chunks_on,
    rewrite_base,
)
from tests.state.harness import shard_groups
from tests.state.strategies import GROUPS, SHARD, batches

CONFIG = CoordinatorConfig(offsets_retention_ms=100)

binaries = st.binary(max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(binaries, st.none() | binaries), max_size=30),
    st.integers(0, 3),
)
def test_a_chunk_holds_the_records_key_and_value_bytes(
    pairs: list[tuple[bytes, bytes | None]], skip: int
) -> None:
    # Sliced columns too: a record frame's columns are often views into a larger table.
    padded = [(b"x", b"y")] * skip + pairs
    table = pa.table(
        {
            "key": pa.array([k for k, _ in padded], pa.binary()),
            "value": pa.array([v for _, v in padded], pa.binary()),
        }
    ).slice(skip)
    chunk = encode_log_chunk(table)
    keys, values = _decode_chunk(chunk)
    assert keys.to_pylist() == [k for k, _ in pairs]
    assert values.to_pylist() == [v for _, v in pairs]
    # Framing is a few bytes per record, not an IPC stream's hundreds per chunk.
    payload = sum(len(k) + len(v or b"") for k, v in pairs)
    assert len(chunk) <= payload + 16 + 8 * (len(pairs) + 1) + (len(pairs) + 7) // 8


@settings(max_examples=60, deadline=None)
@given(batches, st.booleans())
def test_the_base_with_its_log_replayed_is_the_state(
    steps: list[tuple[int, list]], at_once: bool
) -> None:
    base = empty_shard(SHARD, CONFIG)
    first = apply_batch(
        base,
        frame_from_requests(
            [OffsetCommitRequest("seed", GROUPS[0], (PartitionCommit("t", 0, 1),))], 0, 0
        ),
        0,
        CONFIG,
    )
    base = first.state
    blob = encode_state(base)
    state, now, offset, chunks = base, 0, 1, []
    for advance, requests in steps:
        now += advance
        result = apply_batch(state, frame_from_requests(requests, offset, now), now, CONFIG)
        offset += len(requests)
        if result.records.num_rows:
            chunks.append(encode_log_chunk(result.records))
        state = result.state
    if at_once:
        replayed = replay_log_chunks_on(decode_state(blob), chunks)
    else:
        replayed = decode_state(blob)
        for chunk in chunks:
            replayed = replay_log_chunk(replayed, chunk)
    assert shard_groups(replayed) == shard_groups(state)
    assert next_expiry_ms(replayed) == next_expiry_ms(state)


def _chunk() -> bytes:
    result = apply_batch(
        empty_shard(SHARD, CONFIG),
        frame_from_requests(
            [OffsetCommitRequest("c", GROUPS[0], (PartitionCommit("t", 0, 5),))], 0, 0
        ),
        0,
        CONFIG,
    )
    return encode_log_chunk(result.records)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda c: c[:10],
        lambda c: b"XXXX" + c[4:],
        lambda c: c + b"\0",
        lambda c: c[:-1],
        # Records a loader skips (an unknown key version) or cannot read (a truncated offset
        # key): the log must not skip them.
        lambda c: encode_log_chunk(pa.table({"key": [b"\x00\x09junk"], "value": [b"v"]})),
        lambda c: encode_log_chunk(pa.table({"key": [b"\x00\x01\x00"], "value": [b"v"]})),
    ],
)
def test_a_corrupt_chunk_is_refused_not_skipped(mangle) -> None:
    good = _chunk()
    assert shard_groups(replay_log_chunk(empty_shard(SHARD, CONFIG), good))
    with pytest.raises(StateFormatError, match="corrupt shard log chunk"):
        replay_log_chunk(empty_shard(SHARD, CONFIG), mangle(good))


def test_the_base_is_rewritten_once_the_log_outgrows_it_or_the_floor() -> None:
    assert not rewrite_base(1000, LOG_FLOOR_BYTES)
    assert rewrite_base(1000, LOG_FLOOR_BYTES + 1)
    big = 10 * LOG_FLOOR_BYTES
    assert not rewrite_base(big, big)
    assert rewrite_base(big, big + 1)
