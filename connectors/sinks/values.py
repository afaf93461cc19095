"""What the sinks speak: their errors, the coordinator states and the values they return.

Plain values, no I/O: the writer (``streaming``), the read API (``connectors.client``) and every
backend share them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from state.coordinator.model import TopicPartition

#: The coordinator status row. OffsetFetch answers COORDINATOR_LOAD_IN_PROGRESS while LOADING.
#: STARTING: the query runs but its first micro-batch has not completed (requests wait for it).
CoordinatorState = Literal["LOADING", "STARTING", "ACTIVE", "STOPPED"]
COORDINATOR_STATES: Final = frozenset(get_args(CoordinatorState))

#: Kafka's answer for a partition without a committed offset (OffsetFetch).
NO_OFFSET: Final = -1


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch: the default clock of the sinks."""
    return time.time_ns() // 1_000_000


class SinkError(Exception):
    """The sink could not do what was asked; the message names the sink by its redacted URL."""


class SinkWriteError(SinkError):
    """A batch failed: its transaction was rolled back and the state is as before the call.

    The one exception is a connection lost *during* COMMIT, whose outcome the client cannot
    know; replaying the batch is safe either way, because batches are idempotent per id. Raised
    out of ``foreachBatch`` this fails the streaming query; after a restart Spark replays the
    batch from its checkpoint.
    """


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """What the streaming job reports for one micro-batch, stored with the batch's records.

    ``ingest_offsets`` maps each ingest-topic partition to the *next* offset to read after this
    batch (Spark's end offsets); a restarted job without a checkpoint can start there.
    ``tenant_offsets`` does the same for each tenant's ingest topic (topic → partition → next
    offset); empty without tenants.
    """

    batch_id: int
    ingest_offsets: Mapping[int, int] = field(default_factory=dict)
    tenant_offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    #: Offset commits applied in this batch per group (one per partition, as Kafka writes one
    #: record per partition): added to the group's commits counter with the batch.
    group_commits: Mapping[str, int] = field(default_factory=dict)
    input_rows: int = 0
    commits_applied: int = 0
    rejected: int = 0
    tombstones: int = 0
    state_keys: int = 0
    duration_ms: int = 0
    timestamp_ms: int = field(default_factory=now_ms)


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One partition of an OffsetFetch answer; ``offset == -1`` means no committed offset."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        """The offset's topic and partition as a ``TopicPartition``."""
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class GroupListing:
    """A group known to the sink: it has committed offsets, group metadata, or both.

    ``generation``/``members`` are None when the sink holds no group metadata for it.
    """

    group_id: str
    partitions: int
    generation: int | None = None
    members: int | None = None


@dataclass(frozen=True, slots=True)
class CommitHistoryEntry:
    """One offset commit as it was applied (the ``offset_commit_history`` table)."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    batch_id: int


@dataclass(frozen=True, slots=True)
class LogEndOffset:
    """A partition's log-end offset as read from the cluster (ListOffsets), and when it was
    read (the ``topic_log_end_offsets`` table, kept by the mirror)."""

    topic: str
    partition: int
    offset: int
    updated_at_ms: int

    @property
    def topic_partition(self) -> TopicPartition:
        """The partition as a ``TopicPartition``."""
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class SourceCluster:
    """The Kafka cluster a mirror's sink holds (the ``source_cluster`` table): a sink, or a
    table prefix of one database, mirrors one cluster."""

    cluster_id: str
    cluster_name: str
    updated_at_ms: int


@dataclass(frozen=True, slots=True)
class CoordinatorStatus:
    """The coordinator status row: job state plus the last committed batch's progress.

    ``last_batch_id`` is -1 and ``last_progress`` None before the first batch.
    ``updated_at_ms`` is the sink clock at the last status change or batch;
    ``heartbeat_at_ms`` the sink clock at the writer's last heartbeat (``Sink.heartbeat``),
    None if it never sent one.
    """

    status: CoordinatorState
    detail: str
    last_batch_id: int
    ingest_offsets: dict[int, int]
    updated_at_ms: int
    last_progress: BatchProgress | None
    heartbeat_at_ms: int | None = None
    #: Each tenant's ingest topic → partition → the next offset the job reads there.
    tenant_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
