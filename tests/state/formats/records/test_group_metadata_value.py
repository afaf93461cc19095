"""GroupMetadataValue v0-v4 and the member subscriptions inside it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from state.coordinator.model import GroupMetadataValue, MemberMetadata
from state.formats.records import (
    RecordFormatError,
    decode_group_metadata_value,
    encode_group_metadata_value,
)
from tests.state.formats.records.vectors import (
    NO_TAGS,
    SUB_TU,
    SUB_V1_TU,
    b32,
    cs,
    expected_group,
    expected_member,
    gm_member,
    gm_value,
    i16,
    i32,
    int32s,
    int64s,
    s,
    texts,
    uv,
)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_vectors(version: int) -> None:
    instance = "static-1" if version >= 3 else None
    data = gm_value(version, [gm_member(version, instance)])
    value = expected_group(version, (expected_member(version, instance),))
    assert decode_group_metadata_value(data) == value
    assert encode_group_metadata_value(value, version=version) == data


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_without_members_and_null_protocol(version: int) -> None:
    data = gm_value(version, [], protocol=None)
    value = expected_group(version, (), protocol=None)
    assert decode_group_metadata_value(data) == value
    assert encode_group_metadata_value(value, version=version) == data


@pytest.mark.parametrize("version", [0, 3, 4])
def test_null_and_empty_strings_are_distinct(version: int) -> None:
    empty = gm_value(version, [], protocol="")
    null = gm_value(version, [], protocol=None)
    assert empty != null
    assert decode_group_metadata_value(empty).protocol == ""
    assert decode_group_metadata_value(null).protocol is None


def test_group_metadata_value_v3_null_vs_empty_instance_id() -> None:
    null_member = decode_group_metadata_value(gm_value(3, [gm_member(3, None)])).members[0]
    assert null_member == expected_member(3, None)
    empty_member = decode_group_metadata_value(gm_value(3, [gm_member(3, "")])).members[0]
    assert empty_member.group_instance_id == ""


def test_group_metadata_value_default_writer_is_v3() -> None:
    value = expected_group(3, (expected_member(3, "i"),))
    assert encode_group_metadata_value(value)[:2] == i16(3)
    assert encode_group_metadata_value(value) == gm_value(3, [gm_member(3, "i")])


def test_group_metadata_value_v4_skips_member_and_value_tagged_fields() -> None:
    member = gm_member(4)[:-1] + uv(2) + uv(0) + uv(2) + b"hi" + uv(7) + uv(0)
    data = gm_value(4, [member, gm_member(4)])[:-1] + uv(1) + uv(1) + uv(3) + b"abc"
    value = decode_group_metadata_value(data)
    assert value == expected_group(4, (expected_member(4), expected_member(4)))


def test_member_subscription_decoding() -> None:
    base = gm_member(1)
    sub_at = base.index(b32(SUB_TU))

    def with_subscription(sub: bytes) -> bytes:
        member = base[:sub_at] + b32(sub) + base[sub_at + len(b32(SUB_TU)) :]
        return gm_value(1, [member])

    # Later subscription versions carry more fields after the topics; topics still decode.
    member = decode_group_metadata_value(with_subscription(SUB_V1_TU)).members[0]
    assert member.subscribed_topics == ("t", "u")
    # Undecodable subscriptions (another protocol's metadata, truncation, nothing) give ().
    for sub in (b"", b"\x00", i16(0) + i32(5) + s("t"), i16(-1) + i32(0), b"\xff" * 7):
        member = decode_group_metadata_value(with_subscription(sub)).members[0]
        assert member.subscribed_topics == ()
        assert member.session_timeout_ms == 45_000


def test_subscription_is_encoded_as_consumer_protocol_v0() -> None:
    value = GroupMetadataValue(
        members=(MemberMetadata("m", subscribed_topics=("a", "bb")),), generation=1
    )
    data = encode_group_metadata_value(value)
    sub = i16(0) + i32(2) + s("a") + s("bb") + i32(-1)
    assert b32(sub) in data
    empty = encode_group_metadata_value(GroupMetadataValue(members=(MemberMetadata("m"),)))
    assert b32(i16(0) + i32(0) + i32(-1)) in empty


@pytest.mark.parametrize(
    ("value", "version", "field"),
    [
        (GroupMetadataValue(current_state_timestamp_ms=5), 1, "currentStateTimestamp"),
        (GroupMetadataValue(members=(MemberMetadata("m", "inst"),)), 2, "groupInstanceId"),
        (GroupMetadataValue(members=(MemberMetadata("m"),)), 0, "rebalanceTimeout"),
        (GroupMetadataValue(generation=1 << 31), 3, "generation"),
        (GroupMetadataValue(protocol_type=None), 3, "protocolType"),  # type: ignore[arg-type]
        (GroupMetadataValue(leader="x" * 40_000), 3, "leader"),
        (GroupMetadataValue(leader="x" * 40_000), 4, "leader"),
        (GroupMetadataValue(members=(MemberMetadata(None),)), 3, "memberId"),  # type: ignore[arg-type]
        (GroupMetadataValue(members=(MemberMetadata("m", client_id=3),)), 3, "clientId"),  # type: ignore[arg-type]
        (
            GroupMetadataValue(members=(MemberMetadata("m", session_timeout_ms=True),)),  # type: ignore[arg-type]
            3,
            "sessionTimeout",
        ),
        (
            GroupMetadataValue(members=(MemberMetadata("m", subscribed_topics=("t", None)),)),  # type: ignore[arg-type]
            3,
            r"subscription topics\[1\]",
        ),
        (GroupMetadataValue(members=(MemberMetadata("m", assignment="x"),)), 3, "assignment"),  # type: ignore[arg-type]
        (GroupMetadataValue(), 5, "version"),
    ],
)
def test_encode_group_metadata_value_names_bad_field(
    value: GroupMetadataValue, version: int, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        encode_group_metadata_value(value, version=version)


def test_v0_holds_rebalance_timeout_equal_to_session_timeout() -> None:
    member = MemberMetadata("m", rebalance_timeout_ms=10, session_timeout_ms=10)
    value = GroupMetadataValue(members=(member,))
    assert decode_group_metadata_value(encode_group_metadata_value(value, version=0)) == value


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (i16(5) + cs("consumer"), "unsupported version 5"),
        (gm_value(3, [gm_member(3)]) + b"\x00", "trailing"),
        (gm_value(3, [])[:-4] + i32(-1), "members"),  # null array
        (gm_value(3, [])[:-4] + i32(-2), "members"),
        (gm_value(3, [])[:-4] + i32(1_000_000), "members"),  # count beyond the data
        (gm_value(3, [])[:-4] + i32(1), "members"),
        (i16(3) + i16(-1) + i32(5), "protocolType"),  # non-nullable string is null
        (i16(3) + s("consumer") + i32(5) + i16(-2), "protocol"),  # only -1 means null
        (gm_value(4, [])[:-2] + b"\x00" + NO_TAGS, "members"),  # compact null array
        (gm_value(4, [gm_member(4)])[:-1], "tagged"),
    ],
)
def test_bad_group_metadata_values(data: bytes, match: str) -> None:
    with pytest.raises(RecordFormatError, match=match):
        decode_group_metadata_value(data)


def test_negative_member_bytes_length() -> None:
    member = s("m1") + s("c") + s("h") + i32(1) + i32(2) + i32(-1) + b32(b"")
    with pytest.raises(RecordFormatError, match=r"members\[0\]\.subscription"):
        decode_group_metadata_value(gm_value(1, [member]))
    member = s("m1") + s("c") + s("h") + i32(1) + i32(2) + b32(b"") + i32(-9)
    with pytest.raises(RecordFormatError, match=r"members\[0\]\.assignment"):
        decode_group_metadata_value(gm_value(1, [member]))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_truncation_of_a_group_value_is_rejected(version: int) -> None:
    data = gm_value(version, [gm_member(version), gm_member(version)])
    for cut in range(len(data)):
        with pytest.raises(RecordFormatError):
            decode_group_metadata_value(data[:cut])


# --- properties -------------------------------------------------------------------------------


members = st.builds(
    MemberMetadata,
    member_id=texts,
    group_instance_id=st.none() | texts,
    client_id=texts,
    client_host=texts,
    rebalance_timeout_ms=int32s,
    session_timeout_ms=int32s,
    subscribed_topics=st.lists(texts, max_size=3).map(tuple),
    assignment=st.binary(max_size=10),
)
group_values = st.builds(
    GroupMetadataValue,
    protocol_type=texts,
    generation=int32s,
    protocol=st.none() | texts,
    leader=st.none() | texts,
    current_state_timestamp_ms=int64s,
    members=st.lists(members, max_size=3).map(tuple),
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(group_values)
def test_group_value_round_trip_v3_v4(value: GroupMetadataValue) -> None:
    for version in (3, 4):
        assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


@given(group_values, st.sampled_from([0, 1, 2]))
def test_group_value_old_versions_round_trip_or_name_the_field(
    value: GroupMetadataValue, version: int
) -> None:
    try:
        data = encode_group_metadata_value(value, version)
    except ValueError as e:
        assert any(
            f in str(e) for f in ("currentStateTimestamp", "groupInstanceId", "rebalanceTimeout")
        )
        return
    assert decode_group_metadata_value(data) == value
