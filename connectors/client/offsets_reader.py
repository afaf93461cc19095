"""Reading committed offsets (OffsetFetch, ListGroups, describe with lag) from the sink:
:class:`OffsetsReader`. :class:`BrokerOffsets` is the one reader of the cluster's offsets
(log end, log start, by time, the records at committed offsets); :func:`lag` the one rule of
lag in messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaError

from connectors.client.errors import CoordinatorLoadInProgressError, OffsetsError
from connectors.client.starting_offsets import missing_marker, starting_offsets_json
from connectors.closing import CloseOnExit
from connectors.kafka.admin import list_offsets
from connectors.sinks import (
    CommitHistoryEntry,
    CommittedOffset,
    CoordinatorStatus,
    GroupListing,
    Sink,
    open_sink,
)
from connectors.sinks.log_end_samples import RecordTime, lag_ms, record_lag
from connectors.sinks.values import now_ms
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition

#: Seconds between two reads of the committed topics' log ends (the mirror's and serve's):
#: Burrow and kafka_exporter poll every 30-60 s; 10 s keeps a dashboard's lag fresh.
LOG_END_INTERVAL_S: Final = 10.0
#: A partition's fetch when reading the record at a committed offset: one record is wanted.
_RECORD_FETCH_BYTES: Final = 64 * 1024


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


class BrokerOffsets(CloseOnExit):
    """Partition offsets from the cluster through one kafka-python consumer (no group); not
    thread-safe. Partitions the cluster does not know are left out of every answer (kafka-python
    would wait for them forever)."""

    def __init__(self, client_options: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        self._options = dict(client_options)
        self.timeout_s = timeout_s
        self._consumer: KafkaConsumer | None = None

    def _client(self) -> KafkaConsumer:
        if self._consumer is None:
            self._consumer = KafkaConsumer(
                **{
                    "client_id": "consumer-offsets-reader",
                    "auto_offset_reset": "earliest",
                    "max_partition_fetch_bytes": _RECORD_FETCH_BYTES,
                    **self._options,
                    "group_id": None,
                    "enable_auto_commit": False,
                    "allow_auto_create_topics": False,
                }
            )
        return self._consumer

    def read_committed(self) -> BrokerOffsets:
        """A reader of the same cluster whose log ends are last stable offsets (read_committed):
        an open transaction's first offset while one is open. The caller closes it."""
        return BrokerOffsets({**self._options, "isolation_level": "read_committed"}, self.timeout_s)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids, sorted ([] when it does not exist)."""
        return sorted(self._client().partitions_for_topic(topic) or ())

    def _known(self, partitions: Iterable[TopicPartition]) -> list[KafkaTopicPartition]:
        by_topic: dict[str, set[int]] = {}
        known = []
        for topic, partition in partitions:
            if topic not in by_topic:
                by_topic[topic] = set(self.partitions_for(topic))
            if partition in by_topic[topic]:
                known.append(KafkaTopicPartition(topic, partition))
        return known

    def _list(
        self, partitions: Iterable[TopicPartition], call: Callable[[KafkaConsumer], Any]
    ) -> dict[TopicPartition, Any]:
        """``call(consumer)(known partitions)`` (a ListOffsets), by partition ({} for none)."""
        known = self._known(partitions)
        if not known:
            return {}
        answer = list_offsets(call(self._client()), known, self.timeout_s)
        return {TopicPartition(tp.topic, tp.partition): off for tp, off in answer.items()}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Log-end offset (the next offset to be written) of each known partition."""
        return self._list(partitions, lambda consumer: consumer.end_offsets)

    def topic_end_offsets(self, topics: Iterable[str]) -> dict[TopicPartition, int]:
        """Log-end offset of every partition of ``topics`` (topics the cluster lacks: none)."""
        return self.end_offsets(
            TopicPartition(topic, p) for topic in topics for p in self.partitions_for(topic)
        )

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Log-start offset (the earliest readable offset) of each known partition."""
        return self._list(partitions, lambda consumer: consumer.beginning_offsets)

    def offsets_for_time(
        self, partitions: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        """The earliest offset whose timestamp is >= ``timestamp_ms``, per known partition;
        None where no message is that recent (Kafka's reset then uses the log end)."""
        answer = self._list(
            partitions,
            lambda consumer: (
                lambda tps: consumer.offsets_for_times(dict.fromkeys(tps, int(timestamp_ms)))
            ),
        )
        return {tp: None if found is None else found.offset for tp, found in answer.items()}

    def record_times(
        self, positions: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> dict[TopicPartition, RecordTime]:
        """The time of the record at each known partition's offset of ``positions`` (``gone``
        where retention deleted it: then the first kept record's); a partition with no record
        there (or a v0 record), or none read within ``timeout_s`` (default the reader's), is left
        out. Each partition is sought, polled for one record, then paused; none stays assigned."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        asked = {tp: positions[TopicPartition(*tp)] for tp in self._known(positions)}
        if not asked:
            return {}
        consumer = self._client()
        starts = list_offsets(consumer.beginning_offsets, list(asked), deadline - time.monotonic())
        ends = list_offsets(consumer.end_offsets, list(asked), deadline - time.monotonic())
        # Sought past what retention deleted, rather than left to the consumer's reset: a record
        # kept is read at once, and an empty log (everything deleted) is not waited for.
        sought = {
            tp: max(offset, starts[tp])
            for tp, offset in asked.items()
            if tp in starts and tp in ends and max(offset, starts[tp]) < ends[tp]
        }
        if not sought:
            return {}
        read: dict[KafkaTopicPartition, RecordTime | None] = {}
        consumer.assign(list(sought))
        try:
            for tp, offset in sought.items():
                consumer.seek(tp, offset)
            while len(read) < len(sought) and (left := deadline - time.monotonic()) > 0:
                # One record a poll: a partition paused after its first record has the rest of
                # its fetched batches dropped unparsed, where a larger poll would decode them all.
                polled = consumer.poll(timeout_ms=max(1, int(left * 1000)), max_records=1)
                for tp, records in polled.items():
                    if records and tp not in read:
                        first = records[0]
                        read[tp] = RecordTime.read_at(asked[tp], first.offset, first.timestamp)
                        consumer.pause(tp)
        finally:
            consumer.unsubscribe()  # the paused state would outlive a later assignment
        return {TopicPartition(*tp): at for tp, at in read.items() if at is not None}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


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
    still answers with its last state."""

    def __init__(
        self,
        sink_url: str,
        client_options: Mapping[str, Any] | None = None,
        *,
        sink: Sink | None = None,
    ) -> None:
        self.sink_url = sink_url
        self._sink = sink
        self._owns_sink = sink is None
        self._broker = BrokerOffsets(client_options) if client_options is not None else None

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

    def _check_loaded(self) -> None:
        status = self.sink.status()
        if status.status == "LOADING":
            detail = f" ({status.detail})" if status.detail else ""
            raise CoordinatorLoadInProgressError(
                f"the offsets job is loading its state{detail}; retry later"
            )

    def fetch(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> list[CommittedOffset]:
        """OffsetFetch: every committed partition of the group (``partitions=None``, sorted), or
        one answer per listed partition in order, offset -1 where nothing is committed."""
        self._check_loaded()
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        return self.sink.fetch_offsets(group_id, wanted)

    def list_groups(self) -> list[GroupListing]:
        """ListGroups: every group with offsets or group metadata, sorted by id."""
        self._check_loaded()
        return self.sink.list_groups()

    def group(self, group_id: str) -> GroupListing | None:
        """The group's listing (offset count, generation, members), None if unknown."""
        return next((g for g in self.list_groups() if g.group_id == group_id), None)

    def max_lag_seconds(
        self, group_ids: Sequence[str], topics: Callable[[str], bool] | None = None
    ) -> dict[str, float | None]:
        """Each group's largest lag in seconds (None: none known) over the topics ``topics``
        keeps, from the sink's log-end samples alone (no broker call)."""
        samples = self.sink.log_end_samples()
        now = now_ms()
        found: dict[str, float | None] = {}
        for group_id in group_ids:
            lags = [
                behind.lag_ms / 1000
                for o in self.sink.fetch_offsets(group_id)
                if (topics is None or topics(o.topic))
                and (behind := lag_ms(samples.get(o.topic_partition, []), o.offset, None, now))
            ]
            found[group_id] = max(lags) if lags else None
        return found

    def describe(self, group_id: str, *, ask_broker: bool = True) -> GroupDescription:
        """The group's committed partitions with their log ends (:meth:`log_end_offsets`;
        None where unknown) and lag; ``ask_broker=False`` reads the sink's log ends only."""
        listing = self.group(group_id)
        if listing is None:
            return GroupDescription(group_id, exists=False, partitions=())
        committed = self.sink.fetch_offsets(group_id)
        ends = self.log_end_offsets((o.topic_partition for o in committed), ask_broker=ask_broker)
        # Lag in seconds from the log-end samples serve and the mirror keep in the sink; where
        # they cannot place a committed offset behind the log end, from its record's timestamp.
        samples = self.sink.log_end_samples({o.topic for o in committed})
        now = now_ms()
        behinds = {
            o.topic_partition: lag_ms(
                samples.get(o.topic_partition, []), o.offset, ends.get(o.topic_partition), now
            )
            for o in committed
        }
        unplaced = {
            o.topic_partition: o.offset
            for o in committed
            if (lag(o.offset, ends.get(o.topic_partition)) or 0) > 0
            and ((behind := behinds[o.topic_partition]) is None or behind.bounded)
        }
        if ask_broker and self._broker is not None and unplaced:
            records = self.broker.record_times(unplaced)
            behinds |= {tp: record_lag(behinds[tp], record, now) for tp, record in records.items()}
        rows = [
            PartitionLag(
                o.topic,
                o.partition,
                o.offset,
                end := ends.get(o.topic_partition),
                lag(o.offset, end),
                o.leader_epoch,
                o.metadata,
                o.commit_timestamp_ms,
                o.expire_timestamp_ms,
                None if (behind := behinds[o.topic_partition]) is None else behind.lag_ms / 1000,
                behind is not None and behind.bounded,
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
    ) -> str:
        """The group's committed offsets as Spark's ``startingOffsets`` JSON over every partition
        of ``topics`` (None: the group's), never-committed ones at ``missing``'s marker.

        Raises GROUP_ID_NOT_FOUND (69) for a group the sink does not know (unless
        ``unknown_group="missing"``), UNKNOWN_TOPIC_OR_PARTITION (3) for a topic the cluster
        lacks, REQUEST_TIMED_OUT (7) when it cannot be reached.
        """
        missing_marker(missing)  # ValueError for anything but earliest/latest, before any I/O
        if unknown_group not in ("error", "missing"):
            raise ValueError(f"unknown_group must be 'error' or 'missing', got {unknown_group!r}")
        if isinstance(topics, str):
            raise TypeError(f"topics must be a list of topic names, not the string {topics!r}")
        self._check_loaded()
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

    def close(self) -> None:
        """Close the sink (unless it was handed in) and the broker connection."""
        if self._owns_sink and self._sink is not None:
            self._sink.close()
            self._sink = None
        if self._broker is not None:
            self._broker.close()
