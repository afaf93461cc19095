"""The cluster's offsets through one kafka-python consumer without a group: log end, log start,
by time, the records at committed offsets, and open transactions on ingest partitions
(:mod:`connectors.kafka.open_transactions`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from connectors.closing import CloseOnExit
from connectors.kafka import batch_decoding  # noqa: F401  (zstd batches over 1 MiB)
from connectors.kafka.admin import list_offsets
from connectors.kafka.open_transactions import OpenTransactions
from connectors.sinks.log_end_samples import RecordTime
from state.coordinator.model import TopicPartition

#: A partition's fetch when reading the record at a committed offset: one record is wanted.
_RECORD_FETCH_BYTES: Final = 64 * 1024


class BrokerOffsets(CloseOnExit):
    """Partition offsets from the cluster through one kafka-python consumer (no group); not
    thread-safe. Partitions the cluster does not know are left out of every answer (kafka-python
    would wait for them forever)."""

    def __init__(self, client_options: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        self._options = dict(client_options)
        self.timeout_s = timeout_s
        self._consumer: KafkaConsumer | None = None
        self._transactions: OpenTransactions | None = None

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

    @property
    def open_transactions(self) -> OpenTransactions:
        """Open transactions on ingest partitions, read through this reader's consumer."""
        if self._transactions is None:
            self._transactions = OpenTransactions(self._options, self._client(), self.timeout_s)
        return self._transactions

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
        if self._transactions is not None:
            self._transactions.close()
            self._transactions = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
