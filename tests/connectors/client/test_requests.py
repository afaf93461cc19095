"""Building requests and ingest messages from the caller's arguments (no Kafka)."""

from __future__ import annotations

import json

from connectors.client.requests import (
    ingest_message,
    offset_commit,
    partitions_of,
    with_partitions,
)
from state.coordinator.model import OffsetAndMetadata, TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import PartitionCommit

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


def test_a_retry_resends_only_the_asked_partitions_with_every_other_field() -> None:
    request = offset_commit(
        "g",
        {TP0: 5, ("orders", 1): OffsetAndMetadata(7, leader_epoch=2, metadata="m")},
        generation_id=3,
        member_id="m-1",
        group_instance_id="i",
        retention_ms=60_000,
    )
    assert request.request_id == "" and partitions_of(request) == [TP0, TP1]
    retry = with_partitions(request, "r-2", [TP1])
    assert retry.request_id == "r-2"
    assert retry.partitions == (PartitionCommit("orders", 1, 7, 2, "m"),)
    assert (retry.generation_id, retry.member_id, retry.group_instance_id) == (3, "m-1", "i")
    assert retry.retention_time_ms == 60_000


def test_the_ingest_message_is_keyed_by_group_on_the_group_s_partition() -> None:
    request = with_partitions(
        offset_commit("payments", {TP0: 1}),
        "r-1",
        [TP0],
    )
    message = ingest_message(request)
    assert message.key == b"payments" and message.request_id == "r-1"
    assert json.loads(message.value)["requestId"] == "r-1"
    assert message.partition(12) == partition_for("payments", 12)
