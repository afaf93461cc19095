"""Durable writes of encoded messages from the driver (librdkafka): ``acks=all`` and idempotent,
so a shard's records keep their order and a retry writes none twice. A refused message fails the
whole batch (:class:`DeliveryError`); the restart replays it, to the same records and answers.

With a ``transactional.id`` the messages of a batch go in one Kafka transaction
(:meth:`DurableProducer.begin`, :meth:`~DurableProducer.commit`): read_committed readers see all of
them at the commit or, aborted, none. The id is the deployment's, shared by the active job and its
standby: the producer's ``init_transactions`` (when it connects) aborts the previous holder's open
transaction and fences its producer, whose next write raises :class:`ProducerFenced`."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from connectors.kafka.client_options import librdkafka_options

log = logging.getLogger(__name__)

#: Under the user's options: a micro-batch is one burst then a flush, so large batches cost no
#: latency.
PRODUCER_DEFAULTS: Mapping[str, Any] = {
    "linger.ms": 2,
    "batch.size": 1024 * 1024,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1024 * 1024,
    "message.max.bytes": 8 * 1024 * 1024,
}

#: Not overridable: every in-sync replica acknowledges; once and in order per partition. Only a
#: failed message calls back (``flush`` counts failures): a callback per delivered message cost
#: ~20% of the producer's CPU (200k messages: 0.39 → 0.31 s).
_DURABLE = {"acks": "all", "enable.idempotence": True, "delivery.report.only.error": True}

#: How long ``init_transactions`` may take: it waits for the previous holder's open transaction
#: to be aborted.
INIT_TRANSACTIONS_TIMEOUT_S = 60.0

#: librdkafka's codes for a producer whose transactional.id was taken by a newer instance.
_FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED})


class DeliveryError(RuntimeError):
    """Kafka did not take every message of a batch."""


class ProducerFenced(DeliveryError):
    """Another producer initialised this producer's ``transactional.id``: another job of the
    deployment writes now. Fatal: this producer never writes (nor initialises) again."""


class DurableProducer:
    """Sends messages and waits until all are acknowledged (:meth:`flush`); with a
    ``transactional_id``, in transactions of ``transaction_timeout_ms`` at most."""

    def __init__(
        self,
        bootstrap_servers: str,
        kafka_options: Mapping[str, str],
        compression: str,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
    ) -> None:
        config = dict(PRODUCER_DEFAULTS)
        config.update(librdkafka_options(bootstrap_servers, kafka_options))
        config["compression.type"] = compression
        config.update(_DURABLE)
        if transactional_id is not None:
            config["transactional.id"] = transactional_id
            config["transaction.timeout.ms"] = transaction_timeout_ms
        # librdkafka's lines go through logging, where the job's outage line folds them.
        config["logger"] = logging.getLogger("librdkafka")
        # One callback for the producer, not one per message: 200k messages queued in
        # 0.54 → 0.35 s.
        config["on_delivery"] = self._delivered
        self._config = config
        self.transactional_id = transactional_id
        self._producer: Producer | None = None
        self._fenced: ProducerFenced | None = None
        self._failures: list[str] = []
        self._failed = 0

    def _client(self) -> Producer:
        if self._fenced is not None:
            raise self._fenced
        if self._producer is None:
            producer = Producer(self._config)
            if self.transactional_id is not None:
                self._call(producer, "init_transactions", INIT_TRANSACTIONS_TIMEOUT_S)
            self._producer = producer
        return self._producer

    def _call(self, producer: Producer, method: str, *args: Any) -> None:
        """``producer.method(*args)``, its KafkaException turned into ours."""
        call: Callable[..., None] = getattr(producer, method)
        try:
            call(*args)
        except (KafkaException, SystemError) as error:
            raise self._failure(error, method) from error

    def _failure(self, error: BaseException, what: str) -> DeliveryError:
        """Our error for librdkafka's ``error``: ProducerFenced (remembered) when fenced."""
        cause = _kafka_error(error)
        if cause is not None and cause.code() in _FENCED_CODES:
            self._fenced = ProducerFenced(
                f"producer fenced: another job of this deployment took over (transactional.id "
                f"{self.transactional_id!r} initialised by a newer producer): {what}: "
                f"{cause.str()}"
            )
            self._producer = None
            return self._fenced
        return DeliveryError(f"producer failed: {what}: {error}")

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failed += 1
            if len(self._failures) < 5:
                self._failures.append(
                    f"{message.topic()}[{message.partition()}]: {error.str()} ({error.name()})"
                )

    def send(
        self,
        topic: str,
        keys: Iterable[bytes | None],
        values: Iterable[bytes | None],
        partitions: Iterable[int] | None = None,
    ) -> int:
        """Queue messages (in order per partition); returns how many. Partitions default to
        librdkafka's partitioner over the key."""
        producer = self._client()
        produce, poll = producer.produce, producer.poll
        # -1 (librdkafka's RD_KAFKA_PARTITION_UA): the partitioner chooses.
        chosen = itertools.repeat(-1) if partitions is None else partitions
        count = 0
        try:
            for key, value, partition in zip(keys, values, chosen, strict=partitions is not None):
                while True:
                    try:
                        produce(topic, value, key, partition)
                        break
                    except BufferError:
                        poll(0.01)  # the local queue is full: let deliveries drain it
                count += 1
            poll(0)
        except (KafkaException, SystemError) as error:
            raise self._failure(error, "produce") from error
        return count

    def flush(self, timeout_s: float) -> None:
        """Wait until every queued message is acknowledged; raise if any was not."""
        producer = self._client()
        try:
            left = producer.flush(timeout_s)
        except (KafkaException, SystemError) as error:
            # SystemError: confluent-kafka raises a fatal error (fenced) inside the delivery
            # callback it runs next; the KafkaException is its cause.
            failure = self._failure(error, "flush")
            self._after_failure()
            raise failure from error
        failed, failures = self._failed, self._failures
        if left or failed:
            self._after_failure()
            detail = "; ".join(failures) or f"{left} messages unacknowledged after {timeout_s} s"
            raise DeliveryError(f"{failed + left} messages not written: {detail}")

    def begin(self) -> None:
        """Open a transaction (transactional mode; else nothing)."""
        if self.transactional_id is not None:
            self._call(self._client(), "begin_transaction")

    def commit(self, timeout_s: float) -> None:
        """Wait until every queued message is acknowledged, then (transactional mode) commit
        the transaction; raise if either failed (then :meth:`abort`)."""
        self.flush(timeout_s)
        if self.transactional_id is not None:
            self._call(self._client(), "commit_transaction", timeout_s)

    def abort(self, timeout_s: float) -> None:
        """Abort the open transaction, if any, so that no read_committed reader sees its
        messages; :class:`ProducerFenced` when this producer was fenced (then the newer one's
        ``init_transactions`` aborted it). Else best effort: a transaction this producer cannot
        abort is aborted by the broker (at the next ``init_transactions`` of this id, or after
        ``transaction.timeout.ms``)."""
        if self._fenced is not None:
            raise self._fenced
        if self.transactional_id is None or self._producer is None:
            self._reset()
            return
        try:
            self._producer.abort_transaction(timeout_s)
            self._failures, self._failed = [], 0
        except (KafkaException, SystemError) as error:
            # A fenced producer's send or flush may fail without saying why: the abort says.
            failure = self._failure(error, "abort")
            self._reset()
            if isinstance(failure, ProducerFenced):
                raise failure from error
            log.warning("could not abort the transaction: %s", failure)

    def _after_failure(self) -> None:
        """Without transactions, a new producer; with, the same one until :meth:`abort`."""
        if self.transactional_id is None:
            self._reset()

    def _reset(self) -> None:
        """A new producer: after a failure the old one's idempotence state may be unusable."""
        self._failures, self._failed = [], 0
        self._producer = None

    def close(self, timeout_s: float = 10.0) -> None:
        if self._producer is not None:
            try:
                self._producer.flush(timeout_s)
            except (KafkaException, SystemError) as error:
                log.warning("closing the producer: %s", self._failure(error, "close"))
            self._producer = None


def _kafka_error(error: BaseException | None) -> KafkaError | None:
    """The KafkaError carried by ``error`` or by the exception that caused it."""
    while error is not None:
        if isinstance(error, KafkaException) and isinstance(error.args[0], KafkaError):
            return error.args[0]
        error = error.__cause__ or error.__context__
    return None
