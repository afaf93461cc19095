"""Kafka's own offset expiry reaches the mirror's sink.

The secured test broker keeps offsets of an empty group for one minute
(``offsets.retention.minutes=1``, checked every second). Kafka expires them by writing
tombstones to ``__consumer_offsets``; the mirror reads those like any record, so a group that
stopped committing leaves the sink within seconds of leaving Kafka's OffsetFetch, while a group
that goes on committing stays.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient, NewTopic

from connectors.sinks import open_sink
from streaming.spark.mirror import MirrorConfig, OffsetsMirror
from tests.fixtures.admin_commits import admin_commit
from tests.fixtures.kafka_secured import SecuredKafka
from tests.streaming.helpers import kafka_offsets, sink_offsets, wait_for

#: Kafka's expiry runs on its own schedule: the retention (60 s) plus the check interval, and
#: a commit's timestamp is the broker's clock at append.
_EXPIRY_TIMEOUT_S = 150.0
#: How soon the sink must follow Kafka's OffsetFetch.
_FOLLOW_TIMEOUT_S = 15.0


class _SteadyCommitter(threading.Thread):
    """Commits the next offset of one partition every few seconds, so the group never expires."""

    def __init__(self, admin: AdminClient, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self._admin, self._group, self._topic = admin, group, topic
        self._halt = threading.Event()
        self.offset = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                admin_commit(self._admin, self._group, {(self._topic, 0): self.offset + 1})
                self.offset += 1
                self._halt.wait(5.0)
        except BaseException as e:  # reported by the test, not lost in the thread
            self.error = e

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=60)


def test_kafkas_retention_expiry_reaches_the_sink(
    spark: Any, secured_kafka: SecuredKafka, tmp_path: Path
) -> None:
    bootstrap = secured_kafka.plaintext
    topic = f"retention-{uuid.uuid4().hex[:8]}"
    topics = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        topics.create_topics([NewTopic(topic, 2, 1)])
    finally:
        topics.close()
    tag = uuid.uuid4().hex[:8]
    idle, busy = f"idle-{tag}", f"busy-{tag}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin_commit(admin, idle, {(topic, 0): 5, (topic, 1): 6})
    committer = _SteadyCommitter(admin, busy, topic)
    committer.start()

    sink_url = f"sqlite:///{tmp_path / 'mirror.db'}"
    config = MirrorConfig(
        source_bootstrap_servers=bootstrap,
        sink_url=sink_url,
        checkpoint_location=str(tmp_path / "checkpoint"),
        trigger_interval="500 milliseconds",
    )
    mirror = OffsetsMirror.create(config, spark)
    try:
        mirror.start()
        wait_for(
            lambda: sink_offsets(sink_url, idle),
            lambda got: got == {(topic, 0): 5, (topic, 1): 6},
        )
        # Kafka expires the idle group's offsets after the retention...
        wait_for(lambda: kafka_offsets(bootstrap, idle), lambda got: got == {}, _EXPIRY_TIMEOUT_S)
        # ...and the sink follows within seconds: the expiry's tombstones were mirrored.
        wait_for(lambda: sink_offsets(sink_url, idle), lambda got: got == {}, _FOLLOW_TIMEOUT_S)
        assert committer.error is None, committer.error
        # The group that went on committing outlived the retention, in Kafka and in the sink.
        committer.stop()
        expected = kafka_offsets(bootstrap, busy)
        assert expected == {(topic, 0): committer.offset}
        wait_for(
            lambda: sink_offsets(sink_url, busy), lambda got: got == expected, _FOLLOW_TIMEOUT_S
        )
        with open_sink(sink_url, read_only=True) as sink:
            # Expired from the offsets, kept in the history: what the group had committed.
            history = sink.history(idle, topic, 0)
        assert [entry.offset for entry in history] == [5]
    finally:
        committer.stop()
        mirror.stop()
        mirror.sink.close()
