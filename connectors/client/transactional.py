"""Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447): the analogue of a producer's
``send_offsets_to_transaction``. The request goes to the group's ingest partition *through the
application's own transactional producer*, inside its open transaction, so it commits or aborts
with the application's output: the job reads its ingest topics ``read_committed``.
"""

from __future__ import annotations

import math
import struct
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Final

from connectors.client.answers import CommitResult, committed, outcome, request_error
from connectors.client.commit_client import OffsetCommitClient
from connectors.client.connection import set_exception
from connectors.client.errors import (
    ClientClosedError,
    CommitFailedError,
    CommitTimeoutError,
    OffsetsError,
    TopicsNotAvailable,
)
from connectors.client.requests import Offsets, ingest_message, partition_commits
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.requests import TxnOffsetCommitRequest
from state.formats.response_codec import Response

#: librdkafka's serialized ConsumerGroupMetadata (``rd_kafka_consumer_group_metadata_write``):
#: this magic, the generation (int32, host byte order), the group id, the member id, a byte
#: that is 1 when the group instance id is null, then the instance id; strings NUL-terminated.
_CGMD_MAGIC: Final = b"CGMDv2:"
#: Kafka's "no producer id / epoch" (``RecordBatch.NO_PRODUCER_ID``, ``NO_PRODUCER_EPOCH``).
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """Kafka's ``ConsumerGroupMetadata``: what a TxnOffsetCommit says of the consumer whose
    offsets it commits (generation -1 and no member: a group without members)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


def group_metadata(metadata: GroupMetadata | bytes | str) -> GroupMetadata:
    """``metadata`` as :class:`GroupMetadata`: itself, a group id (no member), or what
    confluent-kafka's ``Consumer.consumer_group_metadata()`` returns (librdkafka's serialized
    form, read here; ValueError if it is not that form)."""
    if isinstance(metadata, GroupMetadata):
        return metadata
    if isinstance(metadata, str):
        return GroupMetadata(metadata)
    data = bytes(metadata)
    if not data.startswith(_CGMD_MAGIC):
        raise ValueError("not a consumer group metadata of confluent-kafka (librdkafka)")
    at = len(_CGMD_MAGIC)
    (generation,) = struct.unpack_from("=i", data, at)
    strings = data[at + 4 :]
    group_id, member_id, rest = strings.split(b"\0", 2)
    instance_id = None if rest[:1] != b"\0" else rest[1:].split(b"\0", 1)[0].decode("utf-8")
    return GroupMetadata(
        group_id.decode("utf-8"), generation, member_id.decode("utf-8"), instance_id
    )


class PendingTxnCommit:
    """A TxnOffsetCommit written into an open transaction. Its answer comes only once that
    transaction commits (:meth:`result`); an aborted transaction's request is never seen by the
    job, so it is never answered: call :meth:`forget` after ``abort_transaction``."""

    def __init__(
        self,
        request: TxnOffsetCommitRequest,
        answer: Future[Response],
        forget: Callable[[str], None],
    ) -> None:
        self.request = request
        self._answer = answer
        self._forget = forget

    @property
    def group_id(self) -> str:
        return self.request.group_id

    def result(self, timeout_s: float = 30.0) -> CommitResult:
        """After ``commit_transaction``: the :class:`CommitResult` once the job applied it.
        Raises :class:`CommitFailedError` with the job's codes (e.g. ILLEGAL_GENERATION (22),
        which Kafka answers before the commit and the job only after it: the transaction's
        output is then committed without these offsets), COORDINATOR_NOT_AVAILABLE (15) with
        ``will_not_be_applied`` when its message was not delivered (an abort purges it),
        :class:`CommitTimeoutError` (7) with no answer in ``timeout_s`` (the transaction
        aborted, or the job is behind)."""
        request = self.request
        keys = [TopicPartition(c.topic, c.partition) for c in request.partitions]
        ids = [request.request_id]
        try:
            response = self._answer.result(timeout_s)
        except FutureTimeout:
            self.forget()
            code = ErrorCode.REQUEST_TIMED_OUT
            reason = (
                f"no answer within {timeout_s:g} s: the transaction was aborted or is still "
                "open, or the job has not reached its commit marker yet"
            )
            raise request_error(
                CommitTimeoutError, code, dict.fromkeys(keys, code), request.group_id, reason, ids
            ) from None
        except (NotDelivered, TopicsNotAvailable, ClientClosedError) as exc:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            raise request_error(
                CommitFailedError,
                code,
                dict.fromkeys(keys, code),
                request.group_id,
                str(exc),
                ids,
                will_not_be_applied=isinstance(exc, NotDelivered),
            ) from exc
        answer = outcome(response, keys)
        if not answer.ok:
            raise request_error(
                CommitFailedError,
                answer.main_code(),
                answer.codes,
                request.group_id,
                answer.describe(),
                ids,
            )
        return CommitResult(request.group_id, committed(request.partitions), tuple(ids))

    def forget(self) -> None:
        """Stop waiting for the answer (after ``abort_transaction``, which means none comes)."""
        self._forget(self.request.request_id)


class TransactionalCommitter(OffsetCommitClient):
    """Writes TxnOffsetCommit requests into an application's Kafka transaction.

    With confluent-kafka (``producer`` built with ``transactional.id``, after
    ``init_transactions()`` and inside ``begin_transaction()``)::

        with TransactionalCommitter(config) as committer:
            producer.begin_transaction()
            producer.produce(output_topic, value)
            pending = committer.send_offsets_to_transaction(
                producer, "my-txn-id", {("in", 0): 42}, consumer.consumer_group_metadata()
            )
            producer.commit_transaction()
            pending.result()  # or producer.abort_transaction(); pending.forget()

    kafka-python 2.1+ works the same: ``KafkaProducer(transactional_id="my-txn-id", ...)``,
    ``init_transactions()``, ``begin_transaction()``, then this call (it ``send``s the request
    inside the transaction) and ``commit_transaction()``; pass the group as a
    :class:`GroupMetadata` (kafka-python has no ``consumer_group_metadata()``).

    The request carries ``producer_id``/``producer_epoch`` when the caller knows them; neither
    client tells them (librdkafka keeps its producer id internal), so they default to -1: the
    job gets its atomicity from the transaction itself, not from these fields. A TxnOffsetCommit
    has no deadline: the job reads it once its transaction committed and applies it however
    late, as Kafka applies it at the commit marker. A transaction left open holds every later
    request of the groups on its ingest partition until it ends (the job reads
    ``read_committed``): keep ``transaction.timeout.ms`` short.
    """

    def send_offsets_to_transaction(
        self,
        producer: Any,
        transactional_id: str,
        offsets: Offsets,
        group: GroupMetadata | bytes | str,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        timeout_s: float | None = None,
    ) -> PendingTxnCommit:
        """Write ``offsets`` (partition -> next offset, or offset-like) for ``group`` (a
        :class:`GroupMetadata`, a group id, or confluent-kafka's consumer group metadata) into
        ``producer``'s open transaction: produced to the group's ingest partition, keyed by its
        group id, as a commit of this client is. Returns at once (confluent-kafka's delivery
        comes with ``commit_transaction``); ``timeout_s`` bounds the wait for the job's topics.
        Raises as :meth:`commit` does for malformed offsets, and what ``producer`` raises."""
        metadata = group_metadata(group)
        request = TxnOffsetCommitRequest(
            request_id=str(uuid.uuid4()),
            group_id=metadata.group_id,
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=tuple(partition_commits(offsets)),
            generation_id=metadata.generation_id,
            member_id=metadata.member_id,
            group_instance_id=metadata.group_instance_id,
        )
        message = ingest_message(request)
        deadline = time.monotonic() + self._timeout(timeout_s)
        try:
            connection = self._ensure_started(deadline)
        except TopicsNotAvailable as exc:
            raise OffsetsError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from None
        reader = connection.reader
        # No deadline: the answer comes when the application commits, however late.
        answer = reader.expect(request.request_id, math.inf)
        partition = message.partition(connection.ingest_partitions)
        try:
            _produce(
                producer,
                connection.ingest_topic,
                partition,
                message.key,
                message.value,
                lambda error: _not_delivered(error, request.request_id, answer, reader.forget),
            )
        except BaseException:
            reader.forget(request.request_id)
            raise
        return PendingTxnCommit(request, answer, reader.forget)


class NotDelivered(Exception):
    """The request's message was not delivered (e.g. purged by ``abort_transaction``): its
    transaction cannot commit it, so the job never applies it."""


def _not_delivered(
    error: Any, request_id: str, answer: Future[Response], forget: Callable[[str], None]
) -> None:
    forget(request_id)
    set_exception(
        answer,
        NotDelivered(
            f"its message was not delivered to the ingest topic ({error}): the transaction "
            "cannot commit it, so it will not be applied"
        ),
    )


def _produce(
    producer: Any,
    topic: str,
    partition: int,
    key: bytes,
    value: bytes,
    failed: Callable[[Any], None],
) -> None:
    """Send one record with confluent-kafka's ``produce`` or kafka-python's ``send``;
    ``failed(error)`` if its delivery fails."""
    if hasattr(producer, "produce"):

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failed(error)

        producer.produce(topic, value=value, key=key, partition=partition, on_delivery=delivered)
        producer.poll(0)  # serve earlier delivery callbacks
        return
    future = producer.send(topic, value=value, key=key, partition=partition)
    future.add_errback(failed)
