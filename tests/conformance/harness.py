"""The differential harness: the same sequences to Kafka's coordinator and to the job, compared.

For each sequence: every request's answer (error codes per partition, or the request's), then
the group's final OffsetFetch, then the records each side wrote for the group (decoded by
``state/``, timestamps left out; see :func:`same_records`). A divergence is shrunk to the
shortest sequence that still shows it, by dropping operations and partitions and replaying the
candidates on fresh groups.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from tests.conformance.generators import SequenceGenerator
from tests.conformance.job_coordinator import JobCoordinator
from tests.conformance.kafka_coordinator import KafkaCoordinator
from tests.conformance.operations import (
    Commit,
    DeleteGroup,
    DeleteOffsets,
    Operation,
    Outcome,
    RecordSummary,
    Sequence,
)
from tests.conformance.records import end_offsets, group_records

#: Kafka's own offsets topic.
KAFKA_OFFSETS_TOPIC = "__consumer_offsets"
_MAX_SHRINK_ROUNDS = 40


@dataclass(frozen=True)
class Divergence:
    """Where one sequence's outcomes differ: ``aspect`` is "answer N" (the N-th request),
    "fetch" or "records"."""

    sequence: Sequence
    aspect: str
    kafka: object
    job: object

    @property
    def kind(self) -> str:
        """The aspect without the request's position (what shrinking preserves)."""
        return self.aspect.split(" ")[0]

    def describe(self) -> str:
        lines = [f"group {self.sequence.group_id[:80]!r} ({self.sequence.label}): {self.aspect}"]
        lines += [f"  {i}: {_short(op)}" for i, op in enumerate(self.sequence.operations)]
        lines += [f"  kafka: {_short(self.kafka)}", f"  job:   {_short(self.job)}"]
        return "\n".join(lines)


def _short(value: object, limit: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text)} chars)"


@dataclass
class Tally:
    """What was compared, for the report."""

    sequences: int = 0
    requests: Counter[str] = field(default_factory=Counter)
    codes: Counter[int] = field(default_factory=Counter)
    partitions: int = 0
    records: int = 0

    def add(self, sequence: Sequence, kafka: Outcome) -> None:
        self.sequences += 1
        self.requests.update(op.api for op in sequence.operations)
        for answer in kafka.answers:
            if answer.partitions:
                self.partitions += len(answer.partitions)
                self.codes.update(code for _, _, code in answer.partitions)
            else:
                self.codes[answer.error_code] += 1
        self.records += len(kafka.records)


@dataclass(frozen=True)
class KnownDifference:
    """A documented divergence (README, "Differences from Kafka"): counted, not failed."""

    name: str
    matches: Callable[[Divergence], bool]


class Harness:
    """Runs sequences on both sides and compares them."""

    def __init__(
        self,
        kafka: KafkaCoordinator,
        job: JobCoordinator,
        kafka_bootstrap: str,
        job_offsets_topic: str,
        generator: SequenceGenerator,
        known: Iterable[KnownDifference] = (),
    ) -> None:
        self._kafka = kafka
        self._job = job
        self._bootstrap = kafka_bootstrap
        self._job_offsets_topic = job_offsets_topic
        self._generator = generator
        self._known = list(known)
        self.tally = Tally()
        self.known_counts: Counter[str] = Counter()

    def outcomes(self, sequences: list[Sequence]) -> tuple[list[Outcome], list[Outcome]]:
        """Both sides' outcomes of ``sequences`` (each on its own group)."""
        if any(s.group_id == "" for s in sequences):
            # The one group id that cannot be fresh: start it empty on both sides.
            reset = Sequence("", (DeleteGroup(),), "reset")
            self._kafka.apply("", DeleteGroup())
            self._job.run([reset])
        kafka_since = end_offsets(self._bootstrap, KAFKA_OFFSETS_TOPIC)
        job_since = end_offsets(self._bootstrap, self._job_offsets_topic)
        kafka = [Outcome() for _ in sequences]
        for sequence, outcome in zip(sequences, kafka, strict=True):
            outcome.answers = [
                self._kafka.apply(sequence.group_id, op) for op in sequence.operations
            ]
        job = [Outcome(answers=answers) for answers in self._job.run(sequences)]
        groups = [s.group_id for s in sequences]
        fetched = self._job.fetch(groups)
        kafka_records = group_records(self._bootstrap, KAFKA_OFFSETS_TOPIC, groups, kafka_since)
        # As the job's own loader reads its log: committed batches only.
        job_records = group_records(
            self._bootstrap,
            self._job_offsets_topic,
            groups,
            job_since,
            isolation_level="read_committed",
        )
        for sequence, k, j in zip(sequences, kafka, job, strict=True):
            k.fetched = self._kafka.fetch(sequence.group_id)[1]
            j.fetched = fetched[sequence.group_id]
            k.records = kafka_records[sequence.group_id]
            j.records = job_records[sequence.group_id]
        return kafka, job

    @staticmethod
    def first_divergence(sequence: Sequence, kafka: Outcome, job: Outcome) -> Divergence | None:
        for i, (k, j) in enumerate(zip(kafka.answers, job.answers, strict=True)):
            if k != j:
                return Divergence(sequence, f"answer {i}", k, j)
        if kafka.fetched != job.fetched:
            return Divergence(sequence, "fetch", kafka.fetched, job.fetched)
        if not same_records(kafka.records, job.records):
            return Divergence(sequence, "records", kafka.records, job.records)
        return None

    def run(self, sequences: list[Sequence]) -> list[Divergence]:
        """Compare ``sequences``; returns the unexplained divergences, each shrunk."""
        kafka, job = self.outcomes(sequences)
        found: list[Divergence] = []
        for sequence, k, j in zip(sequences, kafka, job, strict=True):
            self.tally.add(sequence, k)
            divergence = self.first_divergence(sequence, k, j)
            if divergence is None:
                continue
            known = next((d.name for d in self._known if d.matches(divergence)), None)
            if known is not None:
                self.known_counts[known] += 1
            else:
                found.append(divergence)
        return [self.shrink(d) for d in found]

    def shrink(self, divergence: Divergence) -> Divergence:
        """The shortest variant of the divergence's sequence that diverges the same way."""
        for _ in range(_MAX_SHRINK_ROUNDS):
            candidates = [self._generator.renamed(s) for s in _smaller(divergence.sequence)]
            if not candidates:
                return divergence
            # The empty group id cannot be renamed: its candidates go one at a time.
            batches = (
                [[c] for c in candidates] if divergence.sequence.group_id == "" else [candidates]
            )
            smaller = None
            for batch in batches:
                kafka, job = self.outcomes(batch)
                for candidate, k, j in zip(batch, kafka, job, strict=True):
                    d = self.first_divergence(candidate, k, j)
                    if d is not None and d.kind == divergence.kind:
                        smaller = d
                        break
                if smaller is not None:
                    break
            if smaller is None:
                return divergence
            divergence = smaller
        return divergence


def _key(record: RecordSummary) -> tuple[object, ...]:
    return record[:3] if record[0] == "offset" else record[:1]


def same_records(kafka: list[RecordSummary], job: list[RecordSummary]) -> bool:
    """Whether the job wrote what Kafka wrote, key by key: the job's records of a key are a
    subsequence of Kafka's and end with the same record. (Within a micro-batch the job writes
    only the last record of a key, which is what compaction keeps of Kafka's.)"""
    by_key: dict[tuple[object, ...], tuple[list[RecordSummary], list[RecordSummary]]] = {}
    for side, records in enumerate((kafka, job)):
        for record in records:
            by_key.setdefault(_key(record), ([], []))[side].append(record)
    for kafka_records, job_records in by_key.values():
        if not kafka_records or not job_records or kafka_records[-1] != job_records[-1]:
            return False
        remaining = iter(kafka_records)
        if not all(any(r == k for k in remaining) for r in job_records):
            return False
    return True


def _without(operation: Operation, index: int) -> Operation:
    """``operation`` without its ``index``-th partition."""
    assert isinstance(operation, Commit | DeleteOffsets)
    partitions = operation.partitions
    return replace(operation, partitions=(*partitions[:index], *partitions[index + 1 :]))


def _smaller(sequence: Sequence) -> list[Sequence]:
    """Every sequence one step simpler: an operation dropped, or one partition of it."""
    ops = sequence.operations
    out = []
    if len(ops) > 1:
        out += [replace(sequence, operations=(*ops[:i], *ops[i + 1 :])) for i in range(len(ops))]
    for i, op in enumerate(ops):
        if isinstance(op, Commit | DeleteOffsets) and len(op.partitions) > 1:
            for j in range(len(op.partitions)):
                simpler = (*ops[:i], _without(op, j), *ops[i + 1 :])
                out.append(replace(sequence, operations=simpler))
    return out
