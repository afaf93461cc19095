"""Open transactions on ingest partitions: what RequireStable reads and serve's stall metric show.

A transaction left open on an ingest partition holds its last stable offset (LSO, the
read_committed end) below the high watermark (HW): the job, reading read_committed, stops there.
:class:`OpenTransactions` reads both ends and, where records remain unapplied, reads them
read_uncommitted: the oldest timestamp after the LSO (how long the partition is held) and the
partitions each group names in TxnOffsetCommit requests (Kafka's pending transactional offsets:
OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT (88) on them).

As in Kafka, only what the job would apply counts: a TxnOffsetCommit keyed by its group id (the
job dead-letters any other) on the operators' ingest topic, or on a tenant's whose ACLs let it
WRITE the transactional id, READ the group and each topic (``authorized_txn_partitions``); the
ingest topic of a tenant that may not READ the group is not read at all. Only records keyed by
an asked group are counted and decoded, at most :data:`MAX_RECORDS` and
:data:`MAX_DECODED_BYTES` a partition: past either the read is incomplete and fails safe (88).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import UnknownTopicOrPartitionError

from connectors.closing import CloseOnExit
from connectors.kafka import batch_decoding  # noqa: F401  (zstd batches over 1 MiB)
from connectors.kafka.admin import list_offsets
from state.coordinator.acls import (
    AclOperation,
    Authorizer,
    ResourceType,
    authorized_txn_partitions,
)
from state.coordinator.model import TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import TxnOffsetCommitRequest
from state.formats.request_codec import decode_request

#: Seconds an ingest topic's partitions are asked for before it is taken as missing.
METADATA_WAIT_S: Final = 5.0
#: Records of the asked groups read per ingest partition at most (records of other groups are
#: skipped by key, not counted). Past it the read is incomplete: every group is taken as pending
#: there (88, never a stale offset shown as stable) until the partition's unapplied records
#: fall below it again.
MAX_RECORDS: Final = 10_000
#: Value bytes decoded per ingest partition at most: decoding costs ~0.25 s of CPU per MB (a
#: ~1 MB request names ~25k partitions), so one partition's read costs at most ~0.25 s and the
#: partitions it keeps are bounded with it. One record of Kafka's default ``max.message.bytes``
#: fits; past it the read is incomplete (88), as past :data:`MAX_RECORDS`.
MAX_DECODED_BYTES: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class IngestPartitionState:
    """One ingest partition as read: its ends, where the read began (``first_offset``: the LSO,
    or the job's progress below it) and what it found there."""

    partition: TopicPartition
    last_stable_offset: int
    high_watermark: int
    first_offset: int
    #: The oldest timestamp of the records read at or after the LSO (None: none read).
    oldest_timestamp_ms: int | None = None
    #: Group id -> the partitions its TxnOffsetCommit requests in the records read name.
    pending: Mapping[str, frozenset[TopicPartition]] = field(default_factory=dict)
    #: Every record from ``first_offset`` to the HW was read (not past :data:`MAX_RECORDS` or
    #: :data:`MAX_DECODED_BYTES`, nor the timeout).
    complete: bool = True

    @property
    def held(self) -> bool:
        """An open transaction holds the partition: its LSO is below its HW."""
        return self.last_stable_offset < self.high_watermark

    def unstable(self, group_id: str, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Those of ``partitions`` the group has a pending transactional offset on: every one
        when the read was incomplete (fail safe)."""
        wanted = set(partitions)
        if not self.complete:
            return wanted
        return wanted & self.pending.get(group_id, frozenset())


class OpenTransactions(CloseOnExit):
    """Reads ingest partitions' open transactions through kafka-python: ``uncommitted`` (a
    read_uncommitted consumer without a group, e.g. the log-end reader's) gives HWs and reads
    records; a read_committed consumer of ``client_options``, made on first use, gives LSOs.
    Not thread-safe; ``close`` closes only the consumer made here."""

    def __init__(
        self,
        client_options: Mapping[str, Any],
        uncommitted: KafkaConsumer,
        timeout_s: float = 30.0,
        max_records: int = MAX_RECORDS,
        max_decoded_bytes: int = MAX_DECODED_BYTES,
    ) -> None:
        if max_records < 1:
            raise ValueError(f"max_records must be >= 1, got {max_records}")
        if max_decoded_bytes < 1:
            raise ValueError(f"max_decoded_bytes must be >= 1, got {max_decoded_bytes}")
        self._options = dict(client_options)
        self._uncommitted = uncommitted
        self._committed: KafkaConsumer | None = None
        self.timeout_s = timeout_s
        self.max_records = max_records
        self.max_decoded_bytes = max_decoded_bytes

    def _stable(self) -> KafkaConsumer:
        if self._committed is None:
            self._committed = KafkaConsumer(
                **{
                    "client_id": "consumer-offsets-open-transactions",
                    **self._options,
                    "isolation_level": "read_committed",
                    "group_id": None,
                    "enable_auto_commit": False,
                    "allow_auto_create_topics": False,
                }
            )
        return self._committed

    def read(
        self,
        partitions: Iterable[TopicPartition],
        *,
        groups: Collection[str] | None = None,
        since: Mapping[TopicPartition, int] | None = None,
        max_records: int | None = None,
        rules: Mapping[str, Authorizer] | None = None,
    ) -> dict[TopicPartition, IngestPartitionState]:
        """The state of each of ``partitions`` the cluster has.

        Records are read from the LSO, or from ``since[tp]`` where that is below it (the job's
        progress: committed requests it has not applied are as pending to a reader of its
        sink), up to the HW. Only the requests keyed by one of ``groups`` (None: every group)
        are counted and decoded, at most ``max_records`` (default :data:`MAX_RECORDS`) and
        :data:`MAX_DECODED_BYTES` a partition: the key of an ingest message is its group id, and
        a TxnOffsetCommit whose ``groupId`` is not its key is not applied by the job, so not
        pending. ``rules``: ingest topic -> its tenant's ACLs (a topic without: the operators',
        everything counts); a TxnOffsetCommit names only the partitions they let it commit.
        ``groups=()``: the oldest timestamp only, every record counted (with ``max_records=1``
        the record at the LSO, the open transaction's first).
        """
        asked = [TopicPartition(*tp) for tp in partitions]
        known = {t: self._uncommitted.partitions_for_topic(t) or set() for t, _ in set(asked)}
        # Partitions the cluster lacks are left out: kafka-python would wait for them.
        wanted = [KafkaTopicPartition(t, p) for t, p in asked if p in known[t]]
        if not wanted:
            return {}
        deadline = time.monotonic() + self.timeout_s
        stable = list_offsets(self._stable().end_offsets, wanted, self.timeout_s)
        high = list_offsets(self._uncommitted.end_offsets, wanted, deadline - time.monotonic())
        states: dict[TopicPartition, IngestPartitionState] = {}
        starts: dict[KafkaTopicPartition, int] = {}
        for ktp in wanted:
            if ktp not in stable or ktp not in high:
                continue
            tp = TopicPartition(ktp.topic, ktp.partition)
            lso, hw = stable[ktp], high[ktp]
            first = min(lso, max(0, (since or {}).get(tp, lso)))
            states[tp] = IngestPartitionState(tp, lso, hw, first)
            if first < hw:
                starts[ktp] = first
        if starts:
            keys = None if groups is None else {g.encode() for g in groups}
            limit = self.max_records if max_records is None else max_records
            scans = {
                ktp: _Scan(
                    stable[ktp],
                    high[ktp],
                    keys,
                    limit,
                    self.max_decoded_bytes,
                    (rules or {}).get(ktp.topic),
                )
                for ktp in starts
            }
            for tp, found in self._scan(starts, scans, deadline).items():
                states[tp] = found.state_of(states[tp])
        return states

    def unstable(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        applied: Mapping[str, Mapping[int, int]],
        rules: Mapping[str, Authorizer] | None = None,
    ) -> set[TopicPartition]:
        """Those of ``partitions`` the group has a pending transactional offset on, as a reader
        of the job's sink sees it: named by a TxnOffsetCommit on the group's partition of an
        ingest topic of ``applied`` (topic -> the job's progress by partition) that the job has
        not applied, in a transaction still open or committed past its progress (none
        recorded: from the log's start); every one where the read is incomplete or a
        partition's ends are not answered (fail safe). ``rules``: a tenant's ingest topic ->
        its ACLs, as :meth:`read` takes them; a topic whose tenant may not READ the group is
        not read (nothing there can be applied to it). UnknownTopicOrPartitionError for an
        ingest topic the cluster does not have.
        """
        wanted = {TopicPartition(*tp) for tp in partitions}
        if not wanted:
            return set()
        rules = rules or {}
        shards: dict[TopicPartition, int] = {}
        for topic, progress in applied.items():
            acls = rules.get(topic)
            if acls is not None and not acls.authorize(
                ResourceType.GROUP, group_id, AclOperation.READ
            ):
                continue
            shard = partition_for(group_id, self._partition_count(topic))
            shards[TopicPartition(topic, shard)] = progress.get(shard, 0)
        if not shards:
            return set()
        states = self.read(shards, groups={group_id}, since=shards, rules=rules)
        if len(states) < len(shards):  # an ingest partition without both ends: unknown
            return wanted
        unstable: set[TopicPartition] = set()
        for state in states.values():
            unstable |= state.unstable(group_id, wanted)
        return unstable

    def _partition_count(self, topic: str) -> int:
        """The ingest topic's partition count, asked again for up to :data:`METADATA_WAIT_S`
        (a new client's first metadata request can fail); UnknownTopicOrPartitionError after:
        whether a group has offsets pending there cannot be known."""
        deadline = time.monotonic() + min(self.timeout_s, METADATA_WAIT_S)
        while not (found := self._uncommitted.partitions_for_topic(topic)):
            if time.monotonic() >= deadline:
                raise UnknownTopicOrPartitionError(f"ingest topic {topic!r}: no partitions known")
            time.sleep(0.2)
        return len(found)

    def _scan(
        self,
        starts: Mapping[KafkaTopicPartition, int],
        scans: Mapping[KafkaTopicPartition, _Scan],
        deadline: float,
    ) -> dict[TopicPartition, _Scan]:
        """Each partition's records from ``starts`` to its HW into its ``scans`` entry, until
        it is past its bounds; the consumer is left with no assignment."""
        consumer = self._uncommitted
        consumer.assign(list(starts))
        try:
            for ktp, offset in starts.items():
                consumer.seek(ktp, offset)
            open_ = set(starts)
            while open_ and (left := deadline - time.monotonic()) > 0:
                polled = consumer.poll(timeout_ms=max(1, int(left * 1000)), max_records=500)
                for ktp, records in polled.items():
                    if ktp in open_:
                        scans[ktp].add(records)
                for ktp in list(open_):
                    # Markers are not returned as records: the position tells the end.
                    scan = scans[ktp]
                    scan.complete = not scan.past_limit and consumer.position(ktp) >= scan.end
                    if scan.complete or scan.past_limit:
                        open_.discard(ktp)
                        consumer.pause(ktp)
        finally:
            consumer.unsubscribe()  # the paused state would outlive a later assignment
        return {TopicPartition(ktp.topic, ktp.partition): scan for ktp, scan in scans.items()}

    def close(self) -> None:
        if self._committed is not None:
            self._committed.close()
            self._committed = None


@dataclass(slots=True)
class _Scan:
    """What the records of one partition read so far hold: those keyed by one of ``keys``
    (None: every record) counted and decoded, up to ``limit`` of them and ``max_bytes`` of
    their values; ``rules``: the ACLs of the tenant whose topic it is (None: the operators')."""

    lso: int
    end: int
    keys: set[bytes] | None
    limit: int
    max_bytes: int
    rules: Authorizer | None = None
    count: int = 0
    decoded_bytes: int = 0
    #: Records came past a bound: not read.
    past_limit: bool = False
    complete: bool = False
    oldest_ms: int | None = None
    pending: dict[str, set[TopicPartition]] = field(default_factory=dict)

    def add(self, records: list[Any]) -> None:
        keys = self.keys
        # groups=(): read for the oldest timestamp only, so every record counts.
        counts_all = not keys
        for record in records:
            if self.past_limit:
                return
            stamp = -1 if record.offset < self.lso else record.timestamp  # -1: v0, no time
            if (
                stamp is not None
                and stamp >= 0
                and (self.oldest_ms is None or stamp < self.oldest_ms)
            ):
                self.oldest_ms = stamp
            key = record.key
            if not counts_all and keys is not None and key not in keys:
                continue  # another group's request: neither counted nor decoded
            if self.count >= self.limit:
                self.past_limit = True
                return
            self.count += 1
            if keys is not None and not keys:
                continue
            value = record.value
            size = 0 if value is None else len(value)
            if self.decoded_bytes + size > self.max_bytes:
                self.past_limit = True
                return
            self.decoded_bytes += size
            request = decode_request(value)
            if not isinstance(request, TxnOffsetCommitRequest):
                continue
            if key is None or key != request.group_id.encode("utf-8"):
                continue  # the job dead-letters it (``keyed_request``): never applied
            named = authorized_txn_partitions(self.rules, request)
            if named:
                self.pending.setdefault(request.group_id, set()).update(named)

    def state_of(self, read: IngestPartitionState) -> IngestPartitionState:
        return IngestPartitionState(
            read.partition,
            read.last_stable_offset,
            read.high_watermark,
            read.first_offset,
            self.oldest_ms,
            {group: frozenset(named) for group, named in self.pending.items()},
            self.complete,
        )
