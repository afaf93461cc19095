"""Broker kill in a 3-node cluster: one broker SIGKILLed under load, then restarted.

A 3-node KRaft cluster of its own (free ports, its own data dir) runs the job's topics with
replication factor 3 and min.insync.replicas 2, so every acks=all write survives one node. While
commits flow, a broker that leads some ingest and offsets partitions is killed (``stop-node
--kill``) and later started again. No acknowledged commit may be lost, and no request may
silently vanish: the producer either gets its write acknowledged or retries it, and every
produced request is eventually answered; sink and offsets topic end equal to the model.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.kafka.local import LocalKafkaCluster, free_port_block
from streaming.spark.job import OffsetsJob
from tests.fixtures.job import prepare_topics
from tests.reliability.load import CommitLoad, acknowledged
from tests.reliability.support import (
    QueryWatch,
    diff,
    leaders,
    offsets_topic_offsets,
    reliability_config,
    wait_for_sink,
    wait_until,
)

pytestmark = pytest.mark.slow

OUTAGE_S = 10.0
MAX_OUTAGE_S = 90.0


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[LocalKafkaCluster]:
    cluster = LocalKafkaCluster(tmp_path / "kafka3")
    try:
        cluster.start(nodes=3, port=free_port_block(6), heap="384m", echo=lambda _: None)
        yield cluster
    finally:
        cluster.stop()


def test_broker_kill_in_three_node_cluster_loses_nothing(
    three_nodes: LocalKafkaCluster, spark: Any, tmp_path: Path
) -> None:
    started = time.monotonic()
    cluster_config = three_nodes.config()
    assert cluster_config is not None
    bootstrap = cluster_config.bootstrap_servers
    config = reliability_config(bootstrap, tmp_path, replication_factor=3, min_insync_replicas=2)
    prepare_topics(config)
    # A crash of a leader, not of an idle follower: pick the node leading ingest partition 0.
    victim = leaders(bootstrap, config.ingest_topic)[0]
    load = CommitLoad(
        config,
        rate_per_s=30.0,
        seed=5,
        producer_options={"retries": 1_000, "retry_backoff_ms": 200, "request_timeout_ms": 15_000},
    )
    job = OffsetsJob.create(config, spark)
    try:
        job.start()
        alive = QueryWatch(job)
        load.start()
        wait_until(lambda: len(acknowledged(config)) > 50, 180, "first acks", alive, 1)
        acked_before = set(acknowledged(config))
        assert three_nodes.stop_node(victim, kill=True)
        killed_at = time.monotonic()
        # Two in-sync replicas remain: the job must keep acknowledging commits meanwhile.
        wait_until(
            lambda: len(acknowledged(config)) > len(acked_before) + 20,
            MAX_OUTAGE_S,
            "acks with one broker down",
            alive,
            1,
        )
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - killed_at)))
        acked_during = set(acknowledged(config)) - acked_before
        outage_s = time.monotonic() - killed_at
        three_nodes.start_node(victim)
        wait_until(
            lambda: len(acknowledged(config)) > len(acked_before) + len(acked_during) + 50,
            180,
            "acks after the broker came back",
            alive,
            1,
        )
        load.stop()
        assert not load.failed, f"the producer gave up: {load.failed[:5]}"
        produced = load.request_ids()
        wait_until(lambda: produced <= set(acknowledged(config)), 120, "all answered", alive, 1)
        model = load.model()
        wait_for_sink(config.sink_url, model, alive)
        in_topic = offsets_topic_offsets(bootstrap, config.offsets_topic)
        assert in_topic == model, diff(model, in_topic)
        acked = acknowledged(config)
        assert set(acked) == produced
        alive()
        print(
            f"\nbroker failover: node {victim} (leader of ingest partition 0) killed for "
            f"{outage_s:.0f} s and restarted; {len(produced)} commits sent ({load.rewinds} "
            f"rewinds), {len(acked)} acknowledged ({len(acked_before)} before the kill, "
            f"{len(acked_during)} during the outage), {len(model)} keys in sink and offsets "
            f"topic = model, 0 lost, 0 vanished; {time.monotonic() - started:.1f} s"
        )
    finally:
        load.stop()
        job.stop()
        job.sink.close()
