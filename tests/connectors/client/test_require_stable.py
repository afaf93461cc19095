"""OffsetFetch with RequireStable over a real SQLite sink and a real broker: while a transaction
holding a TxnOffsetCommit of the group is open on its ingest partition, or committed and not yet
applied by the job, the partitions it names answer UNSTABLE_OFFSET_COMMIT (88), offset -1, as
Kafka's coordinator answers them; other partitions and groups answer as without it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from connectors.client.errors import OffsetsError
from connectors.client.offsets_reader import OffsetsReader
from connectors.client.sink_currency import SinkNotCurrentError
from connectors.client.spark.resume import stable_starting_offsets
from connectors.sinks import Sink, open_sink
from state.coordinator.acls import AclBinding, Authorizer
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.partitioner import partition_for
from tests.connectors.kafka.transactions import Committer
from tests.connectors.sinks.record_frames import commit, frame, progress
from tests.fixtures.kafka import TopicFactory
from tests.streaming.cli.support import run

UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT


@dataclass
class Setup:
    """An ingest topic of 2 partitions, a data topic of 3, and groups g and h on one ingest
    partition (``shard``), k on the other; the sink written as the job writes it."""

    bootstrap: str
    ingest: str
    topic: str
    sink: Sink
    sink_url: str
    shard: int
    h: str
    k: str
    batch_id: int = 0

    def apply(self, *records: dict[str, Any]) -> None:
        """A batch of the job's, its progress at each ingest partition's end now."""
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
        try:
            tps = [KafkaTopicPartition(self.ingest, p) for p in (0, 1)]
            ends = {tp.partition: end for tp, end in consumer.end_offsets(tps).items()}
        finally:
            consumer.close()
        batch = progress(self.batch_id, ingest_offsets=ends)
        assert self.sink.write_batch(self.batch_id, frame(*records), batch)
        self.batch_id += 1

    def reader(self) -> OffsetsReader:
        options = {"bootstrap_servers": self.bootstrap}
        return OffsetsReader(self.sink_url, options, ingest_topic=self.ingest)

    def committer(self) -> Committer:
        return Committer(self.bootstrap, self.ingest)


def _group_on(shard: int, partitions: int) -> str:
    return next(g for n in range(100) if partition_for(g := f"group-{n}", partitions) == shard)


@pytest.fixture
def setup(kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path) -> Iterator[Setup]:
    ingest, topic = topic_factory(partitions=2), topic_factory(partitions=3)
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    shard = partition_for("g", 2)
    with open_sink(url) as sink:
        sink.set_status("ACTIVE")
        found = Setup(
            kafka_bootstrap,
            ingest,
            topic,
            sink,
            url,
            shard,
            _group_on(shard, 2),
            _group_on(1 - shard, 2),
        )
        found.apply(
            commit("g", topic, 0, 5),
            commit("g", topic, 1, 7),
            commit(found.h, topic, 0, 3),
            commit(found.k, topic, 0, 1),
        )
        yield found


def answers(offsets: list[Any]) -> list[tuple[int, int, int]]:
    return [(o.partition, o.offset, o.error_code) for o in offsets]


def wait_stable(s: Setup) -> None:
    """Until the last transaction's markers are written (commit_transaction returns before)."""
    consumer = KafkaConsumer(
        bootstrap_servers=s.bootstrap, group_id=None, isolation_level="read_committed"
    )
    plain = KafkaConsumer(bootstrap_servers=s.bootstrap, group_id=None)
    try:
        tp = KafkaTopicPartition(s.ingest, s.shard)
        deadline = time.monotonic() + 10
        while consumer.end_offsets([tp]) != plain.end_offsets([tp]):
            assert time.monotonic() < deadline, "the transaction's markers were not written"
            time.sleep(0.05)
    finally:
        consumer.close()
        plain.close()


def test_an_open_transaction_makes_the_partitions_it_names_unstable_until_applied(
    setup: Setup,
) -> None:
    s, t = setup, setup.topic
    committer = s.committer()
    committer.begin()
    committer.txn_offset_commit("g", s.shard, {(t, 0): 10, (t, 2): 4})
    committer.send(s.h, s.shard, b"a plain request of another group")
    with s.reader() as reader:
        # The named partitions answer 88, offset -1; as in Kafka, all partitions are the
        # committed ones (t-2 has none: left out), a list names its own.
        assert answers(reader.fetch("g", require_stable=True)) == [(0, -1, UNSTABLE), (1, 7, 0)]
        asked = [TopicPartition(t, 2), TopicPartition(t, 1)]
        assert answers(reader.fetch("g", asked, require_stable=True)) == [
            (2, -1, UNSTABLE),
            (1, 7, 0),
        ]
        assert answers(reader.fetch("g")) == [(0, 5, 0), (1, 7, 0)]  # without: as stored
        # Another group on the same ingest partition, and one on the other: unaffected.
        assert answers(reader.fetch(s.h, require_stable=True)) == [(0, 3, 0)]
        assert answers(reader.fetch(s.k, require_stable=True)) == [(0, 1, 0)]
        described = reader.describe("g", require_stable=True).partitions
        assert [(p.partition, p.committed_offset, p.lag, p.error_code) for p in described] == [
            (0, -1, None, UNSTABLE),
            (1, 7, 0, 0),
        ]
        with pytest.raises(OffsetsError) as raised:
            reader.spark_starting_offsets("g", [t], require_stable=True)
        assert raised.value.error_code == UNSTABLE and raised.value.retriable
        assert f"{t}-0, {t}-2" in str(raised.value)

        committer.commit()
        wait_stable(s)
        # Committed, not applied by the job yet: still unstable (the sink holds the old one).
        assert answers(reader.fetch("g", require_stable=True)) == [(0, -1, UNSTABLE), (1, 7, 0)]
        s.apply(commit("g", t, 0, 10), commit("g", t, 2, 4))
        assert answers(reader.fetch("g", require_stable=True)) == [
            (0, 10, 0),
            (1, 7, 0),
            (2, 4, 0),
        ]
        text = reader.spark_starting_offsets("g", [t], require_stable=True)
        assert json.loads(text) == {t: {"0": 10, "1": 7, "2": 4}}


def test_an_aborted_transaction_leaves_the_offsets_stable_once_the_job_passes_it(
    setup: Setup,
) -> None:
    s, t = setup, setup.topic
    committer = s.committer()
    committer.begin()
    committer.txn_offset_commit("g", s.shard, {(t, 1): 99})
    with s.reader() as reader:
        assert answers(reader.fetch("g", require_stable=True)) == [(0, 5, 0), (1, -1, UNSTABLE)]
        committer.abort()
        wait_stable(s)
        s.apply()  # the job reads past the aborted request and its marker
        assert answers(reader.fetch("g", require_stable=True)) == [(0, 5, 0), (1, 7, 0)]


def test_the_resume_helper_retries_until_the_transaction_commits(setup: Setup) -> None:
    s, t = setup, setup.topic
    committer = s.committer()
    committer.begin()
    committer.txn_offset_commit("g", s.shard, {(t, 1): 8})

    def commit_later() -> None:
        time.sleep(1.0)
        committer.commit()
        wait_stable(s)
        s.apply(commit("g", t, 1, 8))

    worker = threading.Thread(target=commit_later)
    with s.reader() as reader:
        started = time.monotonic()
        worker.start()
        text = stable_starting_offsets(reader, "g", [t], ingest_topic=s.ingest, timeout_s=30)
        waited = time.monotonic() - started
        worker.join()
        assert json.loads(text) == {t: {"0": 5, "1": 8, "2": -2}}
        assert waited >= 1.0
        # Left open: REQUEST_TIMED_OUT after the timeout, naming the unstable partitions.
        committer.begin()
        committer.txn_offset_commit("g", s.shard, {(t, 0): 6})
        with pytest.raises(SinkNotCurrentError) as raised:
            stable_starting_offsets(reader, "g", [t], ingest_topic=s.ingest, timeout_s=0.5)
        assert raised.value.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert f"{t}-0" in str(raised.value)
    committer.abort()


def test_describe_require_stable_shows_88_and_fails(setup: Setup, tmp_path: Path) -> None:
    s, t = setup, setup.topic
    config = tmp_path / "job.toml"
    config.write_text(
        f'bootstrap_servers = "{s.bootstrap}"\nsink_url = "{s.sink_url}"\n'
        f'ingest_topic = "{s.ingest}"\n'
    )
    committer = s.committer()
    committer.begin()
    committer.txn_offset_commit("g", s.shard, {(t, 0): 10})
    described = run(
        "describe", "--config", str(config), "--group", "g", "--require-stable", "--json"
    )
    assert described.code == 1, described
    rows = described.json()[0]["partitions"]
    assert [(r["partition"], r["committed_offset"], r["error_code"]) for r in rows] == [
        (0, -1, UNSTABLE),
        (1, 7, 0),
    ]
    assert "UNSTABLE_OFFSET_COMMIT (88)" in described.err
    starting = ("describe", "--config", str(config), "--group", "g", "--starting-offsets")
    unstable = run(*starting, "--topic", t, "--require-stable")
    assert unstable.code == 1 and "UNSTABLE_OFFSET_COMMIT (88)" in unstable.err, unstable
    assert json.loads(run(*starting, "--topic", t).out) == {t: {"0": 5, "1": 7, "2": -2}}
    plain = run("describe", "--config", str(config), "--group", "g", "--json")
    assert plain.code == 0 and plain.json()[0]["partitions"][0]["committed_offset"] == 5
    committer.abort()


def test_a_tenants_ingest_topic_is_checked_too(setup: Setup, topic_factory: TopicFactory) -> None:
    s, t = setup, setup.topic
    tenant_ingest = topic_factory(partitions=1)
    theirs = Committer(s.bootstrap, tenant_ingest)
    theirs.begin()
    theirs.txn_offset_commit("g", 0, {(t, 1): 8})
    options = {"bootstrap_servers": s.bootstrap}
    with OffsetsReader(s.sink_url, options, ingest_topic=s.ingest) as own_only:
        assert answers(own_only.fetch("g", require_stable=True)) == [(0, 5, 0), (1, 7, 0)]
    with OffsetsReader(
        s.sink_url, options, ingest_topic=s.ingest, tenant_topics=[tenant_ingest]
    ) as reader:
        assert answers(reader.fetch("g", require_stable=True)) == [(0, 5, 0), (1, -1, UNSTABLE)]
    theirs.abort()


def test_a_tenants_open_transaction_counts_only_under_acls_that_let_it_commit_there(
    setup: Setup, topic_factory: TopicFactory
) -> None:
    """Tenant B's open transaction names group g's partitions: it holds g's RequireStable
    fetch only if B's ACLs let it WRITE the transactional id, READ g and the topic, as the job
    would then apply it; else g's offsets answer as stored."""
    s, t = setup, setup.topic
    theirs_topic = topic_factory(partitions=1)
    theirs = Committer(s.bootstrap, theirs_topic)
    theirs.begin()
    theirs.txn_offset_commit("g", 0, {(t, 1): 8})

    def rule(resource: str, pattern: str, name: str, operation: str) -> AclBinding:
        return AclBinding.parse(
            {
                "resource_type": resource,
                "pattern_type": pattern,
                "resource_name": name,
                "operation": operation,
                "permission_type": "ALLOW",
            }
        )

    txn_id = rule("TRANSACTIONAL_ID", "PREFIXED", "committer-", "WRITE")
    group, topics = rule("GROUP", "LITERAL", "g", "READ"), rule("TOPIC", "LITERAL", "*", "READ")
    own_groups = rule("GROUP", "PREFIXED", "team-b.", "READ")
    stored, held = [(0, 5, 0), (1, 7, 0)], [(0, 5, 0), (1, -1, UNSTABLE)]
    for bindings, expected in (
        ((txn_id, own_groups, topics), stored),  # may not READ g: its topic is not read
        ((group, topics), stored),  # may not WRITE the transactional id
        ((txn_id, group), stored),  # may not READ the topic
        ((txn_id, group, topics), held),
    ):
        with OffsetsReader(
            s.sink_url,
            {"bootstrap_servers": s.bootstrap},
            ingest_topic=s.ingest,
            tenant_topics=[theirs_topic],
            tenant_acls={theirs_topic: Authorizer.of(bindings)},
        ) as reader:
            assert answers(reader.fetch("g", require_stable=True)) == expected, bindings
    theirs.abort()


def test_records_of_other_groups_do_not_make_a_group_unstable(setup: Setup) -> None:
    """10,001 records of another group in an open transaction on g's ingest partition: more
    than a read may count of g's own, yet g's offsets answer as stored."""
    s = setup
    committer = s.committer()
    committer.begin()
    for n in range(10_001):
        committer.producer.produce(s.ingest, b"x%d" % n, s.h.encode(), partition=s.shard)
    committer.producer.flush(30)
    with s.reader() as reader:
        assert answers(reader.fetch("g", require_stable=True)) == [(0, 5, 0), (1, 7, 0)]
    committer.abort()


def test_an_ingest_topic_the_cluster_lacks_is_an_error_not_a_stable_answer(setup: Setup) -> None:
    options = {"bootstrap_servers": setup.bootstrap}
    missing = f"{setup.ingest}-missing"
    with OffsetsReader(setup.sink_url, options, ingest_topic=missing) as reader:
        with pytest.raises(OffsetsError) as raised:
            reader.fetch("g", require_stable=True)
        assert raised.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert missing in str(raised.value)
        assert [o.offset for o in reader.fetch("g")] == [5, 7]  # without: no broker asked
