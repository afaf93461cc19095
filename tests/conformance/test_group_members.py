"""Commits of a classic group with members: the job, told the group's generation and members,
answers what Kafka's coordinator answers.

Two kafka-python consumers join a classic group on the test broker; the job gets the same
generation and members as a GroupMetadata request (what it learns instead of taking part in the
rebalance). Then the same commits, offset deletes and group deletes go to both sides, with the
right and wrong generations and member ids, and their error codes must agree — while the group
is stable, and again once the consumers have left and it is empty.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient

from state.coordinator.model import MemberMetadata
from state.coordinator.requests import GroupMetadataRequest
from tests.conformance.harness import KAFKA_OFFSETS_TOPIC
from tests.conformance.job_coordinator import JobCoordinator
from tests.conformance.kafka_coordinator import KafkaCoordinator
from tests.conformance.operations import (
    Answer,
    Commit,
    CommitPartition,
    DeleteGroup,
    DeleteOffsets,
    Operation,
    Sequence,
)
from tests.conformance.records import end_offsets, group_records
from tests.fixtures.job import RunningJob
from tests.fixtures.kafka import TopicFactory


@pytest.fixture
def joined(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> Iterator[tuple[str, str, list[KafkaConsumer]]]:
    """(group, topic, consumers): two consumers in a stable classic group on ``topic``."""
    topic = topic_factory(partitions=2)
    group = f"members-{uuid.uuid4().hex[:8]}"
    consumers = [
        KafkaConsumer(
            topic,
            bootstrap_servers=kafka_bootstrap,
            group_id=group,
            client_id=f"member-{i}",
            enable_auto_commit=False,
            heartbeat_interval_ms=500,
        )
        for i in range(2)
    ]
    try:
        deadline = time.monotonic() + 60
        while True:
            for consumer in consumers:
                consumer.poll(timeout_ms=100)
            generations = [c._coordinator.generation_if_stable() for c in consumers]
            one_generation = all(generations) and len({g.generation_id for g in generations}) == 1
            if one_generation and all(c.assignment() for c in consumers):
                break
            assert time.monotonic() < deadline, "the consumers did not form a stable group"
        yield group, topic, consumers
    finally:
        for consumer in consumers:
            consumer.close()


def _kafka_generation(kafka_bootstrap: str, group: str) -> int:
    """The group's generation in Kafka's last GroupMetadata record for it."""
    since = {p: 0 for p in end_offsets(kafka_bootstrap, KAFKA_OFFSETS_TOPIC)}
    records = group_records(kafka_bootstrap, KAFKA_OFFSETS_TOPIC, [group], since)[group]
    values = [r[1] for r in records if r[0] == "group" and r[1] is not None]
    assert values, f"no GroupMetadata record of {group}"
    generation = values[-1][1]
    assert isinstance(generation, int)
    return generation


def _tell_the_job(job: JobCoordinator, kafka_bootstrap: str, group: str, topic: str) -> int:
    """Send the job the group as Kafka has it now (members, protocol, generation); returns the
    generation."""
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        (described,) = admin.describe_consumer_groups([group])
    finally:
        admin.close()
    members = tuple(
        MemberMetadata(m.member_id, client_id=m.client_id, subscribed_topics=(topic,))
        for m in described.members
    )
    generation = _kafka_generation(kafka_bootstrap, group)
    request = GroupMetadataRequest(
        uuid.uuid4().hex,
        group,
        generation,
        protocol_type=described.protocol_type or "consumer",
        protocol=described.protocol or None,
        leader=members[0].member_id if members else None,
        members=members,
    )
    assert job.request(request) == Answer(0)
    return generation


def _compare(
    kafka: KafkaCoordinator, job: JobCoordinator, group: str, operations: list[Operation]
) -> list[tuple[Operation, Answer, Answer]]:
    """Each operation to both sides (in order); the ones whose answers differ."""
    kafka_answers = [kafka.apply(group, op) for op in operations]
    (job_answers,) = job.run([Sequence(group, tuple(operations), "members")])
    return [
        (op, k, j)
        for op, k, j in zip(operations, kafka_answers, job_answers, strict=True)
        if k != j
    ]


def test_commits_of_a_group_with_members_are_answered_as_kafka_does(
    running_job: RunningJob,
    kafka_bootstrap: str,
    joined: tuple[str, str, list[KafkaConsumer]],
    topic_factory: TopicFactory,
) -> None:
    group, topic, consumers = joined
    other_topic = topic_factory(partitions=1)
    stable = consumers[0]._coordinator.generation_if_stable()
    member = stable.member_id
    kafka = KafkaCoordinator(kafka_bootstrap)
    job = JobCoordinator(running_job.config)
    try:
        generation = _tell_the_job(job, kafka_bootstrap, group, topic)
        assert generation == stable.generation_id

        def commit(gen: int, member_id: str, instance: str | None = None, t: str = topic) -> Commit:
            return Commit((CommitPartition(t, 0, 5),), -1, gen, member_id, instance)

        stable_ops: list[Operation] = [
            commit(generation, member),  # the member, its generation
            commit(generation + 1, member),  # a generation the group does not have
            commit(generation - 1, member),
            commit(generation, "not-a-member"),
            commit(generation, ""),
            commit(-1, ""),  # an admin commit to a group with members
            commit(-1, member),
            commit(generation, member, "no-such-instance"),
            commit(generation, member, t=other_topic),
            DeleteOffsets(((topic, 0),)),  # members subscribe to it
            DeleteOffsets(((other_topic, 0),)),  # nobody subscribes to it
            DeleteGroup(),  # not empty
        ]
        differing = _compare(kafka, job, group, stable_ops)
        assert not differing, "\n".join(f"{op}: kafka {k}, job {j}" for op, k, j in differing)

        for consumer in consumers:
            consumer.close()
        # Empty now, a generation or two on: the job is told so.
        deadline = time.monotonic() + 30
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        try:
            while admin.describe_consumer_groups([group])[0].state != "Empty":
                assert time.monotonic() < deadline, "the group did not become empty"
                time.sleep(0.2)
        finally:
            admin.close()
        _tell_the_job(job, kafka_bootstrap, group, topic)
        empty_ops: list[Operation] = [
            commit(generation, member),  # the old generation's member
            commit(-1, ""),
            commit(-1, member),
            DeleteOffsets(((topic, 0),)),
            DeleteGroup(),
        ]
        differing = _compare(kafka, job, group, empty_ops)
        assert not differing, "\n".join(f"{op}: kafka {k}, job {j}" for op, k, j in differing)
    finally:
        kafka.close()
        job.close()
