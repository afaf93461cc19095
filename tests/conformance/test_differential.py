"""The job answers what Kafka's group coordinator answers: a differential test on a real broker.

Random sequences (``tests.conformance.generators``) go to Kafka's own coordinator on the test
broker and to a running job; answers, final OffsetFetch and written records must agree, apart
from the documented differences (README, "Differences from Kafka"). A failure prints the seed and
each divergence shrunk to its shortest sequence.

``CONFORMANCE_SEED`` replays a run; ``CONFORMANCE_SEQUENCES`` (default 300, a few minutes on two
cores with everything else) sets its length, e.g. ``CONFORMANCE_SEQUENCES=5000 pytest -s
tests/conformance`` for the longer mode.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from state.coordinator.errors import ErrorCode
from tests.conformance.generators import INT64_MAX, SequenceGenerator, Topics, run_tag
from tests.conformance.harness import Divergence, Harness, KnownDifference
from tests.conformance.job_coordinator import JobCoordinator
from tests.conformance.kafka_coordinator import KafkaCoordinator
from tests.conformance.operations import Answer, Commit, DeleteOffsets
from tests.fixtures.job import RunningJob

#: Requests per round: the job answers a round in a few micro-batches.
_ROUND = 100


def _unknown_on_the_data_cluster(d: Divergence) -> bool:
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for a partition its cluster does not have; the
    job has no metadata of the data cluster and accepts it."""
    if d.kind != "answer" or not isinstance(d.kafka, Answer) or not isinstance(d.job, Answer):
        return False
    if d.kafka.error_code or d.job.error_code:
        return False
    pairs = list(zip(d.kafka.partitions, d.job.partitions, strict=False))
    return len(d.kafka.partitions) == len(d.job.partitions) and all(
        k == j or (k[:2] == j[:2] and k[2] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and j[2] != k[2])
        for k, j in pairs
    )


def _retention_past_int64(d: Divergence) -> bool:
    """Kafka's expire timestamp wraps around past int64 (the offset then expires at the next
    check); the job's saturates (it never expires)."""
    return d.kind == "records" and any(
        isinstance(op, Commit) and op.retention_ms > INT64_MAX // 2 for op in d.sequence.operations
    )


def _group_kept_in_memory_by_kafka(d: Divergence) -> bool:
    """Kafka's coordinator creates a group when a commit names it, even if no offset is written,
    and keeps it, empty, after its offsets are deleted, until its next retention check; such a
    group has no record. The job's groups are what its records say: it answers
    GROUP_ID_NOT_FOUND."""
    if d.kind != "answer" or not isinstance(d.kafka, Answer) or not isinstance(d.job, Answer):
        return False
    index = int(d.aspect.split(" ")[1])
    earlier = d.sequence.operations[:index]
    return (
        d.job.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        and d.kafka.error_code == ErrorCode.NONE
        and any(isinstance(op, Commit | DeleteOffsets) for op in earlier)
    )


#: Documented in the README's "Differences from Kafka", with the reason.
KNOWN_DIFFERENCES = [
    KnownDifference("partition unknown to the data cluster", _unknown_on_the_data_cluster),
    KnownDifference("retention past the int64 range", _retention_past_int64),
    KnownDifference("group without records kept by Kafka", _group_kept_in_memory_by_kafka),
]


@pytest.fixture(scope="module")
def broker_topics(kafka_bootstrap: str) -> Iterator[Topics]:
    """Topics the generated commits name, created on the broker (Kafka answers
    UNKNOWN_TOPIC_OR_PARTITION for a topic its cluster does not have)."""
    tag = run_tag()
    existing = {
        f"conformance-{tag}": 3,
        f"conformance.{tag}_dots-and_underscores": 1,
        # The longest legal name, 249 characters.
        f"conformance-{tag}-".ljust(249, "x"): 2,
    }
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(t, n, 1) for t, n in existing.items()])
        deadline = time.monotonic() + 30
        while True:
            described = admin.describe_topics(list(existing))
            if all(
                len(d.get("partitions", [])) == existing[d["topic"]]
                and min(p["leader"] for p in d["partitions"]) >= 0
                for d in described
            ):
                break
            assert time.monotonic() < deadline, f"topics without leaders: {described}"
            time.sleep(0.2)
        yield Topics(existing)
        admin.delete_topics(list(existing))
    finally:
        admin.close()


def _seed() -> int:
    configured = os.environ.get("CONFORMANCE_SEED")
    return int(configured) if configured else random.randrange(2**32)


def test_job_answers_what_kafkas_coordinator_answers(
    running_job: RunningJob, kafka_bootstrap: str, broker_topics: Topics
) -> None:
    seed = _seed()
    count = int(os.environ.get("CONFORMANCE_SEQUENCES", "300"))
    print(f"\nconformance: seed {seed} (CONFORMANCE_SEED={seed} replays it), {count} sequences")
    generator = SequenceGenerator(seed, broker_topics, run_tag())
    kafka = KafkaCoordinator(kafka_bootstrap)
    job = JobCoordinator(running_job.config)
    try:
        harness = Harness(
            kafka,
            job,
            kafka_bootstrap,
            running_job.config.offsets_topic,
            generator,
            KNOWN_DIFFERENCES,
        )
        divergences = []
        sequences = generator.sequences(count)
        for start in range(0, count, _ROUND):
            divergences += harness.run(sequences[start : start + _ROUND])
        tally = harness.tally
        print(
            f"conformance: {tally.sequences} sequences, requests {dict(tally.requests)}, "
            f"{tally.partitions} partition answers, codes {dict(sorted(tally.codes.items()))}, "
            f"{tally.records} Kafka records compared; known differences "
            f"{dict(harness.known_counts)}; {len(divergences)} divergences"
        )
    finally:
        kafka.close()
        job.close()
    assert not divergences, f"seed {seed}:\n\n" + "\n\n".join(d.describe() for d in divergences)
