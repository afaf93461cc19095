"""Upgrades in place: checkpoints written by earlier releases resume with today's code.

The checkpoints under ``data/checkpoint-release-*`` (see their READMEs) hold the same two
groups' offsets in their shard state: release 1's in the group-state operator, release 2's in
the value-state operator in processing-time mode. The test rebuilds the ingest topic each read
(same messages at the same offsets), leaves the offsets topic empty — so the state can only come
from the checkpoint — and resumes.
"""

from __future__ import annotations

import base64
import contextlib
import json
import tarfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetCommitKey
from state.coordinator.requests import DeleteGroupsRequest, OffsetCommitRequest, PartitionCommit
from streaming.config import JobConfig, embedded_default
from streaming.spark.job import OffsetsJob, ensure_topics
from tests.streaming.helpers import (
    compacted,
    produce_requests,
    read_offsets_topic,
    read_responses,
    wait_for,
)

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Release:
    """A release's checkpoint and what it was made with."""

    folder: Path
    #: The topics the checkpoint was written against (its offsets name them).
    topics: str
    #: Its ingest topic's partitions (None: today's default for new ingest topics).
    ingest_partitions: int | None
    state_operator: str
    #: The value-state operator's time mode it keeps (``OffsetsJob.time_mode``); None for the
    #: group-state operator, which has none.
    time_mode: str | None


RELEASES = [
    # An ingest topic of one partition per shard, the only layout then. The job runs with
    # today's default for new ingest topics, and keeps that one.
    Release(DATA / "checkpoint-release-1", "resume-release1", 4, "group-state", None),
    Release(
        DATA / "checkpoint-release-2", "resume-release2", None, "value-states", "ProcessingTime"
    ),
]


def _config(bootstrap: str, folder: Path, topics: str) -> JobConfig:
    return embedded_default(
        bootstrap_servers=bootstrap,
        ingest_topic=f"{topics}.commits",
        offsets_topic=f"{topics}.offsets",
        responses_topic=f"{topics}.responses",
        dead_letter_topic=f"{topics}.dead-letters",
        partitions=4,
        trigger_interval="200 milliseconds",
        checkpoint_location=str(folder / "checkpoint"),
        sink_url=f"sqlite:///{folder / 'offsets.db'}",
    )


def _delete_topics(admin: KafkaAdminClient, topics: str) -> None:
    """Topics of an earlier, interrupted run go first (the names are fixed by the checkpoint)."""
    for _ in range(60):
        left = [t for t in admin.list_topics() if t.startswith(f"{topics}.")]
        if not left:
            return
        with contextlib.suppress(Exception):  # being deleted already: wait for it
            admin.delete_topics(left)
        time.sleep(1)
    raise AssertionError(f"topics {topics}.* could not be deleted")


def _rebuild_ingest_topic(config: JobConfig, release: Release) -> None:
    messages = json.loads((release.folder / "ingest-messages.json").read_text(encoding="utf-8"))
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


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: r.folder.name)
def test_a_checkpoint_of_an_earlier_release_resumes_with_its_state(
    tmp_path: Path,
    kafka_bootstrap: str,
    kafka_admin: KafkaAdminClient,
    spark: Any,
    release: Release,
) -> None:
    config = _config(kafka_bootstrap, tmp_path, release.topics)
    _delete_topics(kafka_admin, release.topics)
    ensure_topics(replace(config, ingest_partitions=release.ingest_partitions))
    try:
        _rebuild_ingest_topic(config, release)
        with tarfile.open(release.folder / "checkpoint.tar.gz") as tar:
            tar.extractall(tmp_path, filter="data")
        # Release 2's state metadata names its schema file where the checkpoint was made (an
        # absolute path, Spark's): the job points it here as it starts.
        job = OffsetsJob.create(config, spark)
        job.start()
        # The release's checkpoint keeps its operator and time mode: "auto" reads which from
        # the checkpoint (Spark refuses either changed).
        assert job.state_operator == release.state_operator
        if release.time_mode is not None:
            assert job.time_mode == release.time_mode
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
        _delete_topics(kafka_admin, release.topics)
