"""The value of a group metadata record: ``GroupMetadataValue`` v0-v4 (a classic group).

Flexible from v4::

    version | fields, in wire order
    --------+------------------------------------------------------------------------------
    0       | protocolType string, generation int32, protocol string?, leader string?,
            | members [MemberMetadata v0]
    1       | as v0, members [MemberMetadata v1]
    2       | protocolType, generation, protocol?, leader?, currentStateTimestamp int64,
            | members [MemberMetadata v2]
    3       | as v2, members [MemberMetadata v3]
    4       | as v3 with compact strings/bytes/arrays and tagged fields

    MemberMetadata: memberId string, groupInstanceId string? (v3+), clientId string,
    clientHost string, rebalanceTimeout int32 (v1+), sessionTimeout int32, subscription bytes,
    assignment bytes (+ tagged fields in v4)

``?`` marks a nullable string. Writers use v3, as Kafka 4.0 does. Of the ``subscription`` (a
ConsumerProtocolSubscription) only the topics are kept; the encoder writes v0 with null userData.
"""

from __future__ import annotations

from collections.abc import Sequence

from state.coordinator.model import GroupMetadataValue, MemberMetadata
from state.formats.records.wire import (
    FLEXIBLE_VERSION,
    INT16,
    INT32,
    INT32_MAX,
    INT32_MIN,
    INT64,
    INT64_MAX,
    INT64_MIN,
    NO_TAGGED_FIELDS,
    Reader,
    RecordFormatError,
    check_bytes,
    check_int,
    check_str,
    read_version,
    write_array_len,
    write_bytes,
    write_string,
)

#: GroupMetadataValue version Kafka writes (the highest non-flexible one).
GROUP_METADATA_VALUE_VERSION = 3

_MAX_VERSION = 4


def _encode_subscription(ctx: str, topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, topics array, userData null."""
    if isinstance(topics, str):
        raise ValueError(f"{ctx}: subscription topics must be a sequence of strings, got str")
    parts = [INT16.pack(0), INT32.pack(len(topics))]
    for j, topic in enumerate(topics):
        raw = check_str(ctx, f"subscription topics[{j}]", topic)
        assert raw is not None
        parts.append(INT16.pack(len(raw)))
        parts.append(raw)
    parts.append(INT32.pack(-1))  # userData: null
    return b"".join(parts)


def _decode_subscription_topics(raw: bytes) -> tuple[str, ...]:
    """Topics of a ConsumerProtocolSubscription of any version; () if undecodable. Decoded for
    every protocol type so that values round-trip (the rules read only "consumer" groups')."""
    try:
        r = Reader(raw, 0, "ConsumerProtocolSubscription")
        if r.int16("version") < 0:
            return ()
        count = r.array_count("topics", flexible=False)
        return tuple(r.string("topics[]") for _ in range(count))
    except RecordFormatError:
        return ()


def _encode_member(out: list[bytes], mctx: str, m: MemberMetadata, version: int) -> None:
    """Append one MemberMetadata of ``version``; ``ValueError`` naming the field that does not
    fit."""
    flexible = version >= FLEXIBLE_VERSION
    write_string(out, check_str(mctx, "memberId", m.member_id), flexible)
    instance = check_str(mctx, "groupInstanceId", m.group_instance_id, nullable=True)
    if version >= 3:
        write_string(out, instance, flexible)
    elif instance is not None:
        raise ValueError(f"{mctx}: groupInstanceId needs version 3 or later")
    write_string(out, check_str(mctx, "clientId", m.client_id), flexible)
    write_string(out, check_str(mctx, "clientHost", m.client_host), flexible)
    rebalance = check_int(mctx, "rebalanceTimeout", m.rebalance_timeout_ms, INT32_MIN, INT32_MAX)
    session = check_int(mctx, "sessionTimeout", m.session_timeout_ms, INT32_MIN, INT32_MAX)
    if version >= 1:
        out.append(INT32.pack(rebalance))
    elif rebalance != session:
        raise ValueError(
            f"{mctx}: rebalanceTimeout={rebalance} differs from sessionTimeout={session}, "
            f"which version 0 cannot hold"
        )
    out.append(INT32.pack(session))
    write_bytes(out, _encode_subscription(mctx, m.subscribed_topics), flexible)
    write_bytes(out, check_bytes(mctx, "assignment", m.assignment), flexible)
    if flexible:
        out.append(NO_TAGGED_FIELDS)


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    """Encode a group metadata record value (default v3, as Kafka writes); ``ValueError`` naming
    a field that does not fit its type or the version (``currentStateTimestamp`` below v2,
    ``groupInstanceId`` below v3, ``rebalanceTimeout`` other than ``sessionTimeout`` in v0)."""
    if not isinstance(version, int) or not 0 <= version <= _MAX_VERSION:
        raise ValueError(f"GroupMetadataValue: version must be 0-4, got {version!r}")
    ctx = f"GroupMetadataValue v{version}"
    flexible = version >= FLEXIBLE_VERSION
    out: list[bytes] = [INT16.pack(version)]
    write_string(out, check_str(ctx, "protocolType", value.protocol_type), flexible)
    out.append(INT32.pack(check_int(ctx, "generation", value.generation, INT32_MIN, INT32_MAX)))
    write_string(out, check_str(ctx, "protocol", value.protocol, nullable=True), flexible)
    write_string(out, check_str(ctx, "leader", value.leader, nullable=True), flexible)
    ts = check_int(
        ctx, "currentStateTimestamp", value.current_state_timestamp_ms, INT64_MIN, INT64_MAX
    )
    if version >= 2:
        out.append(INT64.pack(ts))
    elif ts != -1:
        raise ValueError(f"{ctx}: currentStateTimestamp={ts} needs version 2 or later")
    members = value.members
    write_array_len(out, len(members), flexible)
    for i, m in enumerate(members):
        if not isinstance(m, MemberMetadata):
            raise ValueError(f"{ctx}: members[{i}] must be MemberMetadata, got {type(m).__name__}")
        _encode_member(out, f"{ctx}: members[{i}]", m, version)
    if flexible:
        out.append(NO_TAGGED_FIELDS)
    return b"".join(out)


def _decode_member(r: Reader, i: int, version: int) -> MemberMetadata:
    """Read member ``i`` of a ``version`` value."""
    flexible = version >= FLEXIBLE_VERSION
    p = f"members[{i}]."
    member_id = r.string(p + "memberId", flexible=flexible)
    instance = r.nullable_string(p + "groupInstanceId", flexible) if version >= 3 else None
    client_id = r.string(p + "clientId", flexible=flexible)
    client_host = r.string(p + "clientHost", flexible=flexible)
    rebalance = r.int32(p + "rebalanceTimeout") if version >= 1 else None
    session = r.int32(p + "sessionTimeout")
    subscription = r.bytes_(p + "subscription", flexible=flexible)
    assignment = r.bytes_(p + "assignment", flexible=flexible)
    if flexible:
        r.tagged_fields(p + "tagged fields")
    return MemberMetadata(
        member_id=member_id,
        group_instance_id=instance,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=session if rebalance is None else rebalance,
        session_timeout_ms=session,
        subscribed_topics=_decode_subscription_topics(subscription),
        assignment=assignment,
    )


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    """Decode a group metadata record value v0-v4; absent fields take Kafka's defaults
    (timestamp -1, instance id None, rebalance timeout = session timeout). Raises
    ``RecordFormatError``."""
    buf, version = read_version(data, "GroupMetadataValue", _MAX_VERSION)
    flexible = version >= FLEXIBLE_VERSION
    r = Reader(buf, 2, f"GroupMetadataValue v{version}")
    protocol_type = r.string("protocolType", flexible=flexible)
    generation = r.int32("generation")
    protocol = r.nullable_string("protocol", flexible=flexible)
    leader = r.nullable_string("leader", flexible=flexible)
    ts = r.int64("currentStateTimestamp") if version >= 2 else -1
    count = r.array_count("members", flexible=flexible)
    members = tuple(_decode_member(r, i, version) for i in range(count))
    if flexible:
        r.tagged_fields("tagged fields")
    r.finish()
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp_ms=ts,
        members=members,
    )
