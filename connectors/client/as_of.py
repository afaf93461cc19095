"""A group's committed offsets as of a past time, from the sink's thinned commit history
(``state.commit_history``): what ``describe --as-of``, ``reset-offsets --to-committed-at``
and ``serve``'s route answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from state.commit_history import thinned_bucket
from state.coordinator.model import TopicPartition

if TYPE_CHECKING:
    from connectors.sinks import Sink


@dataclass(frozen=True, slots=True)
class CommittedAsOf:
    """A partition's commit in force at ``as_of_ms``: the group's last commit at or before
    it that the history keeps. ``exact``: it is the group's last commit at or before
    ``as_of_ms``; otherwise it is exact as of ``exact_as_of_ms`` (the end of the bucket before
    ``as_of_ms``'s in a thinned range: a later commit before ``as_of_ms`` may have been thinned
    away)."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    as_of_ms: int
    exact_as_of_ms: int

    @property
    def exact(self) -> bool:
        return self.exact_as_of_ms == self.as_of_ms

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def committed_as_of(sink: Sink, group_id: str, at_ms: int, now_ms: int) -> list[CommittedAsOf]:
    """Each partition's commit of ``group_id`` in force at ``at_ms``, by topic and partition,
    as the history thinned by ``now_ms`` (a pass's time or later: exactness is then said
    conservatively) keeps it; partitions without a commit at or before ``at_ms`` are absent."""
    bucket = thinned_bucket(at_ms, now_ms)
    # In a thinned bucket only its last commit is kept: when it is after at_ms, commits of
    # the bucket before at_ms may have gone, and the answer is exact as of the bucket's start.
    unsure = (
        set() if bucket is None else sink.history_partitions_between(group_id, at_ms, bucket[1])
    )
    answers = []
    for entry in sink.history_as_of(group_id, at_ms):
        inside = bucket is not None and entry.commit_timestamp_ms >= bucket[0]
        if bucket is None or inside or (entry.topic, entry.partition) not in unsure:
            exact = at_ms
        else:
            exact = bucket[0] - 1
        answers.append(
            CommittedAsOf(
                entry.topic,
                entry.partition,
                entry.offset,
                entry.leader_epoch,
                entry.metadata,
                entry.commit_timestamp_ms,
                at_ms,
                exact,
            )
        )
    return answers
