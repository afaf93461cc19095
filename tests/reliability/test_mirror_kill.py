"""Mirror kill: ``consumer-offsets mirror`` (its whole process group, JVM included) is SIGKILLed
mid-batch while groups keep committing on the broker, and restarted from its checkpoint, twice.
At the end the sink must equal Kafka's own OffsetFetch of every group."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from connectors.sinks import SinkError, open_sink
from tests.fixtures.admin_commits import admin_commit
from tests.fixtures.kafka import TopicFactory
from tests.reliability.support import diff, wait_until
from tests.streaming.helpers import mirror_command

pytestmark = pytest.mark.slow

KILLS = 2
GROUPS = 12


def _sink_state(sink_url: str, groups: list[str]) -> dict[tuple[str, str, int], int]:
    try:
        with open_sink(sink_url, read_only=True) as sink:
            return {
                (g, o.topic, o.partition): o.offset for g in groups for o in sink.fetch_offsets(g)
            }
    except SinkError:
        return {}


def _last_batch(sink_url: str) -> int:
    try:
        with open_sink(sink_url, read_only=True) as sink:
            return sink.status().last_batch_id
    except SinkError:
        return -1


def _kafka_state(bootstrap: str, groups: list[str]) -> dict[tuple[str, str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {
            (g, tp.topic, tp.partition): o.offset
            for g in groups
            for tp, o in admin.list_consumer_group_offsets(g).items()
            if o.offset >= 0
        }
    finally:
        admin.close()


class AdminCommits(threading.Thread):
    """Admin commits to random groups and partitions (rewinds included) until stopped."""

    def __init__(self, bootstrap: str, topic: str, groups: list[str]) -> None:
        super().__init__(daemon=True)
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._topic, self._groups = topic, groups
        self._halt = threading.Event()
        self.commits = 0

    def run(self) -> None:
        rng = random.Random(7)
        while not self._halt.is_set():
            group = rng.choice(self._groups)
            offsets = {(self._topic, rng.randrange(3)): rng.randrange(10_000)}
            admin_commit(self._admin, group, offsets)
            self.commits += 1
            self._halt.wait(0.03)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=60)


def test_mirror_sigkill_loses_nothing(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(partitions=3)
    tag = uuid.uuid4().hex[:8]
    groups = [f"mirror-kill-{tag}-{i}" for i in range(GROUPS)]
    sink_url = f"sqlite:///{tmp_path / 'mirror.db'}"
    command = mirror_command(
        kafka_bootstrap, sink_url, str(tmp_path / "checkpoint"), "200 milliseconds"
    )
    log = (tmp_path / "mirror.log").open("ab")
    commits = AdminCommits(kafka_bootstrap, topic, groups)
    commits.start()
    process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
    rng = random.Random(3)
    try:
        for _ in range(KILLS):
            wait_until(lambda: _last_batch(sink_url) >= 0, 180, "the mirror writing batches")
            batch = _last_batch(sink_url)
            wait_until(lambda b=batch: _last_batch(sink_url) > b, 60, "a new micro-batch")
            time.sleep(rng.uniform(0.05, 0.5))
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
        time.sleep(2)
    finally:
        commits.stop()
    try:
        expected = _kafka_state(kafka_bootstrap, groups)
        seen: dict[str, dict[tuple[str, str, int], int]] = {}

        def equal() -> bool:
            seen["sink"] = _sink_state(sink_url, groups)
            return seen["sink"] == expected

        try:
            wait_until(equal, 120, "the sink equal to Kafka's OffsetFetch", interval_s=0.5)
        except AssertionError:
            raise AssertionError(diff(expected, seen.get("sink", {}))) from None
        with open_sink(sink_url, read_only=True) as sink:
            assert sink.status().status == "ACTIVE"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        log.close()
    print(
        f"\nmirror kill: {KILLS} SIGKILLs, {commits.commits} admin commits to {GROUPS} groups, "
        f"{len(expected)} offsets in the sink equal to Kafka's"
    )
