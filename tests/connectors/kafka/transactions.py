"""A committer's transactions on an ingest topic for the tests: confluent-kafka transactional
producers writing TxnOffsetCommit requests (key = group id) into partitions they name."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Producer

from state.coordinator.requests import PartitionCommit, TxnOffsetCommitRequest
from state.formats.request_codec import encode_request


class Committer:
    """One transactional producer; :meth:`begin` opens a transaction left open until
    :meth:`commit` or :meth:`abort`."""

    def __init__(self, bootstrap: str, ingest_topic: str, **config: str) -> None:
        """``config``: more librdkafka producer settings (e.g. ``{"compression.type": "zstd"}``
        as ``**{...}``)."""
        self.ingest_topic = ingest_topic
        self.transactional_id = f"committer-{uuid.uuid4().hex[:8]}"
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": self.transactional_id, **config}
        )
        self.producer.init_transactions(30)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def txn_offset_commit(
        self, group: str, partition: int, offsets: dict[tuple[str, int], int]
    ) -> None:
        """A TxnOffsetCommit of ``offsets`` for ``group``, to ``partition`` of the ingest topic,
        in the open transaction."""
        request = TxnOffsetCommitRequest(
            request_id=uuid.uuid4().hex,
            group_id=group,
            transactional_id=self.transactional_id,
            producer_id=1,
            producer_epoch=0,
            partitions=tuple(PartitionCommit(t, p, o) for (t, p), o in offsets.items()),
        )
        self.send(group, partition, encode_request(request))

    def send(self, key: str, partition: int, value: bytes) -> None:
        """One message in the open transaction, delivered (else RuntimeError)."""
        failed: list[Any] = []
        self.producer.produce(
            self.ingest_topic,
            value,
            key.encode(),
            partition=partition,
            on_delivery=lambda err, _: failed.append(err) if err else None,
        )
        self.producer.flush(30)
        if failed:
            raise RuntimeError(f"not delivered to {self.ingest_topic}-{partition}: {failed[0]}")

    def commit(self) -> None:
        self.producer.commit_transaction(30)

    def abort(self) -> None:
        self.producer.abort_transaction(30)
