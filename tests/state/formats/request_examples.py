"""Example requests of every api, and the decode error codes, shared by the request codec tests."""

from __future__ import annotations

from state.coordinator.errors import ErrorCode
from state.coordinator.model import MemberMetadata, TopicPartition
from state.coordinator.requests import (
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    TxnOffsetCommitRequest,
)

CORRUPT = ErrorCode.CORRUPT_MESSAGE
INVALID = ErrorCode.INVALID_REQUEST
UNSUPPORTED = ErrorCode.UNSUPPORTED_VERSION

COMMIT = OffsetCommitRequest(
    request_id="r-1",
    group_id="group-é",
    partitions=(
        PartitionCommit("t", 0, 42),
        PartitionCommit("t", 1, 1 << 62, 5, "meta😀"),
        PartitionCommit("u", 0, -1, -1, ""),
        # The same topic again after another: order is kept exactly.
        PartitionCommit("t", 2, 0),
    ),
    generation_id=7,
    member_id="m1",
    group_instance_id="static-1",
    retention_time_ms=86_400_000,
)
# With and without their own timeout (``timeoutMs``): both spellings round-trip.
DELETE = OffsetDeleteRequest(
    "r-2",
    "g",
    (TopicPartition("t", 0), TopicPartition("t", 3), TopicPartition("v", 1)),
    timeout_ms=30_000,
)
DELETE_GROUPS = DeleteGroupsRequest("r-3", "g")
MEMBERS = (
    MemberMetadata("m1", None, "client-1", "/10.0.0.1", 300_000, 45_000, ("t", "u")),
    MemberMetadata("m2", "static-2", "", "", 60_000, 10_000, ()),
)
GROUP = GroupMetadataRequest("r-4", "g", 3, "consumer", "range", "m1", MEMBERS, timeout_ms=0)
# Transactional: the producer's ids at the edges of their Kafka types.
TXN_COMMIT = TxnOffsetCommitRequest(
    request_id="r-5",
    group_id="g",
    transactional_id="tx-é",
    producer_id=(1 << 63) - 1,
    producer_epoch=-(1 << 15),
    partitions=(PartitionCommit("t", 0, 42), PartitionCommit("u", 1, 7, 3, "m")),
    generation_id=4,
    member_id="m1",
    group_instance_id="static-1",
)
