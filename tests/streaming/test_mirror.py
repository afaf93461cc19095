"""The mirror against a real broker: the sink equals Kafka's own OffsetFetch of every group.

Groups commit on the test broker in every way Kafka knows — a kafka-python consumer in a classic
group, a confluent-kafka consumer with ``group.protocol=consumer`` (KIP-848), admin-only commits
— and delete offsets and groups, and commit inside transactions (``send_offsets_to_transaction``:
committed, aborted, left open across a restart, then committed); the mirror reads the broker's
``__consumer_offsets`` and its sink must follow, also across a restart from its checkpoint.
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from starlette.testclient import TestClient

from connectors.client import OffsetsReader
from connectors.client.offsets_reader import end_offsets
from connectors.sinks import SinkError, open_sink
from connectors.sinks.values import now_ms
from state.coordinator.partitioner import partition_for
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from streaming.spark.mirror import CONSUMER_OFFSETS, MirrorConfig, OffsetsMirror
from tests.fixtures.admin_commits import admin_commit
from tests.fixtures.kafka import TopicFactory
from tests.fixtures.offset_delete import delete_offsets
from tests.streaming.cli.support import run
from tests.streaming.helpers import (
    kafka_offsets,
    mirror_command,
    produce_raw,
    sink_offsets,
    wait_for,
)

_MESSAGES = 20


def _admin_commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    admin_commit(AdminClient({"bootstrap.servers": bootstrap}), group, offsets)


def _in_transaction(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> Producer:
    """A transactional producer whose open transaction holds ``group``'s offset commit, sent as
    an exactly-once application does (``send_offsets_to_transaction``, KIP-98); the caller
    commits or aborts it."""
    # Not subscribed: its group metadata has generation -1, a simple group's commit.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"{group}-txn",
            "transaction.timeout.ms": 300_000,  # left open across the mirror's restart
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    committed = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    producer.send_offsets_to_transaction(committed, consumer.consumer_group_metadata(), 30)
    consumer.close()
    return producer


def _group_beside(bootstrap: str, group: str, prefix: str, *, same: bool) -> str:
    """A new group name whose ``__consumer_offsets`` partition is (``same``) or is not
    ``group``'s: an open transaction holds back, read_committed, what follows it there."""
    partitions = len(end_offsets({"bootstrap_servers": bootstrap}, CONSUMER_OFFSETS))
    while True:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        if (partition_for(name, partitions) == partition_for(group, partitions)) == same:
            return name


def _wait_mirrored_to_stable(bootstrap: str, sink_url: str) -> None:
    """Wait until the mirror's progress reaches every ``__consumer_offsets`` partition's last
    stable offset as of now (past the markers of the transactions that ended before)."""
    stable = end_offsets(
        {"bootstrap_servers": bootstrap, "isolation_level": "read_committed"}, CONSUMER_OFFSETS
    )

    def behind() -> dict[int, tuple[int, int]]:
        with open_sink(sink_url, read_only=True) as sink:
            progress = sink.status().ingest_offsets
        return {p: (progress.get(p, 0), e) for p, e in stable.items() if progress.get(p, 0) < e}

    wait_for(behind, lambda left: not left)


def _consume_and_commit(consumer: Any, poll: Any) -> None:
    seen, deadline = 0, time.monotonic() + 90
    while seen < _MESSAGES:
        assert time.monotonic() < deadline, f"read {seen} of {_MESSAGES} messages"
        seen += poll()
    consumer.commit()


def test_the_sink_follows_kafkas_committed_offsets(
    spark: Any, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(partitions=2)
    produce_raw(kafka_bootstrap, topic, ((i % 2, f"m{i}".encode()) for i in range(_MESSAGES)))
    tag = uuid.uuid4().hex[:8]
    classic, kip848, admin_only = f"classic-{tag}", f"kip848-{tag}", f"admin-{tag}"

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=classic,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    _consume_and_commit(
        consumer, lambda: sum(len(b) for b in consumer.poll(timeout_ms=500).values())
    )
    consumer.close()
    modern = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": kip848,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    modern.subscribe([topic])

    def poll_modern() -> int:
        message = modern.poll(0.5)
        return int(message is not None and message.error() is None)

    _consume_and_commit(modern, poll_modern)
    modern.commit(asynchronous=False)
    _admin_commit(kafka_bootstrap, admin_only, {(topic, 0): 7, (topic, 1): 9})

    sink_url = f"sqlite:///{tmp_path / 'mirror.db'}"
    config = MirrorConfig(
        source_bootstrap_servers=kafka_bootstrap,
        sink_url=sink_url,
        checkpoint_location=str(tmp_path / "checkpoint"),
        trigger_interval="500 milliseconds",
        log_end_interval_s=0.5,
    )
    mirror = OffsetsMirror.create(config, spark)
    groups = (classic, kip848, admin_only)
    pending: Producer | None = None
    try:
        mirror.start()
        with open_sink(sink_url, read_only=True) as sink:
            wait_for(lambda: sink.status().status, lambda s: s == "ACTIVE", timeout_s=120)
        for group in groups:
            expected = kafka_offsets(kafka_bootstrap, group)
            assert sum(expected.values()) > 0
            wait_for(lambda g=group: sink_offsets(sink_url, g), lambda got, e=expected: got == e)
        with open_sink(sink_url, read_only=True) as sink:
            listing = {g.group_id: g for g in sink.list_groups()}
        # The classic group's GroupMetadata record: its generation, and it is empty now.
        assert listing[classic].generation is not None and listing[classic].generation >= 1
        # The KIP-848 group from its consumer-protocol records: the group epoch as its
        # generation, and its one member, still subscribed.
        assert listing[kip848].generation is not None and listing[kip848].generation >= 1
        assert listing[kip848].members == 1
        assert mirror.other_record_types().get("ConsumerGroupTargetAssignmentMember", 0) > 0
        assert "ConsumerGroupMetadata" not in mirror.other_record_types()

        # Lag from the sink alone: the mirror stores the source's log-end offsets (10 messages
        # per partition), a reader without any Kafka client options describes the group.
        with OffsetsReader(sink_url) as reader:
            wait_for(lambda: reader.sink.log_end_offsets([topic]), lambda ends: len(ends) == 2)
            described = reader.describe(admin_only)
        assert [(p.partition, p.log_end_offset, p.lag) for p in described.partitions] == [
            (0, 10, 3),
            (1, 10, 1),
        ]

        # Commits go on while the mirror runs; a deleted group leaves the sink.
        _admin_commit(kafka_bootstrap, admin_only, {(topic, 0): 11})
        KafkaAdminClient(bootstrap_servers=kafka_bootstrap).delete_consumer_groups([classic])
        wait_for(
            lambda: sink_offsets(sink_url, admin_only),
            lambda got: got == {(topic, 0): 11, (topic, 1): 9},
        )
        wait_for(lambda: sink_offsets(sink_url, classic), lambda got: got == {})
        with open_sink(sink_url, read_only=True) as sink:
            counted = sink.group_commits()
        # The admin group's three records (two partitions, then one); the deleted group's
        # counter is gone with its offsets.
        assert counted[admin_only] == 3 and classic not in counted, counted
        # An offset delete (OffsetDelete, as kafka-consumer-groups --delete-offsets) leaves the
        # group's other partition.
        delete_offsets(kafka_bootstrap, admin_only, topic, [0], tmp_path)
        assert kafka_offsets(kafka_bootstrap, admin_only) == {(topic, 1): 9}
        wait_for(lambda: sink_offsets(sink_url, admin_only), lambda got: got == {(topic, 1): 9})

        # Transactional commits show as Kafka's OffsetFetch shows them: a committed one; an
        # aborted one over a plain commit leaves the plain one; one still open, nothing, while
        # the mirror goes on with a later commit in another partition. The difference from
        # Kafka: a plain commit behind the open transaction in its partition waits for it.
        committed_txn, aborted_txn = f"txn-committed-{tag}", f"txn-aborted-{tag}"
        pending_txn = _group_beside(kafka_bootstrap, admin_only, "txn-pending", same=False)
        held = _group_beside(kafka_bootstrap, pending_txn, "held", same=True)
        committed = {(topic, 0): 5, (topic, 1): 6}
        _in_transaction(kafka_bootstrap, committed_txn, committed).commit_transaction(30)
        _admin_commit(kafka_bootstrap, aborted_txn, {(topic, 0): 2})
        _in_transaction(kafka_bootstrap, aborted_txn, {(topic, 0): 8}).abort_transaction(30)
        pending = _in_transaction(kafka_bootstrap, pending_txn, {(topic, 1): 7})
        _admin_commit(kafka_bootstrap, held, {(topic, 0): 3})
        _admin_commit(kafka_bootstrap, admin_only, {(topic, 1): 12})
        wait_for(lambda: sink_offsets(sink_url, admin_only), lambda got: got == {(topic, 1): 12})
        _wait_mirrored_to_stable(kafka_bootstrap, sink_url)
        transactional = {committed_txn: committed, aborted_txn: {(topic, 0): 2}, pending_txn: {}}
        assert {g: kafka_offsets(kafka_bootstrap, g) for g in transactional} == transactional
        assert {g: sink_offsets(sink_url, g) for g in transactional} == transactional
        assert kafka_offsets(kafka_bootstrap, held) == {(topic, 0): 3}
        assert sink_offsets(sink_url, held) == {}
        mirror.stop()
        with open_sink(sink_url, read_only=True) as sink:
            assert sink.status().status == "STOPPED"

        # Stopped, then resumed from the checkpoint: what was committed meanwhile arrives; the
        # transaction still open does not keep it LOADING (it catches up to the last stable
        # offsets), and once committed its offsets arrive.
        _admin_commit(kafka_bootstrap, admin_only, {(topic, 1): 15})
        mirror = OffsetsMirror.create(config, spark)
        mirror.start()
        wait_for(lambda: sink_offsets(sink_url, admin_only), lambda got: got == {(topic, 1): 15})
        with open_sink(sink_url, read_only=True) as sink:
            wait_for(lambda: sink.status().status, lambda s: s == "ACTIVE")
        assert sink_offsets(sink_url, kip848) == kafka_offsets(kafka_bootstrap, kip848)
        assert sink_offsets(sink_url, pending_txn) == kafka_offsets(kafka_bootstrap, pending_txn)
        pending.commit_transaction(30)
        pending = None
        transactional |= {pending_txn: {(topic, 1): 7}, held: {(topic, 0): 3}}
        assert {g: kafka_offsets(kafka_bootstrap, g) for g in transactional} == transactional
        wait_for(lambda: sink_offsets(sink_url, pending_txn), lambda got: got == {(topic, 1): 7})
        _wait_mirrored_to_stable(kafka_bootstrap, sink_url)
        assert {g: sink_offsets(sink_url, g) for g in transactional} == transactional
    finally:
        if pending is not None:  # not left to hold its partition until the timeout
            pending.abort_transaction(30)
        mirror.stop()
        mirror.sink.close()
        modern.close()


def test_consumer_offsets_mirror_command(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    """The CLI runs the mirror in its own process into a table-prefixed sink: the sink then
    holds an admin commit, and point in time works over the plain cluster's group: after a
    later commit, ``describe --as-of``, ``reset-offsets --to-committed-at`` (dry run) and
    serve's ``offsets?as_of=`` over the mirror's sink answer the commit in force then."""
    topic = topic_factory(partitions=1)
    produce_raw(kafka_bootstrap, topic, ((0, f"m{i}".encode()) for i in range(_MESSAGES)))
    group = f"cli-mirror-{uuid.uuid4().hex[:8]}"
    before = now_ms()
    _admin_commit(kafka_bootstrap, group, {(topic, 0): 3})
    # Its tables prefixed, as a mirror's sink in the job's database has them.
    sink_url = f"sqlite:///{tmp_path / 'mirror.db'}?table_prefix=mirror_"
    command = mirror_command(
        kafka_bootstrap, sink_url, str(tmp_path / "checkpoint"), "500 milliseconds"
    )
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: sink_offsets(sink_url, group), lambda got: got == {(topic, 0): 3})
        with open_sink(sink_url, read_only=True) as sink:
            wait_for(lambda: sink.status().status, lambda s: s == "ACTIVE")
        between = now_ms()
        time.sleep(1.1)  # the next commit in a later second: thinning keeps the last of each
        _admin_commit(kafka_bootstrap, group, {(topic, 0): 12})
        wait_for(lambda: sink_offsets(sink_url, group), lambda got: got == {(topic, 0): 12})

        described = run(
            "describe", "--sink-url", sink_url, "--group", group, "--as-of", str(between), "--json"
        )  # fmt: skip
        assert described.code == 0, described.err
        ((answer,),) = (document["partitions"] for document in described.json())
        assert (answer["topic"], answer["partition"], answer["offset"]) == (topic, 0, 3)
        assert answer["exact"] is True and before <= answer["commit_timestamp_ms"] <= between
        reset_args = (
            "reset-offsets", "--bootstrap-server", kafka_bootstrap, "--sink-url", sink_url,
            "--group", group, "--all-topics", "--to-committed-at", str(between), "--json",
        )  # fmt: skip
        reset = run(*reset_args)
        assert reset.code == 0, reset.err
        assert reset.json()["executed"] is False
        assert [
            (p["topic"], p["partition"], p["current_offset"], p["new_offset"], p["error"])
            for p in reset.json()["partitions"]
        ] == [(topic, 0, 12, 3, None)]
        # Executed, it would go to a job that a plain cluster does not have: refused.
        executed = run(*reset_args, "--execute")
        assert executed.code == 1 and "mirror of cluster source" in executed.err, executed.err
        assert kafka_offsets(kafka_bootstrap, group) == {(topic, 0): 12}
        settings = ServeSettings(sink_url=sink_url, cluster_name="prod", log_end_interval_s=3600)
        with TestClient(create_app(settings)) as client:
            served = client.get(
                f"/v3/kafka/prod/consumer/{group}/offsets", params={"as_of": str(between)}
            ).json()
        assert [(o["offset"], o["timestamp"], o["exact"]) for o in served["offsets"]] == [
            (3, answer["commit_timestamp_ms"], True)
        ]
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output.decode(errors="replace")[-2000:]


def test_a_sink_holding_another_cluster_is_left_untouched(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A sink mirrors one cluster: a mirror of another cluster refuses it before writing."""
    sink_url = f"sqlite:///{tmp_path / 'mirror.db'}"
    with open_sink(sink_url) as sink:
        sink.bind_source_cluster("another-cluster-id", "prod")
        sink.set_status("ACTIVE", "mirroring prod")
    config = MirrorConfig(
        source_bootstrap_servers=kafka_bootstrap,
        sink_url=sink_url,
        checkpoint_location=str(tmp_path / "checkpoint"),
        cluster_name="test",
    )
    mirror = OffsetsMirror.create(config, spark)
    try:
        with pytest.raises(SinkError, match=r"holds cluster another-cluster-id \(prod\).*prefix"):
            mirror.start()
        assert mirror.query is None
    finally:
        mirror.stop()
        mirror.sink.close()
    with open_sink(sink_url, read_only=True) as sink:
        assert (sink.status().status, sink.status().detail) == ("ACTIVE", "mirroring prod")
        assert sink.source_cluster().cluster_id == "another-cluster-id"
