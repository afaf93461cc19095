"""Transactional offset commits against Kafka's coordinator: real transactional producers
(confluent-kafka, and one kafka-python) send each round's offsets to Kafka's own coordinator
(``send_offsets_to_transaction``) and, in the same transaction, the TxnOffsetCommit to the job
(:class:`TransactionalCommitter`). Rounds end in commit, abort, commit after staying open,
Kafka's abort of a timed-out transaction, and the fencing abort of a second
``init_transactions``; one group has a member whose generation the job is told (KIP-447);
plain commits, OffsetDelete and DeleteGroups go to both sides between and during them.
Compared: every answer, the partitions answering UNSTABLE_OFFSET_COMMIT (88) under
RequireStable while a transaction is open, the final offsets (Kafka's OffsetFetch, the job's
sink) and the records (Kafka's ``__consumer_offsets`` read committed, the job's offsets topic).

Equal, except (README, "Differences from Kafka"):
- the job reads a TxnOffsetCommit only after its commit marker, so it answers it then: a stale
  generation is refused (ILLEGAL_GENERATION) after the transaction committed, where Kafka
  refuses ``send_offsets_to_transaction`` before (and the application aborts); the
  application's output is then committed without its offsets;
- requests of groups on the ingest partition of an open transaction wait for it to end (the job
  reads read_committed): Kafka answers a plain commit sent meanwhile at once, the job after the
  transaction's end (with the same offsets afterwards: Kafka applies a pending offset only where
  its record is newer than the committed one, which is the job's ingest order);
- a group that only an aborted transaction named exists for Kafka (its coordinator made it at
  the TxnOffsetCommit): an OffsetDelete or DeleteGroups of it meanwhile gets 0 from Kafka and
  GROUP_ID_NOT_FOUND (69) from the job, which never saw the aborted request.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer
from kafka import TopicPartition as KafkaPartition
from kafka.structs import OffsetAndMetadata as KafkaOffset

from connectors.client import CommitResult, OffsetCommitClient, OffsetsReader
from connectors.client.errors import CommitFailedError
from connectors.client.transactional import (
    GroupMetadata,
    PendingTxnCommit,
    TransactionalCommitter,
    group_metadata,
)
from state.coordinator.errors import ErrorCode
from state.coordinator.model import MemberMetadata, TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import GroupMetadataRequest
from streaming.config import JobConfig
from tests.conformance.harness import KAFKA_OFFSETS_TOPIC, same_records
from tests.conformance.job_coordinator import JobCoordinator
from tests.conformance.kafka_coordinator import KafkaCoordinator
from tests.conformance.operations import (
    Answer,
    Commit,
    CommitPartition,
    DeleteGroup,
    DeleteOffsets,
    Fetched,
    Operation,
    RecordSummary,
    Sequence,
)
from tests.conformance.records import end_offsets, group_records
from tests.fixtures.job import RunningJob, unique_group
from tests.fixtures.kafka import TopicFactory

#: The transaction timeout of the round Kafka aborts for it (its check runs every 10 s).
_SHORT_TXN_TIMEOUT_MS = 2_000
_TXN_TIMEOUT_MS = 30_000
_SETTLE_S = 60.0


def _group_on(shard: int, label: str, partitions: int) -> str:
    """A fresh group id whose ingest partition is ``shard``: rounds that leave a transaction
    open hold only their own partition."""
    while True:
        group = unique_group(f"txn-{label}")
        if partition_for(group, partitions) == shard:
            return group


def _producer(bootstrap: str, transactional_id: str, timeout_ms: int = _TXN_TIMEOUT_MS) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": timeout_ms,
            "linger.ms": 0,
        }
    )
    producer.init_transactions(30)
    return producer


@dataclass
class Sides:
    """Both coordinators and the clients that speak to them."""

    bootstrap: str
    config: JobConfig
    topic: str
    kafka: KafkaCoordinator
    job: JobCoordinator
    committer: TransactionalCommitter
    client: OffsetCommitClient
    admin: AdminClient
    shards: int

    def both(self, group: str, operation: Operation) -> None:
        """One plain request to both sides, answered alike."""
        kafka = self.kafka.apply(group, operation)
        (job,) = self.job.run([Sequence(group, (operation,))])
        assert job == [kafka], f"{group} {operation}: kafka {kafka}, job {job[0]}"

    def send(
        self,
        producer: Producer,
        txn_id: str,
        group: str,
        offsets: dict[int, int],
        cgmd: bytes | None = None,
    ) -> PendingTxnCommit:
        """The same offsets into ``producer``'s open transaction: to Kafka's coordinator and,
        as a TxnOffsetCommit, to the job; ``cgmd`` a consumer's group metadata (default: of a
        consumer of ``group`` that has not joined)."""
        if cgmd is None:
            metadata = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group})
            try:
                cgmd = metadata.consumer_group_metadata()
            finally:
                metadata.close()
        pending = self.committer.send_offsets_to_transaction(
            producer, txn_id, {(self.topic, p): o for p, o in offsets.items()}, cgmd
        )
        producer.send_offsets_to_transaction(
            [ConfluentPartition(self.topic, p, o) for p, o in offsets.items()], cgmd, 30
        )
        return pending

    def round(
        self, group: str, offsets: dict[int, int], end: str, cgmd: bytes | None = None
    ) -> PendingTxnCommit:
        """A transaction of its own producer that sends ``offsets`` and ends in ``end``
        (``commit``/``abort``)."""
        txn_id = f"txn-{uuid.uuid4().hex[:10]}"
        producer = _producer(self.bootstrap, txn_id)
        producer.begin_transaction()
        pending = self.send(producer, txn_id, group, offsets, cgmd)
        if end == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
            pending.forget()
        return pending

    def unstable(self, group: str, partitions: list[int]) -> tuple[set[int], set[int]]:
        """The partitions that answer 88 under RequireStable: (Kafka's, the job's)."""
        asked = [ConfluentPartition(self.topic, p) for p in partitions]
        (future,) = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, asked)], require_stable=True
        ).values()
        kafka = {
            tp.partition
            for tp in future.result().topic_partitions
            if tp.error is not None and tp.error.code() == ErrorCode.UNSTABLE_OFFSET_COMMIT
        }
        job = _job_unstable(self, group, partitions)
        return kafka, job

    def settled(self, group: str, partitions: list[int]) -> None:
        """Wait until neither side has a pending offset of ``group`` left."""
        deadline = time.monotonic() + _SETTLE_S
        while any(self.unstable(group, partitions)):
            assert time.monotonic() < deadline, f"{group}: offsets still unstable"
            time.sleep(0.2)


def _job_unstable(sides: Sides, group: str, partitions: list[int]) -> set[int]:
    """The job's RequireStable read of ``partitions``: those answered 88."""
    config = sides.config
    with OffsetsReader(
        config.sink_url, config.kafka_python_options(), ingest_topic=config.ingest_topic
    ) as reader:
        answers = reader.fetch(
            group, [TopicPartition(sides.topic, p) for p in partitions], require_stable=True
        )
    return {a.partition for a in answers if a.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT}


def _joined(sides: Sides, group: str) -> Consumer:
    """A confluent-kafka consumer of ``group``, subscribed to the topic and assigned."""
    consumer = Consumer(
        {
            "bootstrap.servers": sides.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 10_000,
        }
    )
    consumer.subscribe([sides.topic])
    deadline = time.monotonic() + _SETTLE_S
    while not consumer.assignment():
        assert time.monotonic() < deadline, f"{group}: no assignment"
        consumer.poll(0.2)
    return consumer


def _tell_the_job(sides: Sides, group: str, generation: int) -> None:
    """The group's generation and members as Kafka has them, to the job (GroupMetadata)."""
    (described,) = sides.admin.describe_consumer_groups([group]).values()
    found = described.result()
    members = tuple(
        MemberMetadata(m.member_id, client_id=m.client_id, subscribed_topics=(sides.topic,))
        for m in found.members
    )
    request = GroupMetadataRequest(
        uuid.uuid4().hex,
        group,
        generation,
        protocol_type="consumer",
        protocol=found.partition_assignor or None,
        leader=members[0].member_id,
        members=members,
    )
    assert sides.job.request(request) == Answer(0)


def _with_generation(cgmd: bytes, generation: int) -> bytes:
    """confluent-kafka's group metadata with another generation (librdkafka's layout)."""
    magic = len(b"CGMDv2:")
    return cgmd[:magic] + struct.pack("=i", generation) + cgmd[magic + 4 :]


def _offsets_only(records: list[RecordSummary]) -> list[RecordSummary]:
    return [r for r in records if r[0] == "offset"]


@pytest.fixture
def sides(
    running_job: RunningJob, kafka_bootstrap: str, topic_factory: TopicFactory
) -> Iterator[Sides]:
    config = running_job.config
    kafka = KafkaCoordinator(kafka_bootstrap)
    job = JobCoordinator(config)
    committer = TransactionalCommitter(config, client_id="txn-differential")
    client = OffsetCommitClient(config, client_id="txn-differential-plain")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    try:
        yield Sides(
            kafka_bootstrap,
            config,
            topic_factory(partitions=3),
            kafka,
            job,
            committer,
            client,
            admin,
            config.ingest_topic_partitions,
        )
    finally:
        committer.close()
        client.close()
        kafka.close()
        job.close()


def _answered(pending: PendingTxnCommit) -> CommitResult:
    result = pending.result(timeout_s=_SETTLE_S)
    assert result.group_id == pending.group_id
    return result


def _never_answered(pending: PendingTxnCommit) -> None:
    """The aborted request has no answer (the job answered a later request of its shard): no
    answer in time, or its message purged by the abort."""
    with pytest.raises(CommitFailedError) as failed:
        pending.result(timeout_s=0.5)
    assert failed.value.error_code in (
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ), failed.value


def _commit(topic: str, offsets: dict[int, int]) -> Commit:
    return Commit(tuple(CommitPartition(topic, p, o) for p, o in offsets.items()))


def test_transactional_commits_as_kafkas_coordinator(sides: Sides) -> None:
    topic, shards = sides.topic, sides.shards
    started = time.monotonic()
    kafka_since = end_offsets(sides.bootstrap, KAFKA_OFFSETS_TOPIC)
    job_since = end_offsets(sides.bootstrap, sides.config.offsets_topic)
    expected: dict[str, Fetched] = {}

    # Left open until Kafka aborts it for its timeout, on a shard of its own, the other rounds
    # on the first (first: Kafka's check of timed-out transactions runs every 10 s).
    assert shards > 1
    timed_out = _group_on(shards - 1, "timed-out", shards)
    short_id = f"txn-{uuid.uuid4().hex[:10]}"
    short = _producer(sides.bootstrap, short_id, _SHORT_TXN_TIMEOUT_MS)
    short.begin_transaction()
    timed_out_pending = sides.send(short, short_id, timed_out, {0: 11})
    held_since = time.monotonic()
    # Queued behind the open transaction at the job; Kafka answers it at once.
    stalled: Future[CommitResult] = sides.client.commit_async(
        timed_out, {(topic, 1): 2}, timeout_s=_SETTLE_S
    )
    released: list[float] = []
    stalled.add_done_callback(lambda _: released.append(time.monotonic()))
    assert sides.kafka.apply(timed_out, _commit(topic, {1: 2})) == Answer(0, ((topic, 1, 0),))
    expected[timed_out] = {(topic, 1): (2, -1, "")}

    # Commit: over a plain commit.
    committed = _group_on(0, "commit", shards)
    sides.both(committed, _commit(topic, {0: 5}))
    _answered(sides.round(committed, {0: 10, 1: 20}, "commit"))
    expected[committed] = {(topic, 0): (10, -1, ""), (topic, 1): (20, -1, "")}

    # Abort: the plain commit stays.
    aborted = _group_on(0, "abort", shards)
    sides.both(aborted, _commit(topic, {0: 5}))
    aborted_pending = sides.round(aborted, {0: 10, 2: 7}, "abort")
    sides.both(aborted, _commit(topic, {2: 1}))  # answered: the abort is behind it
    _never_answered(aborted_pending)
    expected[aborted] = {(topic, 0): (5, -1, ""), (topic, 2): (1, -1, "")}

    # Open, read with RequireStable, a plain commit of the same partition meanwhile (newer in
    # the log than the pending offset: it stays), then committed.
    held = _group_on(0, "open", shards)
    open_id = f"txn-{uuid.uuid4().hex[:10]}"
    producer = _producer(sides.bootstrap, open_id)
    producer.begin_transaction()
    open_pending = sides.send(producer, open_id, held, {0: 3, 1: 4})
    kafka_88, job_88 = sides.unstable(held, [0, 1, 2])
    assert kafka_88 == {0, 1}, kafka_88
    assert job_88 == kafka_88
    plain_while_open = sides.client.commit_async(held, {(topic, 0): 9}, timeout_s=_SETTLE_S)
    assert sides.kafka.apply(held, _commit(topic, {0: 9})) == Answer(0, ((topic, 0, 0),))
    time.sleep(1.0)
    assert not plain_while_open.done(), "the job answered a commit behind an open transaction"
    producer.commit_transaction(30)
    _answered(open_pending)
    plain_while_open.result(_SETTLE_S)
    sides.settled(held, [0, 1, 2])
    expected[held] = {(topic, 0): (9, -1, ""), (topic, 1): (4, -1, "")}

    # Fenced: a second producer of the same transactional id aborts the first's transaction.
    fenced = _group_on(0, "fenced", shards)
    fenced_id = f"txn-{uuid.uuid4().hex[:10]}"
    first = _producer(sides.bootstrap, fenced_id)
    first.begin_transaction()
    fenced_pending = sides.send(first, fenced_id, fenced, {0: 8})
    second = _producer(sides.bootstrap, fenced_id)
    with pytest.raises(KafkaException):
        first.commit_transaction(30)
    fenced_pending.forget()
    second.begin_transaction()
    after_fencing = sides.send(second, fenced_id, fenced, {1: 6})
    second.commit_transaction(30)
    _answered(after_fencing)
    expected[fenced] = {(topic, 1): (6, -1, "")}

    # Mixed: OffsetDelete and DeleteGroups between transactions.
    mixed = _group_on(0, "mixed", shards)
    _answered(sides.round(mixed, {0: 1, 1: 2}, "commit"))
    sides.settled(mixed, [0, 1])
    sides.both(mixed, DeleteOffsets(((topic, 1),)))
    sides.round(mixed, {0: 100}, "abort")
    sides.both(mixed, DeleteGroup())
    _answered(sides.round(mixed, {2: 5}, "commit"))
    expected[mixed] = {(topic, 2): (5, -1, "")}

    # A group only an aborted transaction named: Kafka made it at the TxnOffsetCommit and
    # deletes it; the job never saw the request and answers as for any unknown group.
    phantom = _group_on(0, "phantom", shards)
    phantom_id = f"txn-{uuid.uuid4().hex[:10]}"
    producer = _producer(sides.bootstrap, phantom_id)
    producer.begin_transaction()
    sides.send(producer, phantom_id, phantom, {0: 1}).forget()
    assert sides.kafka.apply(phantom, DeleteGroup()) == Answer(0)
    producer.abort_transaction(30)
    deleted = sides.job.run([Sequence(phantom, (DeleteGroup(),))])
    assert deleted == [[Answer(ErrorCode.GROUP_ID_NOT_FOUND)]], deleted
    assert sides.kafka.fetch(phantom)[1] == sides.job.fetch([phantom])[phantom] == {}

    # kafka-python's transactional producer, as the committer's docstring shows.
    plain = _group_on(0, "kafka-python", shards)
    plain_id = f"txn-{uuid.uuid4().hex[:10]}"
    kp = KafkaProducer(bootstrap_servers=sides.bootstrap, transactional_id=plain_id)
    try:
        kp.init_transactions()
        kp.begin_transaction()
        pending = sides.committer.send_offsets_to_transaction(
            kp, plain_id, {(topic, 1): 12}, GroupMetadata(plain)
        )
        kp.send_offsets_to_transaction({KafkaPartition(topic, 1): KafkaOffset(12, "", -1)}, plain)
        kp.commit_transaction()
    finally:
        kp.close()
    _answered(pending)
    expected[plain] = {(topic, 1): (12, -1, "")}

    # A group with a member (KIP-447), its generation told to the job: the member's metadata
    # is taken by both; a stale generation Kafka refuses at send_offsets_to_transaction (the
    # application aborts, so the job never sees it), the job only after a commit.
    with_member = _group_on(0, "member", shards)
    consumer = _joined(sides, with_member)
    try:
        cgmd = consumer.consumer_group_metadata()
        joined = group_metadata(cgmd)
        assert joined.generation_id > 0 and joined.member_id, joined
        _tell_the_job(sides, with_member, joined.generation_id)
        _answered(sides.round(with_member, {0: 4}, "commit", cgmd))
        stale = _with_generation(cgmd, joined.generation_id - 1)
        stale_id = f"txn-{uuid.uuid4().hex[:10]}"
        producer = _producer(sides.bootstrap, stale_id)
        producer.begin_transaction()
        refused_by_kafka = sides.committer.send_offsets_to_transaction(
            producer, stale_id, {(topic, 0): 40}, stale
        )
        with pytest.raises(KafkaException) as refusal:
            producer.send_offsets_to_transaction([ConfluentPartition(topic, 0, 40)], stale, 30)
        assert refusal.value.args[0].code() == KafkaError.ILLEGAL_GENERATION
        producer.abort_transaction(30)
        producer.begin_transaction()
        refused_by_job = sides.committer.send_offsets_to_transaction(
            producer, stale_id, {(topic, 0): 41}, stale
        )
        producer.commit_transaction(30)
        with pytest.raises(CommitFailedError) as failed:
            refused_by_job.result(_SETTLE_S)
        assert failed.value.error_code == ErrorCode.ILLEGAL_GENERATION
        _never_answered(refused_by_kafka)
    finally:
        consumer.close()
    expected[with_member] = {(topic, 0): (4, -1, "")}

    # The timed-out round: Kafka aborts it, the stalled commit is then answered.
    stalled.result(_SETTLE_S)
    print(
        f"\ntransactional: a transaction left open ({_SHORT_TXN_TIMEOUT_MS} ms timeout) held "
        f"a commit behind it on its ingest partition {released[0] - held_since:.1f} s"
    )
    _never_answered(timed_out_pending)

    groups = list(expected)
    for group in groups:
        sides.settled(group, [0, 1, 2])
    job_fetched = sides.job.fetch(groups)
    for group in groups:
        kafka_fetched = sides.kafka.fetch(group)[1]
        assert kafka_fetched == expected[group], f"{group}: Kafka {kafka_fetched}"
        assert job_fetched[group] == kafka_fetched, f"{group}: job {job_fetched[group]}"
    kafka_records = group_records(
        sides.bootstrap, KAFKA_OFFSETS_TOPIC, groups, kafka_since, isolation_level="read_committed"
    )
    job_offsets_topic = sides.config.offsets_topic
    job_records = group_records(
        sides.bootstrap, job_offsets_topic, groups, job_since, isolation_level="read_committed"
    )
    for group in groups:
        kafka, job = kafka_records[group], job_records[group]
        if group == with_member:  # its members' GroupMetadata records are not the job's
            kafka, job = _offsets_only(kafka), _offsets_only(job)
        assert same_records(kafka, job), f"{group}: Kafka {kafka}, job {job}"
    print(f"transactional: {len(groups)} groups compared in {time.monotonic() - started:.1f} s")
