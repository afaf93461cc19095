"""Expiry ticks, without Spark: the shard call (``streaming.spark.processor.make_shard_call``)
honours one only on the job's own ingest topic (on a tenant's it is a dead letter), and the job
says at start that only operators may write that topic."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from state.coordinator.config import CoordinatorConfig
from state.coordinator.model import TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.formats.request_codec import encode_request
from state.shard import Authorizer, ShardState, snapshot
from streaming.spark.ingest import EXPIRY_TICK, OPERATOR
from streaming.spark.job import _log_tenants
from streaming.spark.output import decode_each_output
from streaming.spark.processor import ProcessorSettings, make_shard_call
from streaming.spark.shard_cache import DecodedShards
from streaming.tenants import Tenant
from tests.fixtures.job import new_job_config

RETENTION_MS = 1_000
T0 = 1_700_000_000_000
GROUP = "team-a.orders"
SHARD = partition_for(GROUP)
TENANT = 0


@dataclass
class MemoryStore:
    """A shard's state between calls, in memory (``StoredShard``)."""

    now_ms: int = T0
    state: ShardState | None = None

    def batch_time_ms(self) -> int:
        return self.now_ms

    def read(self, shards: DecodedShards) -> ShardState | None:
        return self.state

    def write(
        self, shards: DecodedShards, shard: int, state: ShardState, records: pa.Table
    ) -> None:
        self.state = state


def messages(*rows: tuple[int, bytes], at_ms: int) -> Iterator[pd.DataFrame]:
    """Ingest rows (``streaming.spark.ingest.ingest_messages``) of (tenant, value)."""
    yield pd.DataFrame(
        {
            "shard": [SHARD] * len(rows),
            "ingest_partition": [SHARD] * len(rows),
            "ingest_offset": range(len(rows)),
            "timestamp_ms": [at_ms] * len(rows),
            "value": [value for _, value in rows],
            "tenant": [tenant for tenant, _ in rows],
        }
    )


def test_expiry_tick_is_honoured_only_on_the_jobs_own_topic() -> None:
    settings = ProcessorSettings(
        coordinator=CoordinatorConfig(offsets_retention_ms=RETENTION_MS),
        offsets_topic="offsets",
        bootstrap_servers="",
        kafka_options={},
        load_from_offsets_topic=False,
        tenant_topics=("team-a.offset-commits",),
        tenant_authorizers=(Authorizer(),),
    )
    call = make_shard_call(settings)
    store = MemoryStore()
    commit = OffsetCommitRequest("c", GROUP, (PartitionCommit("orders", 0, 5),))
    list(call(SHARD, messages((OPERATOR, encode_request(commit)), at_ms=T0), store))

    def offsets() -> set[TopicPartition]:
        assert store.state is not None
        group = snapshot(store.state).get(GROUP)
        return set(group.offsets) if group else set()

    # Past the offset's retention, a tick from the tenant's topic expires nothing...
    store.now_ms = T0 + RETENTION_MS + 1
    (out,) = call(SHARD, messages((TENANT, EXPIRY_TICK), at_ms=store.now_ms), store)
    (table,) = decode_each_output(pa.array(out["payload"]))
    assert offsets() == {TopicPartition("orders", 0)}
    rows = table.to_pylist()
    (dead,) = [row for row in rows if row["out"] == "dead_letter"]
    assert b"unknown api 'ExpireOffsets'" in dead["value"]
    assert [row["rejected"] for row in rows if row["out"] == "stats"] == [1]

    # ...the job's own tick does.
    list(call(SHARD, messages((OPERATOR, EXPIRY_TICK), at_ms=store.now_ms), store))
    assert offsets() == set()


def test_the_job_says_at_start_what_the_cluster_must_grant(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = Tenant("team-a", "team-a.offset-commits", "team-a.offset-commit-responses", ())
    config = new_job_config("127.0.0.1:9", tmp_path, tenants=(tenant,))
    with caplog.at_level(logging.INFO, logger="streaming.spark.job"):
        _log_tenants(config)
    said = caplog.text
    assert "grant WRITE on it to operators (super.users) alone" in said
    assert f"requests on {config.ingest_topic} are the operators'" in said
    assert "WRITE on its ingest topic and READ on its responses topic" in said
    assert f"nobody but the job may WRITE {config.offsets_topic}, {config.responses_topic}" in said

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="streaming.spark.job"):
        _log_tenants(new_job_config("127.0.0.1:9", tmp_path))
    assert "grant" not in caplog.text
