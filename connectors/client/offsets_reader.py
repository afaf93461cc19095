"""Reading committed offsets (OffsetFetch, ListGroups, describe with lag) from the sink:
:class:`OffsetsReader`, with the cluster's offsets from :class:`BrokerOffsets`
(``connectors.client.broker_offsets``); :func:`lag` the one rule of lag in messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kafka.errors import KafkaError, UnknownTopicOrPartitionError

from connectors.client.as_of import CommittedAsOf, committed_as_of
from connectors.client.broker_offsets import BrokerOffsets
from connectors.client.errors import CoordinatorLoadInProgressError, OffsetsError
from connectors.client.starting_offsets import missing_marker, starting_offsets_json
from connectors.closing import CloseOnExit
from connectors.kafka.admin import DEFAULT_INGEST_TOPIC
from connectors.sinks import (
    CommitHistoryEntry,
    CommittedOffset,
    CoordinatorStatus,
    GroupListing,
    Sink,
    open_sink,
)
from connectors.sinks.log_end_samples import TimeLag, lag_ms, record_lag
from connectors.sinks.values import now_ms
from state.coordinator.acls import Authorizer
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition


def lag(committed: int, log_end: int | None) -> int | None:
    """Consumer lag of one partition: ``max(0, log_end - committed)``; with no committed offset
    (-1) the whole log counts (``log_end``); None when the log end is unknown."""
    if log_end is None:
        return None
    if committed < 0:
        return max(0, log_end)
    return max(0, log_end - committed)


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One row of ``describe``: the committed offset next to the partition's log end."""

    topic: str
    partition: int
    committed_offset: int
    #: None when the broker does not know the partition (deleted topic, wrong cluster).
    log_end_offset: int | None
    lag: int | None
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None
    #: Lag in seconds (``connectors.sinks.log_end_samples``): None without sampled log ends.
    lag_seconds: float | None = None
    #: The committed offset is older than the sampled table: the lag is at least lag_seconds.
    lag_seconds_bounded: bool = False
    #: UNSTABLE_OFFSET_COMMIT (88) under RequireStable while a transaction holds an offset of
    #: the partition (then committed_offset is -1, lag unknown), else 0.
    error_code: int = 0

    @property
    def topic_partition(self) -> TopicPartition:
        """The row's topic and partition as a ``TopicPartition``."""
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as ``describe`` shows it (``exists`` False: no such group, no partitions);
    ``generation``/``members`` None for a simple group (offsets only)."""

    group_id: str
    exists: bool
    partitions: tuple[PartitionLag, ...]
    generation: int | None = None
    members: int | None = None

    @property
    def total_lag(self) -> int | None:
        """Sum of the partitions' lag; None if any is unknown."""
        lags = [p.lag for p in self.partitions]
        return None if any(x is None for x in lags) else sum(x for x in lags if x is not None)

    @property
    def max_lag_seconds(self) -> float | None:
        """The largest lag in seconds of the partitions; None if none is known."""
        known = [p.lag_seconds for p in self.partitions if p.lag_seconds is not None]
        return max(known) if known else None


def _unstable(offset: CommittedOffset) -> CommittedOffset:
    """A partition's answer under RequireStable while a transaction holds an offset of it."""
    return replace(
        offset,
        offset=-1,
        leader_epoch=-1,
        metadata="",
        commit_timestamp_ms=-1,
        expire_timestamp_ms=None,
        error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT,
    )


def end_offsets(client_options: Mapping[str, Any], topic: str) -> dict[int, int]:
    """Log-end offset of every partition of ``topic`` ({} when the topic does not exist)."""
    with BrokerOffsets(client_options) as broker:
        return {tp.partition: end for tp, end in broker.topic_end_offsets([topic]).items()}


def beginning_offsets(client_options: Mapping[str, Any], topic: str) -> dict[int, int]:
    """Log-start offset of every partition of ``topic`` ({} when the topic does not exist)."""
    with BrokerOffsets(client_options) as broker:
        tps = [TopicPartition(topic, p) for p in broker.partitions_for(topic)]
        return {tp.partition: start for tp, start in broker.beginning_offsets(tps).items()}


class OffsetsReader(CloseOnExit):
    """Reads over the sink (opened read-only on first use) and, with kafka-python
    ``client_options``, the broker. Like a coordinator loading its partition, reads raise
    :class:`CoordinatorLoadInProgressError` (14) while the status is LOADING (a read racing a
    rebuild's start may see the view before it, never a partial batch); a STOPPED job's sink
    still answers with its last state. RequireStable reads look for open transactions on the
    group's partition of ``ingest_topic`` and ``tenant_topics`` (the job's); ``tenant_acls``
    (a tenant's ingest topic -> its ACLs) keeps out what the job would not apply for the group
    (``OpenTransactions.unstable``): without them, everything on a tenant's topic counts."""

    def __init__(
        self,
        sink_url: str,
        client_options: Mapping[str, Any] | None = None,
        *,
        sink: Sink | None = None,
        ingest_topic: str = DEFAULT_INGEST_TOPIC,
        tenant_topics: Sequence[str] = (),
        tenant_acls: Mapping[str, Authorizer] | None = None,
    ) -> None:
        self.sink_url = sink_url
        self._sink = sink
        self._owns_sink = sink is None
        self._broker = BrokerOffsets(client_options) if client_options is not None else None
        self.ingest_topic = ingest_topic
        self.tenant_topics = tuple(tenant_topics)
        self.tenant_acls = dict(tenant_acls or {})

    @property
    def sink(self) -> Sink:
        """The read-only sink, opened on first use."""
        if self._sink is None:
            self._sink = open_sink(self.sink_url, read_only=True)
        return self._sink

    @property
    def broker(self) -> BrokerOffsets:
        """The cluster's offsets; ValueError without Kafka client options."""
        if self._broker is None:
            raise ValueError("this reader has no Kafka client options: cannot ask the broker")
        return self._broker

    def status(self) -> CoordinatorStatus:
        """The coordinator status row, whatever it says."""
        return self.sink.status()

    def _check_loaded(self) -> CoordinatorStatus:
        """The status; CoordinatorLoadInProgressError while LOADING."""
        status = self.sink.status()
        if status.status == "LOADING":
            detail = f" ({status.detail})" if status.detail else ""
            raise CoordinatorLoadInProgressError(
                f"the offsets job is loading its state{detail}; retry later"
            )
        return status

    def fetch(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
    ) -> list[CommittedOffset]:
        """OffsetFetch: every committed partition of the group (``partitions=None``, sorted), or
        one answer per listed partition in order, offset -1 where nothing is committed.

        ``require_stable`` (OffsetFetch v7+): a partition the group has a pending transactional
        offset on (:meth:`_unstable_partitions`) answers UNSTABLE_OFFSET_COMMIT (88), offset
        -1; as in Kafka, ``partitions=None`` answers only the committed ones.
        """
        status = self._check_loaded()
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        answer = self.sink.fetch_offsets(group_id, wanted)
        if not require_stable:
            return answer
        unstable = self._unstable_partitions(group_id, [o.topic_partition for o in answer], status)
        return [_unstable(o) if o.topic_partition in unstable else o for o in answer]

    def _unstable_partitions(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        status: CoordinatorStatus,
        ingest_topic: str | None = None,
        tenant_topics: Sequence[str] | None = None,
    ) -> set[TopicPartition]:
        """Those of ``partitions`` the group has a pending transactional offset on: named by a
        TxnOffsetCommit on the group's partition of ``ingest_topic`` or ``tenant_topics``
        (default the reader's) that the job had not applied at ``status`` (read before the
        offsets, so they hold at least that): in a transaction still open, or committed past
        its progress (``OpenTransactions.unstable``). A mirror's sink has no ingest topics:
        none. OffsetsError COORDINATOR_NOT_AVAILABLE (15) for an ingest topic the cluster
        lacks, REQUEST_TIMED_OUT (7) when it cannot be read.
        """
        if self.sink.source_cluster() is not None:
            return set()
        own = self.ingest_topic if ingest_topic is None else ingest_topic
        tenants = self.tenant_topics if tenant_topics is None else tuple(tenant_topics)
        applied = {
            own: status.ingest_offsets,
            **{t: status.tenant_offsets.get(t, {}) for t in tenants},
        }
        try:
            return self.broker.open_transactions.unstable(
                group_id, partitions, applied, self.tenant_acls
            )
        except UnknownTopicOrPartitionError as exc:
            raise OffsetsError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"{exc}: whether group {group_id!r}'s offsets are stable cannot be known "
                "(is the reader's ingest_topic the job's?)",
            ) from exc
        except KafkaError as exc:
            raise OffsetsError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"cannot read the open transactions of group {group_id!r}'s ingest partitions "
                f"({type(exc).__name__}: {exc}): whether its offsets are stable is unknown",
            ) from exc

    def list_groups(self) -> list[GroupListing]:
        """ListGroups: every group with offsets or group metadata, sorted by id."""
        self._check_loaded()
        return self.sink.list_groups()

    def group(self, group_id: str) -> GroupListing | None:
        """The group's listing (offset count, generation, members), None if unknown."""
        return next((g for g in self.list_groups() if g.group_id == group_id), None)

    def max_lag_seconds(
        self,
        group_ids: Sequence[str],
        topics: Callable[[str], bool] | None = None,
        *,
        ask_broker: bool = True,
    ) -> dict[str, float | None]:
        """Each group's largest lag in seconds (None: none known) over the topics ``topics``
        keeps, as :meth:`describe` figures each partition's: the log-end samples, else the
        timestamp of the record at the committed offset (one log-end read and one round of
        record reads per distinct offset of a partition, for all the groups together);
        ``ask_broker=False``: the sink's log ends and samples alone."""
        committed = {
            g: [o for o in self.sink.fetch_offsets(g) if topics is None or topics(o.topic)]
            for g in group_ids
        }
        every = [o for offsets in committed.values() for o in offsets]
        ends = self.log_end_offsets({o.topic_partition for o in every}, ask_broker=ask_broker)
        behinds = iter(self._time_lags(every, ends, ask_broker))
        found: dict[str, float | None] = {}
        for group_id, offsets in committed.items():
            lags = [b.lag_ms / 1000 for _ in offsets if (b := next(behinds)) is not None]
            found[group_id] = max(lags) if lags else None
        return found

    def _time_lags(
        self,
        committed: Sequence[CommittedOffset],
        ends: Mapping[TopicPartition, int],
        ask_broker: bool,
    ) -> list[TimeLag | None]:
        """Each committed offset's lag in time, in order: from the log-end samples serve and the
        mirror keep in the sink; where they cannot place an offset behind the log end, from the
        timestamp of its record (read from the broker when ``ask_broker``)."""
        samples = self.sink.log_end_samples({o.topic for o in committed})
        now = now_ms()
        behinds = [
            lag_ms(samples.get(o.topic_partition, []), o.offset, ends.get(o.topic_partition), now)
            for o in committed
        ]
        unplaced: dict[tuple[TopicPartition, int], list[int]] = {}
        for i, (o, behind) in enumerate(zip(committed, behinds, strict=True)):
            behind_log = (lag(o.offset, ends.get(o.topic_partition)) or 0) > 0
            if not o.error_code and behind_log and (behind is None or behind.bounded):
                unplaced.setdefault((o.topic_partition, o.offset), []).append(i)
        if not (ask_broker and self._broker is not None and unplaced):
            return behinds
        pending = list(unplaced)
        while pending:  # a partition has one position: one of its offsets a round
            round_: dict[TopicPartition, int] = {}
            rest = []
            for tp, offset in pending:
                if tp in round_:
                    rest.append((tp, offset))
                else:
                    round_[tp] = offset
            pending = rest
            for tp, record in self.broker.record_times(round_).items():
                for i in unplaced[(tp, round_[tp])]:
                    behinds[i] = record_lag(behinds[i], record, now)
        return behinds

    def describe(
        self, group_id: str, *, ask_broker: bool = True, require_stable: bool = False
    ) -> GroupDescription:
        """The group's committed partitions with their log ends (:meth:`log_end_offsets`;
        None where unknown) and lag; ``ask_broker=False`` reads the sink's log ends only.
        ``require_stable``: as :meth:`fetch`'s (88: offset -1, lag unknown)."""
        listing = self.group(group_id)
        if listing is None:
            return GroupDescription(group_id, exists=False, partitions=())
        status = self.sink.status()  # before the offsets: their progress is at least its
        committed = self.sink.fetch_offsets(group_id)
        unstable = (
            self._unstable_partitions(group_id, [o.topic_partition for o in committed], status)
            if require_stable
            else set()
        )
        committed = [_unstable(o) if o.topic_partition in unstable else o for o in committed]
        ends = self.log_end_offsets((o.topic_partition for o in committed), ask_broker=ask_broker)
        times = self._time_lags(committed, ends, ask_broker)
        behinds = {o.topic_partition: t for o, t in zip(committed, times, strict=True)}
        rows = [
            PartitionLag(
                o.topic,
                o.partition,
                o.offset,
                end := ends.get(o.topic_partition),
                None if o.error_code else lag(o.offset, end),
                o.leader_epoch,
                o.metadata,
                o.commit_timestamp_ms,
                o.expire_timestamp_ms,
                None
                if o.error_code or (behind := behinds[o.topic_partition]) is None
                else behind.lag_ms / 1000,
                not o.error_code and behind is not None and behind.bounded,
                o.error_code,
            )
            for o in committed
        ]
        return GroupDescription(group_id, True, tuple(rows), listing.generation, listing.members)

    def log_end_offsets(
        self, partitions: Iterable[TopicPartition], *, ask_broker: bool = True
    ) -> dict[TopicPartition, int]:
        """Log ends of ``partitions``: those a mirror stores in the sink, the rest from the
        broker unless ``ask_broker`` is False; a partition known to neither is left out."""
        wanted = list(partitions)
        stored = self.sink.log_end_offsets({tp.topic for tp in wanted})
        ends = {tp: stored[tp].offset for tp in wanted if tp in stored}
        missing = [tp for tp in wanted if tp not in ends]
        if missing and ask_broker:
            ends.update(self.broker.end_offsets(missing))
        return ends

    def spark_starting_offsets(
        self,
        group_id: str,
        topics: Sequence[str] | None = None,
        missing: str = "earliest",
        *,
        unknown_group: str = "error",
        require_stable: bool = False,
        ingest_topic: str | None = None,
        tenant_topics: Sequence[str] | None = None,
    ) -> str:
        """The group's committed offsets as Spark's ``startingOffsets`` JSON over every partition
        of ``topics`` (None: the group's), never-committed ones at ``missing``'s marker.

        Raises GROUP_ID_NOT_FOUND (69) for a group the sink does not know (unless
        ``unknown_group="missing"``), UNKNOWN_TOPIC_OR_PARTITION (3) for a topic the cluster
        lacks, REQUEST_TIMED_OUT (7) when it cannot be reached; with ``require_stable``,
        UNSTABLE_OFFSET_COMMIT (88, retriable) while the group has a pending transactional
        offset on one of those partitions (:meth:`_unstable_partitions` over ``ingest_topic``
        and ``tenant_topics``, default the reader's).
        """
        missing_marker(missing)  # ValueError for anything but earliest/latest, before any I/O
        if unknown_group not in ("error", "missing"):
            raise ValueError(f"unknown_group must be 'error' or 'missing', got {unknown_group!r}")
        if isinstance(topics, str):
            raise TypeError(f"topics must be a list of topic names, not the string {topics!r}")
        status = self._check_loaded()
        committed = self.sink.fetch_offsets(group_id)
        if not committed and unknown_group == "error" and self.group(group_id) is None:
            raise OffsetsError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"group {group_id!r} does not exist in the sink {self.sink.url}",
            )
        wanted = list(dict.fromkeys(topics if topics is not None else (o.topic for o in committed)))
        if not wanted:
            raise ValueError(
                f"group {group_id!r} has no committed offsets: give topics, the topics the "
                "query subscribes to"
            )
        partitions = {topic: self._partitions_of(topic) for topic in wanted}
        if require_stable:
            named = [TopicPartition(t, p) for t, ids in partitions.items() for p in ids]
            unstable = self._unstable_partitions(
                group_id, named, status, ingest_topic, tenant_topics
            )
            if unstable:
                shown = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(unstable))
                raise OffsetsError(
                    ErrorCode.UNSTABLE_OFFSET_COMMIT,
                    f"group {group_id!r} has transactional offsets not applied yet on {shown}: "
                    "retry once the transaction ends and the job applies it",
                )
        return starting_offsets_json(
            ((o.topic_partition, o.offset) for o in committed), partitions, missing
        )

    def _partitions_of(self, topic: str) -> list[int]:
        """The topic's partition ids; OffsetsError when the cluster lacks it or is unreachable."""
        try:
            found = self.broker.partitions_for(topic)
        except KafkaError as exc:
            raise OffsetsError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"cannot read the partitions of topic {topic!r} from the Kafka cluster "
                f"({type(exc).__name__}: {exc}); without them no startingOffsets can be given",
            ) from exc
        if not found:
            raise OffsetsError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {topic!r} does not exist on the Kafka cluster",
            )
        return found

    def history(
        self,
        group_id: str,
        topic: str | None = None,
        partition: int | None = None,
        limit: int = 100,
    ) -> list[CommitHistoryEntry]:
        """The group's applied commits, newest first (empty unless the job keeps history)."""
        self._check_loaded()
        return self.sink.history(group_id, topic, partition, limit)

    def committed_as_of(self, group_id: str, at_ms: int) -> list[CommittedAsOf]:
        """The group's committed offsets as of ``at_ms`` (epoch ms), each with its commit's
        time and how exact it is (``connectors.client.as_of``); partitions without a commit
        then are absent (empty unless the job or mirror keeps history)."""
        self._check_loaded()
        return committed_as_of(self.sink, group_id, at_ms, now_ms())

    def close(self) -> None:
        """Close the sink (unless it was handed in) and the broker connection."""
        if self._owns_sink and self._sink is not None:
            self._sink.close()
            self._sink = None
        if self._broker is not None:
            self._broker.close()
