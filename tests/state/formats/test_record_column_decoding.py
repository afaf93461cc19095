"""The column decoder of offset records against the per-record decoder, record by record."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from state.coordinator.model import OffsetAndMetadata, OffsetCommitKey
from state.formats.record_column_decoding import decode_offset_commit_columns
from state.formats.records import (
    RecordFormatError,
    decode_record,
    encode_group_metadata_key,
)
from tests.state.formats.records.offset_encoders import (
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from tests.state.formats.records.vectors import i16, i32, i64, s

texts = st.text(max_size=12)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def offset_values(draw: st.DrawFn) -> bytes | None:
    """A value of any version Kafka wrote (0-4), a tombstone, or damaged bytes."""
    choice = draw(
        st.sampled_from(
            ["v0", "v1", "v2", "v3", "v4", "v4-tagged", "tombstone", "damaged", "damaged-v4"]
        )
    )
    offset, epoch, ts = draw(ints64), draw(ints32), draw(ints64)
    # Long metadata too: a v4 compact string's length takes two varint bytes from 127 bytes on.
    metadata = draw(st.one_of(texts, st.text(min_size=120, max_size=140)))
    if choice == "tombstone":
        return None
    if choice in ("v0", "v2"):
        return i16(int(choice[1])) + i64(offset) + s(metadata) + i64(ts)
    if choice == "v1":
        expire = draw(st.sampled_from([-1, draw(ints64)]))
        return i16(1) + i64(offset) + s(metadata) + i64(ts) + i64(expire)
    if choice == "v3":
        return i16(3) + i64(offset) + i32(epoch) + s(metadata) + i64(ts)
    v4 = encode_offset_commit_value(OffsetAndMetadata(offset, epoch, metadata, ts), 4)
    if choice == "v4":
        return v4
    if choice == "v4-tagged":  # a tagged field (tag 0, 16 bytes: Kafka 4.1's topicId)
        return v4[:-1] + bytes([1, 0, 16]) + draw(st.binary(min_size=16, max_size=16))
    good = v4 if choice == "damaged-v4" else i16(3) + i64(offset) + i32(epoch) + s(metadata)
    good += b"" if choice == "damaged-v4" else i64(ts)
    cut = draw(st.integers(0, len(good)))
    return good[:cut] + draw(st.binary(max_size=4))


@st.composite
def offset_keys(draw: st.DrawFn) -> bytes:
    choice = draw(st.sampled_from(["v0", "v1", "group", "kip848", "damaged", "bad-utf8"]))
    group, topic, partition = draw(texts), draw(texts), draw(ints32)
    if choice in ("v0", "v1"):
        return encode_offset_commit_key(group, topic, partition, int(choice[1]))
    if choice == "group":
        return encode_group_metadata_key(group)
    if choice == "kip848":
        return i16(5) + s(group)
    if choice == "bad-utf8":
        return i16(1) + i16(2) + b"\xff\xfe" + s(topic) + i32(partition)
    good = encode_offset_commit_key(group, topic, partition)
    return good[: draw(st.integers(0, len(good)))] + draw(st.binary(max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(offset_keys(), offset_values()), max_size=30))
def test_column_decoder_reads_what_the_record_decoder_reads(
    pairs: list[tuple[bytes, bytes | None]],
) -> None:
    keys = pa.array([k for k, _ in pairs], pa.binary())
    values = pa.array([v for _, v in pairs], pa.binary())
    columns = decode_offset_commit_columns(keys, values)
    assert len(columns.decoded) == len(pairs)
    decoded = [pair for pair, ok in zip(pairs, columns.decoded, strict=True) if ok]
    for i, (key, value) in enumerate(decoded):
        record = decode_record(key, value)
        assert isinstance(record.key, OffsetCommitKey)
        got_key = (columns.group_id[i].as_py(), columns.topic[i].as_py(), columns.partition[i])
        assert got_key == (record.key.group, record.key.topic, record.key.partition)
        if record.value is None:
            assert columns.offset[i].as_py() is None
            continue
        assert isinstance(record.value, OffsetAndMetadata)
        assert (
            OffsetAndMetadata(
                columns.offset[i].as_py(),
                columns.leader_epoch[i].as_py(),
                columns.metadata[i].as_py(),
                columns.commit_timestamp_ms[i].as_py(),
                columns.expire_timestamp_ms[i].as_py(),
            )
            == record.value
        )


def test_column_decoder_leaves_what_it_does_not_know_to_the_record_decoder() -> None:
    commit = encode_offset_commit_key("g", "t", 0)
    v3 = encode_offset_commit_value(OffsetAndMetadata(5, 1, "m", 7))
    v4 = encode_offset_commit_value(OffsetAndMetadata(5, 1, "m", 7), 4)
    v4_tagged = v4[:-1] + bytes([1, 0, 16]) + bytes(16)
    v4_long = encode_offset_commit_value(OffsetAndMetadata(5, 1, "m" * 200, 7), 4)
    v4_bad_tags = v4[:-1] + b"\x01"  # one tagged field announced, none there
    pairs = [
        (commit, v3),
        (encode_group_metadata_key("g"), None),
        (commit, v4),
        (commit, v4_tagged),
        (commit, v4_long),
        (commit, v4_bad_tags),
        (commit, v3[:-1]),
        (commit, None),
    ]
    columns = decode_offset_commit_columns(
        pa.array([k for k, _ in pairs], pa.binary()), pa.array([v for _, v in pairs], pa.binary())
    )
    assert columns.decoded.tolist() == [True, False, True, False, False, False, False, True]
    assert decode_record(commit, v4_tagged).value == decode_record(commit, v4).value
    for damaged in (v3[:-1], v4_bad_tags):
        try:
            decode_record(commit, damaged)
        except RecordFormatError:
            pass
        else:  # pragma: no cover - the damaged value must be refused by the record decoder
            raise AssertionError(f"a damaged value decoded: {damaged.hex()}")
