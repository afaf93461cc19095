"""Request deadlines in the shard: a request reached at or after its message timestamp plus its
timeout is answered REQUEST_TIMED_OUT and changes nothing, on the vectorized and the exact path
alike, and the reference coordinator agrees (``Run`` compares every batch with it)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from state.coordinator.config import DEFAULT_REQUEST_TIMEOUT_MS, CoordinatorConfig
from state.coordinator.deadlines import request_deadline_ms, timed_out_reason
from state.coordinator.errors import ErrorCode
from state.coordinator.model import MemberMetadata, TopicPartition
from state.coordinator.requests import (
    DecodeError,
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    Request,
)
from state.formats.request_codec import encode_request
from state.shard import (
    apply_batch,
    decode_request_messages,
    empty_shard,
    frame_from_requests,
    snapshot,
)
from tests.state.harness import Run, shard_groups
from tests.state.strategies import GROUPS, SHARD

CONFIG = CoordinatorConfig(request_timeout_ms=500)
G, H = GROUPS[0], GROUPS[1]
T0 = 1_700_000_000_000
TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT


def commit(group: str = G, offset: int = 1, **kw: object) -> OffsetCommitRequest:
    return OffsetCommitRequest("c", group, (PartitionCommit("t", 0, offset),), **kw)  # type: ignore[arg-type]


def test_default_timeout_is_kafkas_default_api_timeout() -> None:
    assert DEFAULT_REQUEST_TIMEOUT_MS == CoordinatorConfig().request_timeout_ms == 60_000
    with pytest.raises(ValueError, match="request_timeout_ms"):
        CoordinatorConfig(request_timeout_ms=-1)


@pytest.mark.parametrize(
    ("timeout_ms", "age", "timed_out"),
    [
        (None, 499, False),  # the coordinator's default, 500 ms
        (None, 500, True),  # Kafka's Timer: expired at now >= deadline
        (100, 99, False),
        (100, 100, True),
        (10_000, 9_999, False),  # its own timeout, longer than the default
        (0, 0, True),  # no time at all: refused even in the batch it arrives in
    ],
)
def test_a_request_is_applied_before_its_deadline_and_refused_from_it(
    timeout_ms: int | None, age: int, timed_out: bool
) -> None:
    run = Run(SHARD, CONFIG)
    run.batch([commit(timeout_ms=timeout_ms)], T0, ages_ms=[age])
    (table,) = run.records
    offsets = snapshot(run.state).get(G)
    if timed_out:
        assert table.num_rows == 0 and offsets is None
    else:
        assert table.num_rows == 1 and offsets is not None


def _shard_answer(requests: list[Request], now: int, stamps: list[int]) -> list[dict]:
    frame = frame_from_requests(requests, 0, stamps)
    result = apply_batch(empty_shard(SHARD, CONFIG), frame, now, CONFIG)
    assert result.records.num_rows == 0
    return result.responses.to_pylist()


@pytest.mark.parametrize(
    "request_",
    [
        commit(timeout_ms=10),
        OffsetCommitRequest("c", G, (), timeout_ms=10),  # otherwise answered without checks
        OffsetDeleteRequest("c", G, (TopicPartition("t", 0),), timeout_ms=10),
        DeleteGroupsRequest("c", G, timeout_ms=10),
        GroupMetadataRequest("c", G, 1, members=(MemberMetadata("m"),), timeout_ms=10),
        commit("x" * 40_000, timeout_ms=10),  # an invalid group id: refused before routing
    ],
    ids=["commit", "empty-commit", "offset-delete", "delete-groups", "group-metadata", "bad-id"],
)
def test_every_api_is_refused_request_level_with_the_deadline_named(request_: Request) -> None:
    (row,) = _shard_answer([request_], T0 + 10, [T0])
    assert (row["topic"], row["partition"], row["error_code"]) == (None, None, TIMED_OUT)
    assert row["error_reason"] == timed_out_reason(T0 + 10, T0 + 10)
    assert "2023-11-14T22:13:20.010+00:00" in row["error_reason"]


def test_decoder_rejections_come_before_the_deadline() -> None:
    bad = DecodeError(ErrorCode.INVALID_REQUEST, "topics: bad", "r", G, "OffsetCommit")
    (row,) = _shard_answer([bad], T0 + 10**6, [T0])
    assert row["error_code"] == ErrorCode.INVALID_REQUEST


def test_fast_path_refused_commit_does_not_create_the_group_for_later_requests() -> None:
    """The first commit of a new group, refused: a later member commit in the batch finds no
    group (ILLEGAL_GENERATION), as if the refused one had never been sent."""
    run = Run(SHARD, CONFIG)
    requests: list[Request] = [
        commit(offset=5, timeout_ms=0),
        commit(offset=6, generation_id=1, member_id="m"),
        commit(H, offset=7),
    ]
    run.batch(requests, T0, ages_ms=[0, 0, 0])
    assert set(shard_groups(run.state)) == {H}
    (table,) = run.records
    assert table["group_id"].to_pylist() == [H]


def test_exact_path_refuses_per_request_among_applied_ones() -> None:
    """A group with members takes the exact path: its timed-out requests are skipped there, its
    others applied in log order around them."""
    run = Run(SHARD, CONFIG)
    members = (MemberMetadata("m", subscribed_topics=("t",)),)
    run.batch([GroupMetadataRequest("gm", G, 1, members=members)], T0, ages_ms=[0])
    run.batch(
        [
            commit(offset=1, generation_id=1, member_id="m"),
            commit(offset=2, generation_id=1, member_id="m", timeout_ms=5),
            GroupMetadataRequest("gm2", G, 2, members=members, timeout_ms=100),
            commit(offset=3, generation_id=1, member_id="m", timeout_ms=1_000),
        ],
        T0 + 50,
        ages_ms=[10, 10, 100, 10],
    )
    (metadata, offsets) = shard_groups(run.state)[G]
    assert metadata is not None and metadata.generation == 1
    assert offsets[TopicPartition("t", 0)].offset == 3


def test_a_replayed_batch_decides_as_the_first_time() -> None:
    """The decision depends on the frame and the batch time only: the same call later gives the
    same answers and records (the job replays a batch with the timestamp of its offset log)."""
    frame = frame_from_requests(
        [commit(offset=1, timeout_ms=50), commit(H, offset=2, timeout_ms=5)], 0, T0
    )
    first = apply_batch(empty_shard(SHARD, CONFIG), frame, T0 + 10, CONFIG)
    again = apply_batch(empty_shard(SHARD, CONFIG), frame, T0 + 10, CONFIG)
    assert first.responses.equals(again.responses) and first.records.equals(again.records)
    assert first.responses["error_code"].to_pylist() == [0, TIMED_OUT]
    assert first.records["group_id"].to_pylist() == [G]


def test_ingest_messages_carry_their_timeout_into_the_frame() -> None:
    with_timeout = encode_request(commit(timeout_ms=250))
    without = encode_request(commit(H))
    frame = decode_request_messages([(0, T0, with_timeout), (1, T0, without)])
    assert frame["timeout_ms"].to_pylist() == [250, None]
    result = apply_batch(empty_shard(SHARD, CONFIG), frame, T0 + 300, CONFIG)
    # 250 ms passed for the first; the second has the default 500 ms.
    assert result.responses["error_code"].to_pylist() == [TIMED_OUT, 0]
    assert json.loads(with_timeout)["timeoutMs"] == 250


def test_frames_without_the_timeout_column_get_the_default() -> None:
    frame = frame_from_requests([commit(timeout_ms=10_000)], 0, T0).drop_columns(["timeout_ms"])
    late = apply_batch(empty_shard(SHARD, CONFIG), frame, T0 + 500, CONFIG)
    assert late.responses["error_code"].to_pylist() == [TIMED_OUT]
    pandas_frame = frame_from_requests([commit(timeout_ms=10_000)], 0, T0).to_pandas()
    kept = apply_batch(empty_shard(SHARD, CONFIG), pandas_frame, T0 + 500, CONFIG)
    assert kept.responses["error_code"].to_pylist() == [0]


def test_deadline_past_int64_never_comes_and_never_wraps() -> None:
    huge = CoordinatorConfig(request_timeout_ms=2**62)
    assert request_deadline_ms(2**62, None, huge) == 2**63
    frame = frame_from_requests([commit()], 0, 2**62)
    result = apply_batch(empty_shard(SHARD, huge), frame, 2**63 - 1, huge)
    assert result.responses["error_code"].to_pylist() == [0]
    assert pa.types.is_int32(frame.schema.field("timeout_ms").type)


def test_a_negative_timeout_in_a_frame_is_the_default() -> None:
    """The decoder refuses a negative ``timeoutMs``; a frame built otherwise gets the default,
    the same on both paths (``Run`` compares them)."""
    run = Run(SHARD, CONFIG)
    run.batch([commit(timeout_ms=-5), commit(H, timeout_ms=-5)], T0, ages_ms=[499, 500])
    assert set(shard_groups(run.state)) == {G}
