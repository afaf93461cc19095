"""Open transactions on an ingest partition, read from a real broker: the last stable offset
below the high watermark while one is open, the groups' partitions its TxnOffsetCommit requests
name, the oldest record's time, and a bounded read that fails safe."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from kafka import KafkaConsumer

from connectors.kafka.open_transactions import OpenTransactions
from state.coordinator.model import TopicPartition
from state.coordinator.requests import PartitionCommit, TxnOffsetCommitRequest
from state.formats.request_codec import encode_request
from tests.connectors.kafka.transactions import Committer
from tests.fixtures.kafka import TopicFactory

ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)

T = TypeVar("T")


def eventually(read: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 10.0) -> T:
    """``read()`` until ``done`` says its answer is the one awaited (else the last answer)."""
    deadline = time.monotonic() + timeout_s
    while not done(answer := read()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return answer


@pytest.fixture
def consumer(kafka_bootstrap: str) -> Iterator[KafkaConsumer]:
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=None)
    yield consumer
    consumer.close()


def test_an_open_transaction_holds_its_partition_and_names_the_groups_partitions(
    kafka_bootstrap: str, topic_factory: TopicFactory, consumer: KafkaConsumer
) -> None:
    ingest = topic_factory(partitions=2)
    held, free = TopicPartition(ingest, 0), TopicPartition(ingest, 1)
    committer = Committer(kafka_bootstrap, ingest)
    committer.begin()  # a transaction before: committed, then not read
    committer.send("h", 0, b'{"version": 1}')
    committer.commit()
    before_ms = int(time.time() * 1000)
    committer.begin()
    committer.txn_offset_commit("g", 0, {("orders", 0): 5})
    committer.send("h", 0, b"not a request")  # another group's message: skipped by its key
    with OpenTransactions({"bootstrap_servers": kafka_bootstrap}, consumer) as transactions:
        states = transactions.read([held, free], groups={"g", "h"})
        state = states[held]
        assert (state.last_stable_offset, state.high_watermark, state.held) == (2, 4, True)
        assert state.complete and state.pending == {"g": frozenset({ORDERS_0})}
        assert state.oldest_timestamp_ms is not None and state.oldest_timestamp_ms >= before_ms
        assert state.unstable("g", [ORDERS_0, ORDERS_1]) == {ORDERS_0}
        assert state.unstable("h", [ORDERS_0]) == set()
        assert not states[free].held and states[free].oldest_timestamp_ms is None
        # Only the keys asked for are decoded.
        assert transactions.read([held], groups={"h"})[held].pending == {}
        committer.commit()  # the markers are written after it returns
        after = eventually(
            lambda: transactions.read([held], groups={"g"})[held], lambda s: not s.held
        )
        assert not after.held and after.pending == {} and after.first_offset == 5
        # Committed past the job's progress: still pending to a reader of its sink.
        behind = transactions.read([held], groups={"g"}, since={held: 2})[held]
        assert behind.pending == {"g": frozenset({ORDERS_0})}
        assert behind.oldest_timestamp_ms is None  # nothing after the LSO


def test_a_read_past_its_bound_takes_every_partition_as_pending(
    kafka_bootstrap: str, topic_factory: TopicFactory, consumer: KafkaConsumer
) -> None:
    """Only records keyed by the asked group count toward the bounds (records and decoded
    bytes); past either the read is incomplete and every partition pending."""
    ingest = topic_factory()
    tp = TopicPartition(ingest, 0)
    committer = Committer(kafka_bootstrap, ingest)
    committer.begin()
    for n in range(3):
        committer.send("g", 0, b"x%d" % n)
        committer.send("other", 0, b"y%d" % n)  # another group's: not counted
    committer.txn_offset_commit("g", 0, {("orders", 0): 5})
    options = {"bootstrap_servers": kafka_bootstrap}
    with OpenTransactions(options, consumer, max_records=3) as transactions:
        state = transactions.read([tp], groups={"g"})[tp]
        assert state.held and not state.complete and state.pending == {}
        assert state.unstable("g", [ORDERS_1]) == {ORDERS_1}  # fail safe: not a stale offset
    with OpenTransactions(options, consumer, max_records=4) as transactions:
        state = transactions.read([tp], groups={"g"})[tp]
        assert state.complete and state.unstable("g", [ORDERS_1]) == set()
        assert state.pending == {"g": frozenset({ORDERS_0})}
    # The bytes decoded: the TxnOffsetCommit does not fit in 50 bytes after the three others.
    with OpenTransactions(options, consumer, max_decoded_bytes=50) as transactions:
        state = transactions.read([tp], groups={"g"})[tp]
        assert not state.complete and state.unstable("g", [ORDERS_1]) == {ORDERS_1}
    committer.abort()


def test_a_txn_offset_commit_not_keyed_by_its_group_is_pending_for_nobody(
    kafka_bootstrap: str, topic_factory: TopicFactory, consumer: KafkaConsumer
) -> None:
    """The job dead-letters a TxnOffsetCommit keyed otherwise than by its group: never applied,
    so never pending, whichever of the two groups is asked."""
    ingest = topic_factory()
    tp = TopicPartition(ingest, 0)
    committer = Committer(kafka_bootstrap, ingest)
    committer.begin()
    request = TxnOffsetCommitRequest(
        "r", "g", committer.transactional_id, 1, 0, (PartitionCommit("orders", 0, 5),)
    )
    committer.send("h", 0, encode_request(request))
    with OpenTransactions({"bootstrap_servers": kafka_bootstrap}, consumer) as transactions:
        state = transactions.read([tp], groups={"g", "h"})[tp]
        assert state.held and state.complete and state.pending == {}
    committer.abort()
