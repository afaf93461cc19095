"""Upgrades in place: a checkpoint written by the previous release resumes with today's code.

The checkpoint under ``data/checkpoint-release-1`` (see its README) holds two groups' offsets in
its shard state. The test rebuilds the ingest topic it read (same messages at the same offsets),
leaves the offsets topic empty — so the state can only come from the checkpoint — and resumes.
"""

from __future__ import annotations

import base64
import contextlib
import json
import tarfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetCommitKey
from state.coordinator.requests import DeleteGroupsRequest, OffsetCommitRequest, PartitionCommit
from streaming.config import JobConfig, embedded_default
from streaming.job import OffsetsJob, ensure_topics
from tests.streaming.helpers import (
    compacted,
    produce_requests,
    read_offsets_topic,
    read_responses,
    wait_for,
)

pytestmark = pytest.mark.slow

RELEASE_1 = Path(__file__).parent / "data" / "checkpoint-release-1"
#: The topics the checkpoint was written against (its offsets name them).
TOPICS = "resume-release1"


def _config(bootstrap: str, folder: Path) -> JobConfig:
    return embedded_default(
        bootstrap_servers=bootstrap,
        ingest_topic=f"{TOPICS}.commits",
        offsets_topic=f"{TOPICS}.offsets",
        responses_topic=f"{TOPICS}.responses",
        dead_letter_topic=f"{TOPICS}.dead-letters",
        partitions=4,
        trigger_interval="200 milliseconds",
        checkpoint_location=str(folder / "checkpoint"),
        sink_url=f"sqlite:///{folder / 'offsets.db'}",
    )


def _delete_topics(admin: KafkaAdminClient) -> None:
    """Topics of an earlier, interrupted run go first (the names are fixed by the checkpoint)."""
    for _ in range(60):
        left = [t for t in admin.list_topics() if t.startswith(f"{TOPICS}.")]
        if not left:
            return
        with contextlib.suppress(Exception):  # being deleted already: wait for it
            admin.delete_topics(left)
        time.sleep(1)
    raise AssertionError(f"topics {TOPICS}.* could not be deleted")


def _rebuild_ingest_topic(config: JobConfig) -> None:
    messages = json.loads((RELEASE_1 / "ingest-messages.json").read_text(encoding="utf-8"))
    producer = KafkaProducer(bootstrap_servers=config.bootstrap_servers, acks="all")
    try:
        for message in messages:  # in offset order per partition
            metadata = producer.send(
                config.ingest_topic,
                key=base64.b64decode(message["key"]),
                value=base64.b64decode(message["value"]),
                partition=message["partition"],
            ).get(timeout=30)
            assert metadata.offset == message["offset"]
    finally:
        producer.close()


def test_a_checkpoint_of_the_previous_release_resumes_with_its_state(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: KafkaAdminClient, spark: Any
) -> None:
    config = _config(kafka_bootstrap, tmp_path)
    _delete_topics(kafka_admin)
    # The release's topics: an ingest topic of one partition per shard, the only layout then.
    # The job below runs with today's default for new ingest topics, and keeps that one.
    ensure_topics(replace(config, ingest_partitions=config.partitions))
    try:
        _rebuild_ingest_topic(config)
        with tarfile.open(RELEASE_1 / "checkpoint.tar.gz") as tar:
            tar.extractall(tmp_path, filter="data")
        job = OffsetsJob.create(config, spark)
        job.start()
        # The release's checkpoint keeps its operator: "auto" reads which from the checkpoint.
        assert job.state_operator == "group-state"
        try:
            produce_requests(
                config.bootstrap_servers,
                config.ingest_topic,
                [
                    DeleteGroupsRequest("d1", "payments"),
                    OffsetCommitRequest("c1", "billing", (PartitionCommit("invoices", 3, 8),)),
                ],
            )
            responses = wait_for(
                lambda: read_responses(config.bootstrap_servers, config.responses_topic),
                lambda got: {"d1", "c1"} <= set(got),
                # The first batch after a restart restores the state and starts Python workers.
                timeout_s=300,
            )
            # The group exists only in the checkpoint's state: without it, GROUP_ID_NOT_FOUND.
            assert responses["d1"]["errorCode"] == 0, responses["d1"]
            assert responses["d1"]["errorCode"] != ErrorCode.GROUP_ID_NOT_FOUND
            assert responses["c1"]["errorCode"] == 0
            records = read_offsets_topic(config.bootstrap_servers, config.offsets_topic)
            tombstones = {r.key for _, r in records if r.value is None}
            assert {
                OffsetCommitKey("payments", "orders", 0),
                OffsetCommitKey("payments", "orders", 1),
            } <= tombstones
            assert {k: v.offset for k, v in compacted(records).items()} == {
                OffsetCommitKey("billing", "invoices", 3): 8
            }
            assert job.sink.status().last_batch_id >= 2  # batch ids go on from the checkpoint
        finally:
            job.stop()
            job.sink.close()
    finally:
        _delete_topics(kafka_admin)
