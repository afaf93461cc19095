"""The value-state operator: a shard as a base, a log and a head in Spark's state store, read
back whole after base rewrites and restarts."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetCommitKey
from state.coordinator.requests import DeleteGroupsRequest, OffsetCommitRequest, PartitionCommit
from state.engine.shard_log import LOG_FLOOR_BYTES
from streaming.config import JobConfig
from streaming.spark.job import OffsetsJob
from streaming.spark.state_metadata import (
    checkpoint_state_metadata,
    earlier_release,
    operator_in,
    time_mode_in,
)
from tests.fixtures.job import new_job_config
from tests.streaming.helpers import produce_requests, read_offsets_topic, read_responses, wait_for

pytestmark = pytest.mark.slow

METADATA_CHARS = 3500  # each offset record ~3.6 KB: the log passes its floor in ~18 calls
COMMITS = 26


@pytest.fixture
def job_config(tmp_path: Path, kafka_bootstrap: str) -> JobConfig:
    return new_job_config(kafka_bootstrap, tmp_path, state_cache_mb=0)


@pytest.fixture
def jobs(spark: Any) -> Iterator[list[OffsetsJob]]:
    started: list[OffsetsJob] = []
    yield started
    for job in started:
        job.stop()
        job.sink.close()


def _start(config: JobConfig, spark: Any, jobs: list[OffsetsJob]) -> OffsetsJob:
    job = OffsetsJob.create(config, spark)
    jobs.append(job)
    job.start()
    return job


def _send(config: JobConfig, request: Any) -> dict[str, Any]:
    produce_requests(config.bootstrap_servers, config.ingest_topic, [request])
    return wait_for(
        lambda: read_responses(config.bootstrap_servers, config.responses_topic),
        lambda got: request.request_id in got,
    )[request.request_id]


def _incompressible() -> str:
    """Metadata the base's LZ4 cannot shrink, so that bytes follow records."""
    return secrets.token_hex(METADATA_CHARS // 2)


def _heads(spark: Any, config: JobConfig) -> list[dict[str, Any]]:
    """The shards' ``head`` rows, read with Spark's state data source."""
    rows = (
        spark.read.format("statestore")
        .option("stateVarName", "head")
        .load(config.checkpoint_location)
        .collect()
    )
    return [row["value"].asDict() for row in rows]


# 0: every call reads the base and the whole log; 256: a worker replays only the chunks the
# other worker appended since the state it kept (or takes its kept state as it is).
@pytest.mark.parametrize("cache_mb", [0, 256])
def test_a_shard_reads_back_whole_from_base_and_log_across_rewrites_and_restarts(
    job_config: JobConfig, spark: Any, jobs: list[OffsetsJob], cache_mb: int
) -> None:
    job_config = replace(job_config, state_cache_mb=cache_mb)
    job = _start(job_config, spark, jobs)
    # One commit per micro-batch (each waits for its answer): one log chunk per call.
    for p in range(COMMITS):
        request = OffsetCommitRequest(
            f"c{p}", "g", (PartitionCommit("t", p, 100 + p, metadata=_incompressible()),)
        )
        assert _send(job_config, request)["errorCode"] == 0
    # Every shard has a head (the start's warm-up batch calls each); only g's holds commits.
    heads = _heads(spark, job_config)
    head = max(heads, key=lambda h: h["base_bytes"] + h["log_bytes"])
    assert [h["log_chunks"] for h in heads if h is not head] == [0] * (len(heads) - 1)
    # The log outgrew its floor at least once: the base was rewritten and the log restarted.
    assert 0 < head["log_chunks"] < COMMITS, head
    assert head["log_bytes"] <= max(head["base_bytes"], LOG_FLOOR_BYTES)
    assert head["base_bytes"] > COMMITS * METADATA_CHARS / 2  # the base holds the early commits

    job.stop()
    # A restart: new Python workers, and the shard read back from the base and the log.
    metadata = checkpoint_state_metadata(spark, job_config.checkpoint_location)
    assert operator_in(metadata) == "value-states"
    # A new checkpoint runs without Spark's timers (the processor asks for the batch's timestamp)
    # and is no earlier release's: the restart resumes it.
    assert time_mode_in(metadata) == "NoTime"
    assert earlier_release(metadata) is None
    _start(job_config, spark, jobs)
    again = OffsetCommitRequest("again", "g", (PartitionCommit("t", 0, 999),))
    assert _send(job_config, again)["errorCode"] == 0
    # The group's delete tombstones every offset the state holds: all of them, none lost.
    assert _send(job_config, DeleteGroupsRequest("d", "g"))["errorCode"] == 0
    records = [
        r for _, r in read_offsets_topic(job_config.bootstrap_servers, job_config.offsets_topic)
    ]
    tombstoned = {
        r.key.partition
        for r in records
        if r.value is None and isinstance(r.key, OffsetCommitKey) and r.key.group == "g"
    }
    assert tombstoned == set(range(COMMITS))
    # And the state is empty after: a second delete finds no group.
    gone = _send(job_config, DeleteGroupsRequest("d2", "g"))
    assert gone["errorCode"] == ErrorCode.GROUP_ID_NOT_FOUND, gone
