"""The shard state blob: round trips, versioning, corruption, zero-copy reuse."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest

from state.coordinator.config import CoordinatorConfig
from state.coordinator.model import MemberMetadata
from state.coordinator.requests import (
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
)
from state.engine.groups import GroupTable
from state.engine.request_frame import frame_from_requests
from state.engine.shard_state import compact
from state.engine.state_codec import FORMAT_VERSION, MAGIC
from state.shard import (
    StateFormatError,
    apply_batch,
    blob_stamp,
    decode_state,
    empty_shard,
    encode_state,
    encode_state_kept,
    next_expiry_ms,
    snapshot,
)
from tests.state.harness import shard_groups
from tests.state.strategies import GROUPS, SHARD

CONFIG = CoordinatorConfig(offsets_retention_ms=1000)


def populated():
    reqs = [
        GroupMetadataRequest(
            "gm",
            GROUPS[0],
            3,
            protocol="range",
            leader="m1",
            members=(MemberMetadata("m1", "i1", "c", "h", 10, 20, ("t",)),),
        ),
        OffsetCommitRequest(
            "c1", GROUPS[1], tuple(PartitionCommit("t", p, p * 10, 1, "é" * p) for p in range(50))
        ),
        OffsetCommitRequest("c2", GROUPS[2], (PartitionCommit("u", 0, 1),), retention_time_ms=30),
    ]
    state = apply_batch(
        empty_shard(SHARD, CONFIG), frame_from_requests(reqs, 0, 100), 100, CONFIG
    ).state
    state = compact(state)
    # Then a delta on top of the base: overwrites, a delete, a new key.
    more = [
        OffsetCommitRequest(
            "c3", GROUPS[1], (PartitionCommit("t", 0, 7), PartitionCommit("t", 99, 1))
        ),
        OffsetDeleteRequest("d", GROUPS[1], (("t", 1),)),
    ]
    return apply_batch(state, frame_from_requests(more, 3, 200), 200, CONFIG).state


def test_round_trip() -> None:
    state = populated()
    assert len(state.offsets.delta.rows) > 0 and len(state.offsets.base) > 0
    blob = encode_state(state)
    back = decode_state(blob)
    assert shard_groups(back) == shard_groups(state)
    assert back.shard_id == SHARD and back.retention_ms == CONFIG.offsets_retention_ms
    assert next_expiry_ms(back) == next_expiry_ms(state)
    assert encode_state(back) == blob
    assert shard_groups(decode_state(encode_state(empty_shard(7)))) == {}


def test_decoded_state_keeps_working() -> None:
    back = decode_state(encode_state(populated()))
    req = OffsetCommitRequest("c4", GROUPS[1], (PartitionCommit("t", 0, 8),))
    result = apply_batch(back, frame_from_requests([req], 10, 300), 300, CONFIG)
    assert snapshot(result.state)[GROUPS[1]].offsets[("t", 0)].offset == 8


def test_base_is_zero_copy_and_reused() -> None:
    blob = encode_state(populated())
    state = decode_state(blob)
    offsets = state.offsets.base.offset
    assert not offsets.flags.writeable and not offsets.flags.owndata  # a view of the section
    req = OffsetCommitRequest("c4", GROUPS[1], (PartitionCommit("t", 5, 8),))
    after = apply_batch(state, frame_from_requests([req], 10, 300), 300, CONFIG).state
    assert after.offsets.base is state.offsets.base
    # The unchanged base section is copied verbatim into the new blob.
    base_bytes = bytes(state.blob_sections["base"][1])
    assert base_bytes in encode_state(after)


def test_key_hashes_are_not_stored_but_recomputed() -> None:
    state = populated()
    blob = encode_state(state)
    back = decode_state(blob)
    for before, after in (
        (state.offsets.base, back.offsets.base),
        (state.offsets.delta.rows, back.offsets.delta.rows),
    ):
        assert len(after) > 0
        assert after.khash.tobytes() == before.khash.tobytes()
        assert before.khash.tobytes() not in blob


def test_version_1_blobs_are_refused() -> None:
    """Format version 1 (which stored each row's key hash and the base's deadline order) was
    written only by releases whose checkpoints are migrated, never resumed: such a blob is
    refused by its version, not misread."""
    v1 = (Path(__file__).parent / "data" / "shard-state-v1.bin").read_bytes()
    assert struct.unpack_from(">H", v1, 8) == (1,)
    with pytest.raises(StateFormatError, match="version 1 is not supported"):
        decode_state(v1)


def test_codes_beyond_the_dictionaries_are_rejected() -> None:
    """A blob whose offsets name groups its groups section lacks cannot give their key hashes."""
    state = populated()
    broken = replace(state, groups=GroupTable.empty(), blob_sections={})
    with pytest.raises(StateFormatError, match="corrupt shard state blob"):
        decode_state(encode_state(broken))


def test_unknown_version_is_rejected() -> None:
    blob = bytearray(encode_state(populated()))
    struct.pack_into(">H", blob, 8, FORMAT_VERSION + 1)
    with pytest.raises(StateFormatError, match=f"version {FORMAT_VERSION + 1} is not supported"):
        decode_state(bytes(blob))


@pytest.mark.parametrize(
    "mangle",
    [
        lambda b: b"PICKLE!!" + b[8:],
        lambda b: b[:10],
        lambda b: b[:-8],
        lambda b: b[:64] + b"\xff" * (len(b) - 64),
        lambda b: b"",
    ],
    ids=["magic", "truncated-header", "truncated", "garbage", "empty"],
)
def test_corrupt_blobs_are_rejected(mangle) -> None:
    blob = encode_state(populated())
    assert blob.startswith(MAGIC)
    with pytest.raises(StateFormatError):
        decode_state(mangle(blob))


def test_the_stamp_names_a_blob_and_changes_nothing_else() -> None:
    """The header's stamp (formerly reserved, 0) is read back alone; the rest of the blob is
    what an unstamped encoding gives, so readers that ignore it decode the same state."""
    state = populated()
    plain, stamped = encode_state(state), encode_state(state, 2**64 - 1)
    assert blob_stamp(plain) == 0 and blob_stamp(stamped) == 2**64 - 1
    assert plain[:24] == stamped[:24] and plain[32:] == stamped[32:]
    assert shard_groups(decode_state(stamped)) == shard_groups(state)
    assert blob_stamp(b"not a blob") == 0
    for bad in (-1, 2**64):
        with pytest.raises(ValueError, match="stamp"):
            encode_state(state, bad)


def test_a_kept_state_reuses_the_blobs_sections_as_a_decoded_one_does() -> None:
    """``encode_state_kept`` gives the state as if decoded from its blob: a state derived from
    it re-encodes into the same blob as one derived from the decoded blob, and copies the
    unchanged base verbatim."""
    blob, kept = encode_state_kept(populated(), 7)
    req = OffsetCommitRequest("c4", GROUPS[1], (PartitionCommit("t", 5, 8),))
    frame = frame_from_requests([req], 10, 300)
    from_kept = apply_batch(kept, frame, 300, CONFIG).state
    from_decoded = apply_batch(decode_state(blob), frame, 300, CONFIG).state
    assert from_kept.offsets.base is kept.offsets.base
    assert encode_state(from_kept) == encode_state(from_decoded)
    assert bytes(kept.blob_sections["base"][1]) in blob
    assert bytes(kept.blob_sections["base"][1]) in encode_state(from_kept)


def test_a_known_state_of_the_shard_lends_its_base_to_a_later_blob() -> None:
    """Another worker's blob of a later state, its base not compacted since: decoding it with
    the state this worker holds reuses that base, and gives what a plain decode gives."""
    blob, mine = encode_state_kept(populated(), 7)
    req = OffsetCommitRequest("c4", GROUPS[2], (PartitionCommit("v", 2, 8),))
    theirs = apply_batch(decode_state(blob), frame_from_requests([req], 10, 300), 300, CONFIG)
    later = encode_state(theirs.state)
    back = decode_state(later, {SHARD: mine}.get)
    assert back.offsets.base is mine.offsets.base
    plain = decode_state(later)
    assert shard_groups(back) == shard_groups(plain) == shard_groups(theirs.state)
    assert next_expiry_ms(back) == next_expiry_ms(plain)
    assert encode_state(back) == later


def test_a_compacted_or_other_base_is_decoded() -> None:
    """No reuse when the known state compacted its base since its bytes, when the blob's base
    holds other bytes, or when the known state is another shard's."""
    blob, mine = encode_state_kept(populated(), 7)
    req = OffsetCommitRequest("c4", GROUPS[1], (PartitionCommit("t", 5, 8),))
    later = apply_batch(decode_state(blob), frame_from_requests([req], 10, 300), 300, CONFIG)
    compacted = compact(mine)
    for known in (compacted, replace(mine, shard_id=SHARD + 1)):
        back = decode_state(encode_state(later.state), {SHARD: known}.get)
        assert back.offsets.base is not mine.offsets.base
        assert shard_groups(back) == shard_groups(later.state)
    other = decode_state(encode_state(compact(later.state)), {SHARD: mine}.get)
    assert other.offsets.base is not mine.offsets.base
    assert shard_groups(other) == shard_groups(later.state)
