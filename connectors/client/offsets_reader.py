"""Reading committed offsets: Kafka's OffsetFetch, ListGroups and describe-with-lag, over the sink.

:class:`OffsetsReader` answers from the sink the job keeps. Like a coordinator still loading its
partition, a read first checks the status: while the job rebuilds its state (``LOADING``) reads
raise :class:`CoordinatorLoadInProgressError` (14). (Check and read are two statements: a read
racing the start of a rebuild may return the pre-rebuild view, never a partial batch.)

:class:`BrokerOffsets` is the one reader of the cluster's offsets — log-end, log-start, by time,
and the records at committed offsets — for lag here, ``reset-offsets``, the mirror's refresher
and ``serve``'s cache; :func:`lag` is the one rule of lag in messages.
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
from connectors.kafka.admin import list_offsets, record_timestamps
from connectors.sinks import (
    CommitHistoryEntry,
    CommittedOffset,
    CoordinatorStatus,
    GroupListing,
    Sink,
    open_sink,
)
from connectors.sinks.log_end_samples import RecordTime, lag_ms, record_lag
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition

__all__ = [
    "LOG_END_INTERVAL_S",
    "BrokerOffsets",
    "GroupDescription",
    "OffsetsReader",
    "PartitionLag",
    "lag",
]

#: Seconds between two reads of the log-end offsets of the committed topics (the mirror's and
#: serve's): Burrow and kafka_exporter poll every 30-60 s; 10 s keeps a dashboard's lag fresh.
LOG_END_INTERVAL_S: Final = 10.0
#: Bytes a partition's fetch may bring when reading a record at a committed offset: one record
#: is wanted.
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
    """A group as ``describe`` shows it. ``exists`` is False when the sink knows no such group
    (then ``partitions`` is empty). ``generation``/``members`` come from the group's metadata,
    None for a simple group (offsets only)."""

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
    """Partition offsets from the Kafka cluster, through one kafka-python consumer (no group).

    Not thread-safe (kafka-python's consumer is not). Partitions the cluster does not know are
    left out of every answer instead of blocking: kafka-python would wait for them forever.
    """

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
        """The timestamp of the record at each known partition's offset of ``positions``
        (``gone`` where retention deleted it: then the first kept record's); a partition with
        no record there (or a v0 record), or none read within ``timeout_s`` (default the
        reader's), is left out."""
        known = {
            tp: positions[TopicPartition(tp.topic, tp.partition)] for tp in self._known(positions)
        }
        if not known:
            return {}
        timeout = self.timeout_s if timeout_s is None else timeout_s
        found = record_timestamps(self._client(), known, timeout)
        times = {
            tp: RecordTime.read_at(known[tp], r.offset, r.timestamp_ms) for tp, r in found.items()
        }
        return {
            TopicPartition(tp.topic, tp.partition): t for tp, t in times.items() if t is not None
        }

    def close(self) -> None:
        """Close the consumer used for ListOffsets, if one was opened."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class OffsetsReader(CloseOnExit):
    """Read API over the sink (read-only) and the broker.

    ``sink_url`` is opened with ``open_sink(url, read_only=True)`` on first use;
    ``client_options`` are kafka-python options (``JobConfig.kafka_python_options()``), needed
    by the broker helpers and by :meth:`describe` for partitions whose log-end offset the sink
    does not store. Every sink read checks the status first and
    raises :class:`CoordinatorLoadInProgressError` while it is LOADING. A STOPPED job's sink is
    still answered (its last state); :meth:`status` tells callers which it is.
    """

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
        """Log-end offsets from the brokers; fails when the reader was built without Kafka client
        options."""
        if self._broker is None:
            raise ValueError("this reader has no Kafka client options: cannot ask the broker")
        return self._broker

    def status(self) -> CoordinatorStatus:
        """The coordinator status row, whatever it says (never raises for LOADING)."""
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
        """Each group's largest lag in seconds from the sink alone (its log-end samples, the
        newest as the log end; no broker call), over the topics ``topics`` keeps (default
        all): None for a group with none known."""
        samples = self.sink.log_end_samples()
        now = int(time.time() * 1000)
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
        """The group's committed partitions with their log-end offsets and lag.

        Lag is ``max(0, log_end - committed)`` with log-end offsets from
        :meth:`log_end_offsets`; a partition neither the sink nor the broker knows has
        ``log_end_offset`` and ``lag`` None. ``ask_broker=False`` takes only the log-end
        offsets the sink stores (for a cluster that cannot be reached).
        """
        listing = self.group(group_id)
        if listing is None:
            return GroupDescription(group_id, exists=False, partitions=())
        committed = self.sink.fetch_offsets(group_id)
        ends = self.log_end_offsets((o.topic_partition for o in committed), ask_broker=ask_broker)
        # Lag in seconds from the log-end samples serve and the mirror keep in the sink; where
        # they cannot place a committed offset behind the log end, from its record's timestamp.
        samples = self.sink.log_end_samples({o.topic for o in committed})
        now = int(time.time() * 1000)
        behinds = {
            o.topic_partition: lag_ms(
                samples.get(o.topic_partition, []), o.offset, ends.get(o.topic_partition), now
            )
            for o in committed
        }
        if ask_broker and self._broker is not None:
            unplaced = {}
            for o in committed:
                tp, behind = o.topic_partition, behinds[o.topic_partition]
                if (lag(o.offset, ends.get(tp)) or 0) > 0 and (behind is None or behind.bounded):
                    unplaced[tp] = o.offset
            records = self.broker.record_times(unplaced) if unplaced else {}
            behinds.update(
                {tp: record_lag(behinds[tp], record, now) for tp, record in records.items()}
            )
        rows = []
        for o in committed:
            end = ends.get(o.topic_partition)
            behind = behinds[o.topic_partition]
            rows.append(
                PartitionLag(
                    topic=o.topic,
                    partition=o.partition,
                    committed_offset=o.offset,
                    log_end_offset=end,
                    lag=lag(o.offset, end),
                    leader_epoch=o.leader_epoch,
                    metadata=o.metadata,
                    commit_timestamp_ms=o.commit_timestamp_ms,
                    expire_timestamp_ms=o.expire_timestamp_ms,
                    lag_seconds=None if behind is None else behind.lag_ms / 1000,
                    lag_seconds_bounded=behind is not None and behind.bounded,
                )
            )
        return GroupDescription(
            group_id,
            exists=True,
            partitions=tuple(rows),
            generation=listing.generation,
            members=listing.members,
        )

    def log_end_offsets(
        self, partitions: Iterable[TopicPartition], *, ask_broker: bool = True
    ) -> dict[TopicPartition, int]:
        """Log-end offsets of ``partitions``: those a mirror stores in the sink (refreshed on an
        interval from the mirrored cluster), the rest from the broker unless ``ask_broker`` is
        False (ValueError when the reader has no client options); a partition known to neither
        is left out."""
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
        of ``topics`` (the query's; None: those the group committed), partitions read from the
        data cluster; never-committed ones get ``missing``'s marker.

        Raises GROUP_ID_NOT_FOUND (69) for a group the sink does not know (unless
        ``unknown_group="missing"``: every partition gets the marker),
        UNKNOWN_TOPIC_OR_PARTITION (3) for a topic the cluster lacks, REQUEST_TIMED_OUT (7) when
        it cannot be reached. Reads the sink as it is now (``sink_currency`` waits for it).
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
        """The topic's partition ids from the data cluster; OffsetsError when it has no such
        topic or cannot be reached."""
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
