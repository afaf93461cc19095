"""The local Kafka launcher: pure configuration first, then real brokers in their own data dirs
and ports (the session's broker is left alone)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from connectors.kafka.local import (
    ClusterConfig,
    KafkaLocalError,
    LocalKafkaCluster,
    free_port_block,
    main,
    new_cluster_id,
)
from connectors.kafka.local.config import HOST, ephemeral_ports, port_free
from connectors.runtime import HOME_ENV


def test_node_ports_follow_the_first_port() -> None:
    config = ClusterConfig(nodes=3, port=9092)
    assert [(config.broker_port(n), config.controller_port(n)) for n in config.node_ids] == [
        (9092, 9093),
        (9094, 9095),
        (9096, 9097),
    ]
    assert config.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096"
    assert config.quorum_voters == "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"
    assert config.replication_factor == 3
    assert ClusterConfig().replication_factor == 1


def test_config_rejects_impossible_clusters() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ClusterConfig(nodes=0)
    with pytest.raises(ValueError, match="no room"):
        ClusterConfig(nodes=3, port=65533)


def test_cluster_id_is_kraft_shaped() -> None:
    cluster_id = new_cluster_id()
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
    assert cluster_id != new_cluster_id()


def test_cluster_id_never_looks_like_an_option() -> None:
    # One random id in 64 would start with "-" (kafka-storage then fails: "expected one
    # argument"); 3,000 draws would see one with near certainty.
    assert not any(new_cluster_id().startswith("-") for _ in range(3000))


def test_listener_ports_stay_out_of_the_ephemeral_range() -> None:
    # Outbound connections take their local ports from the ephemeral range: a broker port there,
    # free when probed, was taken by a parallel run's client before the broker bound it.
    ephemeral = ephemeral_ports()
    for _ in range(50):
        first = free_port_block(6)
        block = range(first, first + 6)
        assert block[-1] < ephemeral.start or block[0] >= ephemeral.stop
        assert all(port_free(HOST, p) for p in block)


def test_a_stale_pid_file_is_not_a_running_broker(tmp_path: Path) -> None:
    cluster = LocalKafkaCluster(tmp_path)
    (tmp_path / "cluster.json").write_text('{"nodes": 1, "port": 9092}')
    pid_file = tmp_path / "node-1" / "kafka.pid"
    pid_file.parent.mkdir()
    pid_file.write_text(f"{os.getpid()}\n")  # alive, but not a broker
    assert cluster.running_nodes() == {}
    assert not pid_file.exists()


def test_missing_jars_name_the_setup_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    with pytest.raises(KafkaLocalError, match=r"deploy/setup\.sh"):
        LocalKafkaCluster(tmp_path / "kafka").start(port=free_port_block(2), echo=lambda _: None)


@pytest.mark.kafka
def test_start_status_reuse_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = str(tmp_path / "kafka")
    port = free_port_block(2)
    common = ["--data-dir", data_dir]
    try:
        assert main(["start", "--port", str(port), *common]) == 0
        assert f"started 1 node(s) at 127.0.0.1:{port}" in capsys.readouterr().out

        assert main(["status", *common]) == 0
        assert "1/1 node(s) running" in capsys.readouterr().out

        assert main(["start", "--port", str(port), *common]) == 0
        assert f"already running at 127.0.0.1:{port}" in capsys.readouterr().out

        assert main(["start", "--nodes", "3", "--port", str(port), *common]) == 1
        assert "a different local Kafka runs" in capsys.readouterr().err

        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        try:
            assert [b["node_id"] for b in admin.describe_cluster()["brokers"]] == [1]
        finally:
            admin.close()
    finally:
        assert main(["stop", *common]) == 0
    assert "stopped node(s) [1]" in capsys.readouterr().out
    assert main(["status", *common]) == 1
    assert not (tmp_path / "kafka" / "node-1" / "kafka.pid").exists()


@pytest.mark.kafka
@pytest.mark.slow
def test_three_nodes_survive_a_crashed_node(tmp_path: Path) -> None:
    cluster = LocalKafkaCluster(tmp_path / "kafka")
    config = cluster.start(nodes=3, port=free_port_block(6), echo=lambda _: None).config
    bootstrap = config.bootstrap_servers
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic("replicated", 3, 3)])
        finally:
            admin.close()
        _produce(bootstrap, "replicated", range(0, 10))

        assert cluster.stop_node(2, kill=True)
        assert sorted(cluster.running_nodes()) == [1, 3]
        # acks=all with a replica gone: waits until the controller fences node 2 and shrinks
        # the ISR (the broker session timeout), then succeeds on the two nodes left.
        _produce(bootstrap, "replicated", range(10, 20))

        assert cluster.start_node(2)
        assert sorted(cluster.running_nodes()) == [1, 2, 3]
        assert sorted(_consume(bootstrap, "replicated", expected=20)) == list(range(20))
    finally:
        cluster.stop()
    assert cluster.running_nodes() == {}


def _produce(bootstrap: str, topic: str, values: range) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    try:
        sent = [producer.send(topic, str(value).encode()) for value in values]
        for future in sent:
            future.get(timeout=60)  # raises if the record was not acknowledged
    finally:
        producer.close()


def _consume(bootstrap: str, topic: str, expected: int) -> list[int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        values: list[int] = []
        for _ in range(120):
            for batch in consumer.poll(timeout_ms=500).values():
                values.extend(int(m.value) for m in batch)
            if len(values) >= expected:
                break
        return values
    finally:
        consumer.close()
