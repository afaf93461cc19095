"""The Python worker's decoded shard states: found by stamp, never wrong, bounded."""

from __future__ import annotations

import pytest

from state.coordinator.config import CoordinatorConfig
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.engine.shard_state import compact
from state.shard import (
    ShardState,
    apply_batch,
    blob_stamp,
    empty_shard,
    encode_state,
    frame_from_requests,
    snapshot,
    state_nbytes,
)
from streaming.spark.shard_cache import DecodedShards

CONFIG = CoordinatorConfig(offsets_retention_ms=60_000)


def group_of(shard: int, name: str) -> str:
    """A group id that belongs to ``shard`` (50 shards, as ``CONFIG``), starting with ``name``."""
    return next(f"{name}-{i}" for i in range(10_000) if partition_for(f"{name}-{i}") == shard)


def committed(state: ShardState, name: str, offset: int, partitions: int = 10) -> ShardState:
    """``state`` after a commit of ``offset`` to ``partitions`` partitions by a group of its shard
    whose id starts with ``name``."""
    group = group_of(state.shard_id, name)
    request = OffsetCommitRequest(
        f"r-{group}-{offset}",
        group,
        tuple(PartitionCommit("t", p, offset) for p in range(partitions)),
    )
    return apply_batch(state, frame_from_requests([request], offset, 100), 100, CONFIG).state


def offsets(state: ShardState) -> dict[str, dict[tuple[str, int], int]]:
    return {
        group: {tp: o.offset for tp, o in snap.offsets.items()}
        for group, snap in snapshot(state).items()
    }


def test_a_blob_this_worker_encoded_is_not_decoded_again() -> None:
    cache = DecodedShards()
    state = committed(empty_shard(3), "g", 5)
    assert offsets(state)  # the commit was applied
    blob = cache.encode(state, 3)
    assert blob_stamp(blob) != 0
    kept = cache.decode(blob)
    assert (cache.hits, cache.misses) == (1, 0)
    assert offsets(kept) == offsets(state)
    # A second blob of the same state gets another stamp: stamps name blobs, not contents.
    assert blob_stamp(cache.encode(kept, 3)) != blob_stamp(blob)


def test_an_older_blob_of_the_shard_decodes_to_its_own_state() -> None:
    """Spark hands back an older blob when a batch is retried or replayed: the kept newer state
    must not answer for it."""
    cache = DecodedShards()
    first = cache.encode(committed(empty_shard(3), "g", 5), 3)
    second = cache.encode(committed(cache.decode(first), "g", 9), 3)
    group = group_of(3, "g")
    assert offsets(cache.decode(first))[group][("t", 0)] == 5
    assert offsets(cache.decode(second))[group][("t", 0)] == 9
    assert cache.misses == 1  # the older blob, no longer kept


def test_blobs_without_a_stamp_and_other_workers_blobs_are_decoded() -> None:
    state = committed(empty_shard(3), "g", 5)
    here, elsewhere = DecodedShards(), DecodedShards()
    for blob in (encode_state(state), elsewhere.encode(state, 3)):
        assert offsets(here.decode(blob)) == offsets(state)
    assert (here.hits, here.misses) == (0, 2)


def test_another_workers_base_rewrite_reuses_the_base_this_worker_kept() -> None:
    """Spark runs a shard's calls in either of two workers: a blob the other one wrote after
    this one's last call is a miss, but its base (not compacted since) is the one kept here."""
    here, elsewhere = DecodedShards(), DecodedShards()
    mine = compact(committed(empty_shard(3), "g", 5))
    blob = here.encode(mine, 3)
    theirs = elsewhere.encode(committed(elsewhere.decode(blob), "h", 9), 3)
    kept_base = here.decode(blob).offsets.base
    decoded = here.decode(theirs)
    assert here.misses == 1 and decoded.offsets.base is kept_base
    assert offsets(decoded) == offsets(committed(committed(mine, "g", 5), "h", 9))


def test_kept_states_stay_within_the_bound_and_keep_their_place() -> None:
    """Shards called in turn, more than fit: the first ones admitted stay and are found every
    time (least-recently-used would evict each just before its next call); the rest are
    decoded. An entry left idle gives its room up."""
    now = [0.0]
    states = {s: committed(empty_shard(s), f"g{s}", 5, partitions=200) for s in range(6)}
    one = DecodedShards()
    one.encode(states[0], 0)
    size = one.nbytes  # the columns and the blob sections the kept state holds
    assert size >= state_nbytes(states[0]) > 0
    bound = int(3.5 * size)  # room for three such states, not four
    cache = DecodedShards(max_bytes=bound, idle_s=60, clock=lambda: now[0])
    blobs = {s: cache.encode(state, s) for s, state in states.items()}
    assert len(cache) == 3 and cache.nbytes <= bound
    for _ in range(3):  # three micro-batches calling every shard in turn
        for shard in states:
            now[0] += 1
            state = cache.decode(blobs[shard])
            assert offsets(state) == offsets(states[shard])
            states[shard] = committed(state, f"g{shard}", 6 + int(now[0]))
            blobs[shard] = cache.encode(states[shard], shard)
        assert cache.nbytes <= bound
    assert (cache.hits, cache.misses) == (9, 9)  # shards 0-2 every time, 3-5 never
    # Shards 0-2 stop being called (another worker serves them now): after idle_s, 3-5 get in.
    now[0] += 61
    for shard in (3, 4, 5):
        blobs[shard] = cache.encode(cache.decode(blobs[shard]), shard)
    assert {s for s in range(6) if blob_stamp(blobs[s]) in cache._entries} == {3, 4, 5}
    off = DecodedShards(max_bytes=0)
    off.decode(off.encode(states[0], 0))
    assert len(off) == 0 and off.misses == 1
    with pytest.raises(ValueError, match="max_bytes"):
        DecodedShards(max_bytes=-1)


def test_a_state_larger_than_the_bound_is_kept_while_it_is_the_only_one() -> None:
    """A worker's one shard outgrowing the bound stays decoded (its calls hold it anyway); a
    second shard gets no room beside it, and takes the place once the first one idled."""
    now = [0.0]
    big = committed(empty_shard(0), "g0", 5, partitions=200)
    other = committed(empty_shard(1), "g1", 5, partitions=200)
    cache = DecodedShards(max_bytes=1024, idle_s=60, clock=lambda: now[0])
    blob = cache.encode(big, 0)
    assert len(cache) == 1 and cache.nbytes > cache.max_bytes
    for offset in (6, 7):  # its next calls find it, and its new state takes its place
        state = cache.decode(blob)
        blob = cache.encode(committed(state, "g0", offset, partitions=200), 0)
    assert (cache.hits, cache.misses, len(cache)) == (2, 0, 1)
    other_blob = cache.encode(other, 1)
    assert blob_stamp(other_blob) not in cache._entries and len(cache) == 1
    now[0] += 61
    other_blob = cache.encode(cache.decode(other_blob), 1)
    assert list(cache._entries) == [blob_stamp(other_blob)]
