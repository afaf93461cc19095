"""Upgrades in place: checkpoints written by earlier releases are migrated by today's code.

The checkpoints under ``data/checkpoint-release-*`` (see their READMEs) hold the same two
groups' offsets: release 1's in the group-state operator, release 2's in the value-state operator
in processing-time mode. Today's job keeps neither: it moves such a checkpoint aside and starts a
new one where the old one's last committed batch ended, its state rebuilt from the offsets topic.

The test rebuilds the ingest topic (same messages at the same offsets) and puts in the offsets
topic the records the release wrote for those commits, built with the project's own record
encoders: the offsets topic is what the migration reads, so the test gives it what the release
left there. Replaying the release's ingest messages through today's job instead would test
today's job twice and the migration not at all.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import tarfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

from state.coordinator.model import OffsetAndMetadata, OffsetCommitKey, Record
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import DeleteGroupsRequest, OffsetCommitRequest, PartitionCommit
from streaming.config import JobConfig, embedded_default
from streaming.spark.job import OffsetsJob
from streaming.spark.topics import ensure_topics
from tests.state.formats.records.offset_encoders import encode_record
from tests.streaming.helpers import (
    compacted,
    produce_requests,
    read_offsets_topic,
    read_responses,
    sink_offsets,
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
    #: What the job says the checkpoint holds.
    earlier: str


RELEASES = [
    # An ingest topic of one partition per shard, the only layout then.
    Release(
        DATA / "checkpoint-release-1",
        "resume-release1",
        4,
        "the group-state operator (applyInPandasWithState)",
    ),
    Release(
        DATA / "checkpoint-release-2",
        "resume-release2",
        None,
        "value states in time mode ProcessingTime",
    ),
]

#: What both releases committed, in log order (their READMEs): the offsets they serve.
COMMITS = [
    (OffsetCommitKey("payments", "orders", 0), 10),
    (OffsetCommitKey("payments", "orders", 1), 20),
    (OffsetCommitKey("payments", "orders", 0), 15),
    (OffsetCommitKey("billing", "invoices", 3), 7),
]
SERVED = {"payments": {("orders", 0): 15, ("orders", 1): 20}, "billing": {("invoices", 3): 7}}


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


def _write_offsets_topic(config: JobConfig) -> None:
    """The release's OffsetCommit records for :data:`COMMITS`, each in its group's partition."""
    producer = KafkaProducer(bootstrap_servers=config.bootstrap_servers, acks="all")
    now = int(time.time() * 1000)
    try:
        for key, offset in COMMITS:
            record_key, value = encode_record(
                Record(key, OffsetAndMetadata(offset, commit_timestamp_ms=now))
            )
            partition = partition_for(key.group, config.partitions)
            producer.send(config.offsets_topic, key=record_key, value=value, partition=partition)
        producer.flush()
    finally:
        producer.close()


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: r.folder.name)
def test_a_checkpoint_of_an_earlier_release_is_migrated_and_serves_its_offsets(
    tmp_path: Path,
    kafka_bootstrap: str,
    kafka_admin: KafkaAdminClient,
    spark: Any,
    release: Release,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = _config(kafka_bootstrap, tmp_path, release.topics)
    _delete_topics(kafka_admin, release.topics)
    ensure_topics(replace(config, ingest_partitions=release.ingest_partitions))
    try:
        _rebuild_ingest_topic(config, release)
        _write_offsets_topic(config)
        with tarfile.open(release.folder / "checkpoint.tar.gz") as tar:
            tar.extractall(tmp_path, filter="data")
        job = OffsetsJob.create(config, spark)
        with caplog.at_level(logging.WARNING, logger="streaming.spark.job"):
            job.start()
        try:
            # Moved aside, kept whole, and the log line says where.
            (aside,) = tmp_path.glob("checkpoint.earlier-release-*")
            assert (aside / "commits" / "1").is_file()
            (line,) = [r.getMessage() for r in caplog.records if "migrated" in r.getMessage()]
            assert str(aside) in line and release.earlier in line
            assert job.plan is not None and job.plan.migrate == release.earlier
            # The state, rebuilt from the offsets topic, serves what the release served.
            served = wait_for(
                lambda: {g: sink_offsets(config.sink_url, g) for g in SERVED},
                lambda got: got == SERVED,
                timeout_s=300,
            )
            assert served == SERVED
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
                timeout_s=300,
            )
            # The group is known from the rebuilt state (else GROUP_ID_NOT_FOUND).
            assert responses["d1"]["errorCode"] == 0, responses["d1"]
            assert responses["c1"]["errorCode"] == 0
            # The release's requests (r1-r3) were answered by the release: reading started
            # after them, so they are not answered again.
            assert set(responses) == {"d1", "c1"}
            records = read_offsets_topic(config.bootstrap_servers, config.offsets_topic)
            assert {k: v.offset for k, v in compacted(records).items()} == {
                OffsetCommitKey("billing", "invoices", 3): 8
            }
            wait_for(
                lambda: sink_offsets(config.sink_url, "billing"),
                lambda got: got == {("invoices", 3): 8},
            )
            assert sink_offsets(config.sink_url, "payments") == {}
        finally:
            job.stop()
            job.sink.close()
        # The new checkpoint is today's: a second start resumes it, migrating nothing.
        again = OffsetsJob.create(config, spark)
        try:
            again.start()
            assert again.plan is not None and again.plan.resumed and not again.plan.migrate
        finally:
            again.stop()
            again.sink.close()
    finally:
        _delete_topics(kafka_admin, release.topics)
