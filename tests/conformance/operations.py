"""What the differential harness sends to both coordinators, and their answers in one shape.

A *sequence* is a list of operations on one group. Groups of different sequences never meet, so
many sequences go to both sides at once and each is compared on its own: its answers, request by
request, the group's final OffsetFetch, and the records written for the group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Answers compared as multisets: (topic, partition, error code). Kafka groups a response by
#: topic, the job lists partitions in request order; neither order means anything to a client.
PartitionCodes = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class CommitPartition:
    """One partition of an OffsetCommit."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    #: None: the request's nullable metadata left null.
    metadata: str | None = ""


@dataclass(frozen=True)
class Commit:
    """OffsetCommit, by default of a standalone group (generation -1, no member id).
    ``retention_ms`` other than -1 goes to Kafka as OffsetCommit v4, the last version that
    carries a retention."""

    partitions: tuple[CommitPartition, ...]
    retention_ms: int = -1
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    api = "OffsetCommit"


@dataclass(frozen=True)
class DeleteOffsets:
    """OffsetDelete (KIP-496)."""

    partitions: tuple[tuple[str, int], ...]

    api = "OffsetDelete"


@dataclass(frozen=True)
class DeleteGroup:
    """DeleteGroups of the one group."""

    api = "DeleteGroups"


Operation = Commit | DeleteOffsets | DeleteGroup


@dataclass(frozen=True)
class Sequence:
    """Operations on one group, in order. ``group_id`` may be an edge case itself (empty, long,
    astral); ``label`` says what the generator aimed at."""

    group_id: str
    operations: tuple[Operation, ...]
    label: str = ""


@dataclass(frozen=True)
class Answer:
    """One request's answer: a request-level code (0 when the answer is per partition) and the
    partitions' codes, sorted."""

    error_code: int
    partitions: PartitionCodes = ()

    @staticmethod
    def of(error_code: int, partitions: list[tuple[str, int, int]] | None = None) -> Answer:
        """An answer with its partitions sorted; a request-level error carries none (Kafka's
        OffsetDelete answers so, and the job answers every request-level error so)."""
        if error_code != 0:
            return Answer(error_code)
        return Answer(0, tuple(sorted(partitions or [])))


#: A group's OffsetFetch: (topic, partition) → (offset, leader epoch, metadata).
Fetched = dict[tuple[str, int], tuple[int, int, str]]

#: A record written for a group, timestamps left out: ("offset", topic, partition, value) with
#: value = (offset, leader epoch, metadata, expire - commit timestamp or None), None for a
#: tombstone; ("group", value) with value = (protocol type, generation, protocol, leader,
#: member ids) or None.
RecordSummary = tuple[object, ...]


@dataclass
class Outcome:
    """Everything one side did for one sequence."""

    answers: list[Answer] = field(default_factory=list)
    fetched: Fetched = field(default_factory=dict)
    records: list[RecordSummary] = field(default_factory=list)
