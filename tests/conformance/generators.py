"""Random request sequences that reach the edges, from a seed.

Every string field is drawn below, at and above its limit, in ASCII, multi-byte and astral
characters; offsets and leader epochs at the int64/int32 edges; partitions inside, past and
below a topic's range; commits that rewind; deletes of present and absent partitions and groups;
a partition repeated in one request; empty topic lists. Topics that exist on the broker are
drawn far more often than names that cannot exist, so most requests reach the coordinator.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from tests.conformance.operations import (
    Commit,
    CommitPartition,
    DeleteGroup,
    DeleteOffsets,
    Operation,
    Sequence,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Kafka's ``offset.metadata.max.bytes`` default, the job's ``metadata_max_bytes``.
METADATA_MAX = 4096

#: Names no topic can have (Kafka's ``Topic.validate``): empty, dots, illegal characters, too long.
INVALID_TOPICS = ("", ".", "..", "a b", "t/1", "tópico", "t-😀", "x" * 250)

#: Metadata at the limit in each character width: Kafka counts UTF-16 code units.
METADATA = (
    "",
    None,
    "m",
    "x" * METADATA_MAX,
    "x" * (METADATA_MAX + 1),
    "é" * (METADATA_MAX // 2),
    "é" * METADATA_MAX,
    "é" * (METADATA_MAX + 1),
    "€" * METADATA_MAX,
    "😀" * (METADATA_MAX // 2),
    "😀" * (METADATA_MAX // 2 + 1),
    "a\x00b",
    'line\nbreak "quoted" \\',
)

OFFSETS = (0, 1, 42, 1_000_000, INT64_MAX, -1, -2, INT64_MIN)
LEADER_EPOCHS = (-1, 0, 7, INT32_MAX, -2, INT32_MIN)
#: Retentions of OffsetCommit v2-v4 (-1: the broker's).
RETENTIONS = (1_000, 86_400_000, 0, -2, INT64_MAX)


def _pad(prefix: str, unit: str, total_utf8: int) -> str:
    """``prefix`` followed by ``unit`` characters up to ``total_utf8`` bytes of UTF-8."""
    room = total_utf8 - len(prefix.encode("utf-8"))
    return prefix + unit * (room // len(unit.encode("utf-8")))


#: Group id kinds: a name from a unique tag. The empty id is the one kind that cannot be unique;
#: the generator draws it at most once per run.
GROUP_KINDS: Mapping[str, Callable[[str], str]] = {
    "ascii": lambda tag: f"g-{tag}",
    "dots-and-dashes": lambda tag: f"g.{tag}_x-y",
    "space": lambda tag: f"g {tag}",
    "multi-byte": lambda tag: f"grüppe-{tag}-é€",
    "astral": lambda tag: f"g-{tag}-😀𝄞",
    "nul": lambda tag: f"g-{tag}\x00nul",
    "249 chars": lambda tag: _pad(f"g-{tag}-", "x", 249),
    "256 chars": lambda tag: _pad(f"g-{tag}-", "x", 256),
    "1000 multi-byte chars": lambda tag: _pad(f"g-{tag}-", "é", 2000),
    "32,000 bytes": lambda tag: _pad(f"g-{tag}-", "x", 32_000),
    "empty": lambda tag: "",
}


@dataclass(frozen=True)
class Topics:
    """Topics that exist on the broker (name → partition count)."""

    existing: Mapping[str, int]


class SequenceGenerator:
    """Sequences from ``seed``; ``tag`` keeps this run's group ids apart from other runs'."""

    def __init__(self, seed: int, topics: Topics, run_tag: str) -> None:
        self._random = random.Random(seed)
        self._topics = topics
        self._run_tag = run_tag
        self._count = 0
        self._empty_used = False

    def fresh_group(self, kind: str) -> str:
        """A group id of ``kind`` no other sequence of any run has."""
        self._count += 1
        return GROUP_KINDS[kind](f"{self._run_tag}-{self._count}")

    def renamed(self, sequence: Sequence) -> Sequence:
        """``sequence`` on a fresh group of the same kind (for shrinking)."""
        return replace(sequence, group_id=self.fresh_group(sequence.label))

    def sequences(self, n: int) -> list[Sequence]:
        return [self.sequence() for _ in range(n)]

    def sequence(self) -> Sequence:
        r = self._random
        kinds = [k for k in GROUP_KINDS if k != "empty" or not self._empty_used]
        # Mostly plain ids: the edges of the other fields are reached through them.
        kind = "ascii" if r.random() < 0.6 else r.choice(kinds)
        self._empty_used |= kind == "empty"
        touched: list[tuple[str, int]] = []
        operations = tuple(self._operation(touched) for _ in range(r.randint(1, 6)))
        return Sequence(self.fresh_group(kind), operations, kind)

    def _topic(self) -> str:
        r = self._random
        if r.random() < 0.08:
            return r.choice(INVALID_TOPICS)
        return r.choice(sorted(self._topics.existing))

    def _partition(self, topic: str) -> int:
        r = self._random
        count = self._topics.existing.get(topic, 1)
        roll = r.random()
        if roll < 0.94:
            return r.randrange(count)
        if roll < 0.97:
            return r.choice((-1, INT32_MIN))
        # A partition the topic does not have: a documented difference (the job has no
        # metadata of the data cluster), so rare; past the job's cap (INT32_MAX) both refuse it.
        return r.choice((count, INT32_MAX))

    def _topic_partition(self, touched: list[tuple[str, int]]) -> tuple[str, int]:
        if touched and self._random.random() < 0.5:
            return self._random.choice(touched)
        topic = self._topic()
        return topic, self._partition(topic)

    def _operation(self, touched: list[tuple[str, int]]) -> Operation:
        r = self._random
        roll = r.random()
        if roll < 0.65:
            return self._commit(touched)
        if roll < 0.9:
            n = r.choice((0, 1, 1, 2, 3))
            partitions = tuple(self._topic_partition(touched) for _ in range(n))
            if partitions and r.random() < 0.15:
                partitions += (partitions[0],)
            return DeleteOffsets(partitions)
        return DeleteGroup()

    def _commit(self, touched: list[tuple[str, int]]) -> Commit:
        r = self._random
        n = r.choice((0, 1, 1, 2, 3, 4))
        partitions = []
        for _ in range(n):
            topic, partition = self._topic_partition(touched)
            touched.append((topic, partition))
            partitions.append(
                CommitPartition(
                    topic,
                    partition,
                    offset=r.choice(OFFSETS) if r.random() < 0.3 else r.randrange(10_000),
                    leader_epoch=r.choice(LEADER_EPOCHS) if r.random() < 0.3 else -1,
                    metadata=r.choice(METADATA) if r.random() < 0.4 else "",
                )
            )
        if partitions and r.random() < 0.1:
            partitions.append(replace(partitions[0], offset=partitions[0].offset // 2))
        retention = r.choice(RETENTIONS) if r.random() < 0.1 else -1
        return Commit(tuple(partitions), retention)


def run_tag() -> str:
    """A tag no other run has."""
    return uuid.uuid4().hex[:8]
