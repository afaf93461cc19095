"""What the sinks speak, shared by the writer, the readers and every backend: their errors,
the coordinator states and the values they return."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from state.coordinator.model import TopicPartition

#: OffsetFetch answers COORDINATOR_LOAD_IN_PROGRESS while LOADING; STARTING: the query runs,
#: its first micro-batch not completed yet.
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
    """A batch failed and was rolled back (or, lost during COMMIT, may have been written:
    replaying it is safe either way, batches being idempotent per id)."""


class LeaseLost(SinkError):
    """This process no longer holds its deployment's lease (another took it over, or it expired
    and was taken): the write was rolled back; the process must stop writing. Not retried."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A deployment's lease row: ``epoch`` (the fencing token, bumped at each change of holder),
    ``holder`` (``host:pid/instance``, empty when free), times in the sink's clock (ms)."""

    name: str
    epoch: int
    holder: str
    renewed_at_ms: int
    expires_at_ms: int
    #: The sink's clock when the row was read (0: not known): what "expires in" counts from.
    read_at_ms: int = 0

    @property
    def expires_in_ms(self) -> int:
        """Milliseconds until it expires as read (<= 0: expired or released)."""
        return self.expires_at_ms - self.read_at_ms


#: A standby's state: starting (JVM, Spark session, workers) or ready to take the lease over.
StandbyState = Literal["WARMING", "READY"]


@dataclass(frozen=True, slots=True)
class Standby:
    """A process waiting to take deployment ``name``'s lease over, as last registered;
    ``age_ms``: since its heartbeat, in the sink's clock."""

    name: str
    holder: str
    state: StandbyState
    heartbeat_at_ms: int
    age_ms: int


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """What the job reports for one micro-batch, stored with its records. ``ingest_offsets``:
    the next offset to read per ingest partition (Spark's end offsets); ``tenant_offsets`` the
    same per tenant's ingest topic."""

    batch_id: int
    ingest_offsets: Mapping[int, int] = field(default_factory=dict)
    tenant_offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    #: Offset commits applied per group (one per partition), added to its commits counter.
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
    #: The partition's OffsetFetch error: UNSTABLE_OFFSET_COMMIT (88, offset -1) under
    #: RequireStable while a transaction holds an offset of it, else 0.
    error_code: int = 0

    @property
    def topic_partition(self) -> TopicPartition:
        """The offset's topic and partition as a ``TopicPartition``."""
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class GroupListing:
    """A group with committed offsets, group metadata or both (None: no metadata)."""

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
    """A partition's log-end offset as read from the cluster, and when it was read."""

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
    """The Kafka cluster a mirror's sink holds (one per sink or table prefix)."""

    cluster_id: str
    cluster_name: str
    updated_at_ms: int


@dataclass(frozen=True, slots=True)
class CoordinatorStatus:
    """The job's state and the last committed batch's progress (-1 and None before the first).
    ``updated_at_ms``: the sink clock at the last change; ``heartbeat_at_ms`` at the writer's
    last heartbeat (None: never)."""

    status: CoordinatorState
    detail: str
    last_batch_id: int
    ingest_offsets: dict[int, int]
    updated_at_ms: int
    last_progress: BatchProgress | None
    heartbeat_at_ms: int | None = None
    tenant_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
