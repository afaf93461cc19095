"""History retention in the running job: commits leave the history table after
``history_retention_ms`` while the committed offsets stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connectors.sinks import open_sink
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from streaming.spark.job import OffsetsJob
from tests.fixtures.job import new_job_config
from tests.streaming.helpers import produce_requests, read_responses, wait_for

pytestmark = pytest.mark.slow


def _commit(request_id: str, group: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        request_id=request_id,
        group_id=group,
        partitions=(PartitionCommit("orders", 0, offset),),
    )


def test_the_job_deletes_expired_history_and_keeps_offsets(
    tmp_path: Path, kafka_bootstrap: str, spark: Any
) -> None:
    config = new_job_config(
        kafka_bootstrap,
        tmp_path,
        keep_history=True,
        history_retention_ms=20_000,
        history_retention_check_interval_ms=300,
    )
    job = OffsetsJob.create(config, spark)
    job.start()
    try:
        # Commits from here on: a first micro-batch that starts late on a busy machine would
        # otherwise take most of the retention before the history is read.
        with open_sink(config.sink_url, read_only=True) as sink:
            wait_for(sink.status, lambda status: status.status == "ACTIVE")
        produce_requests(
            config.bootstrap_servers,
            config.ingest_topic,
            [_commit("r1", "payments", 10), _commit("r2", "billing", 7)],
        )
        wait_for(
            lambda: read_responses(config.bootstrap_servers, config.responses_topic),
            lambda got: {"r1", "r2"} <= set(got),
        )
        with open_sink(config.sink_url, read_only=True) as sink:
            assert [h.offset for h in sink.history("payments")] == [10]
            # Gone after the retention, within a check interval or two.
            wait_for(lambda: sink.history("billing"), lambda found: found == [], timeout_s=60)
            assert sink.history("payments") == []
            assert {
                o.group_id: o.offset for g in ("payments", "billing") for o in sink.fetch_offsets(g)
            } == {"payments": 10, "billing": 7}
        produce_requests(
            config.bootstrap_servers,
            config.ingest_topic,
            [_commit("r3", "payments", 11)],
        )
        wait_for(
            lambda: read_responses(config.bootstrap_servers, config.responses_topic),
            lambda got: "r3" in got,
        )
        with open_sink(config.sink_url, read_only=True) as sink:
            assert [h.offset for h in sink.history("payments")] == [11]
        assert job.retention is not None and job.retention.is_alive()
    finally:
        job.stop()
        job.sink.close()
    assert job.retention is not None and not job.retention.is_alive()
