"""The soak's steady load, in a child process of its own (its memory is measured apart).

Three sources, each with the model its verification needs:

- **raw producers** (librdkafka, as ``tests/bench/load.py``): OffsetCommit requests at a fixed
  rate, round-robin over ``groups`` groups, each request committing ``partitions_per_request``
  partitions of one of ``topics`` topics (the group's next topic each round); offsets differ per
  group and partition (:func:`tests.bench.load.group_positions`). Answers are read from the
  responses topic: ack time = request produced → its answer consumed. A request the job reaches
  after its deadline (the job's ``request_timeout_ms``, 60 s, from its ingest timestamp: after a
  long outage) is answered REQUEST_TIMED_OUT (7) and applies nothing; any other error is a
  failure. One idempotent producer keeps a group's requests in order on its shard, so the model
  is, per (group, topic), the request answered with success that has the highest ingest offset.
- **the commit client** (:class:`connectors.client.OffsetCommitClient`, ``commit`` =
  commitSync): ``client_rate`` calls/s over groups of their own, each call waiting (with the
  client's retries) up to ``client_timeout_s``; a group's calls are sequential. A call that
  times out (a long outage: every attempt answered REQUEST_TIMED_OUT, or the last one may still
  apply) is counted; any other failure is a problem. When the load stops, each group commits
  once more, after every earlier attempt: the model is those closing commits.
- **Kafka's own consumer groups** (confluent-kafka) consuming a data topic and committing to the
  cluster's own group coordinator, for the mirror to copy.

The parent drives it through a pipe (:class:`LoadHandle`): ``window`` returns the figures since
the last window, ``mark`` asks for the first answer produced after a moment (recovery after a
fault, measured by the answer's CreateTime, which the job's producer stamps: a killed driver can
stamp nothing later), ``stop`` stops sending, waits until every request is answered (or
``drain_timeout_s``) and returns the models. Memory is bounded: only unanswered requests and the
current window's latencies are kept.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from state.coordinator.partitioner import partition_for
from tests.bench.load import commit_json, group_positions, positions_json


@dataclass(frozen=True)
class LoadSettings:
    """What the load child produces, and where."""

    bootstrap: str
    ingest_topic: str
    responses_topic: str
    #: Partitions of the ingest topic: a group's requests go to partition_for(group, this).
    ingest_partitions: int
    requests_per_s: float
    partitions_per_request: int
    groups: int
    topics: int
    client_rate: float
    client_groups: int
    client_timeout_s: float
    native_groups: int
    native_consumers_per_group: int
    data_topic: str
    data_rate: float
    tag: str
    seed: int = 1
    #: How long a raw request may wait in the producer's queue for a broker (librdkafka's
    #: ``message.timeout.ms``): longer than any Kafka outage the run makes.
    delivery_timeout_s: float = 600.0


def raw_group(i: int) -> str:
    return f"soak-g{i:05d}"


def client_group(i: int) -> str:
    return f"soak-client-g{i:03d}"


def native_group(i: int) -> str:
    return f"soak-native-g{i:02d}"


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50, p99 and max of ``values`` (None when empty), nearest-rank."""
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]

    return {"p50": rank(0.50), "p99": rank(0.99), "max": ordered[-1]}


#: Kafka's REQUEST_TIMED_OUT: the job reached the request after its deadline; nothing applied.
REQUEST_TIMED_OUT = 7
#: librdkafka's log level in the load (2 = critical): a broker down makes every client log
#: each failed connection; what matters is counted by the load itself.
_LOG_LEVEL = 2
#: Answers remembered after the first, to catch a replay answering a request differently.
_ANSWERED_MEMORY = 30_000
#: How often each of Kafka's own consumers commits its partitions (for the mirror).
NATIVE_COMMIT_INTERVAL_S = 1.0


@dataclass
class _Pending:
    """A raw request until its answer: when it was sent, what it commits, where it landed."""

    sent_at: float
    key: tuple[str, int]
    advance: int
    offset: int | None = None
    #: The answer, when it came before the producer's delivery report.
    ok: bool | None = None


@dataclass
class _Window:
    sent: int = 0
    answered: int = 0
    timed_out: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    client_calls: int = 0
    client_failures: int = 0
    client_timeouts: int = 0
    client_latencies: list[float] = field(default_factory=list)
    native_commits: int = 0
    native_messages: int = 0


class _Marks:
    """First answer produced after each marked moment (wall-clock ms)."""

    def __init__(self) -> None:
        self.pending: dict[str, int] = {}
        self.resolved: dict[str, float] = {}

    def add(self, name: str, at_ms: int) -> None:
        self.pending[name] = at_ms

    def answer(self, produced_ms: int) -> None:
        for name, at_ms in list(self.pending.items()):
            if produced_ms > at_ms:
                self.resolved[name] = (produced_ms - at_ms) / 1000
                del self.pending[name]


class LoadChild:
    """Everything that runs in the child: the three sources and the window figures."""

    def __init__(self, settings: LoadSettings) -> None:
        self.s = settings
        self.lock = threading.Lock()
        self.window = _Window()
        self.marks = _Marks()
        self.stop_sending = threading.Event()
        self.stop_reading = threading.Event()
        #: request id → the request, until it is answered and delivered.
        self.outstanding: dict[str, _Pending] = {}
        #: (group, topic index) → (ingest offset, advance) of the applied request last in log.
        self.last_applied: dict[tuple[str, int], tuple[int, int]] = {}
        #: Recent answers (request id → ok), to catch a later answer that differs.
        self.recent: OrderedDict[str, bool] = OrderedDict()
        self.conflicting_answers: list[str] = []
        #: Their request ids, in the same order.
        self.conflicting_ids: list[str] = []
        self.sent_total = 0
        self.answered_total = 0
        #: Requests delivered without a known log position (see ``_delivered``).
        self.unplaced = 0
        self.timed_out_total = 0
        self.error_answers: list[str] = []
        self.delivery_failures: list[str] = []
        self.client_model: dict[tuple[str, str, int], int] = {}
        self.client_calls = 0
        self.client_failures: list[str] = []
        self.client_timeouts: list[str] = []
        #: Calls the client refused at once with nothing sent (no broker answered): failed.
        self.client_not_sent: list[str] = []
        self.native_commit_errors = 0
        self.threads: list[threading.Thread] = []

    # -- raw producers -----------------------------------------------------------------------
    def _produce(self) -> None:
        s = self.s
        producer = Producer(
            {
                "bootstrap.servers": s.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                # A broker, or all of them, down for a while: keep retrying rather than give a
                # request up.
                "message.timeout.ms": int(s.delivery_timeout_s * 1000),
                "log_level": _LOG_LEVEL,
            }
        )
        groups = [raw_group(i) for i in range(s.groups)]
        advance = dict.fromkeys(groups, 0)
        started = time.monotonic()
        n = 0
        while not self.stop_sending.is_set():
            delay = started + n / s.requests_per_s - time.monotonic()
            if delay > 0:
                time.sleep(min(delay, 0.5))
                continue
            group = groups[n % len(groups)]
            advance[group] += 1
            a = advance[group]
            topic_index = a % s.topics
            request_id = f"{s.tag}-{n}"
            value = commit_json(
                request_id,
                group,
                f"soak-t{topic_index}",
                positions_json(group, s.partitions_per_request, a),
            )

            key = (group, topic_index)
            with self.lock:
                self.outstanding[request_id] = _Pending(time.monotonic(), key, a)
                self.sent_total += 1
                self.window.sent += 1
            while True:
                try:
                    producer.produce(
                        s.ingest_topic,
                        key=group.encode(),
                        value=value,
                        partition=partition_for(group, s.ingest_partitions),
                        on_delivery=lambda e, m, rid=request_id, k=key, adv=a: self._delivered(
                            e, m, rid, k, adv
                        ),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            n += 1
        left = producer.flush(600)
        if left:
            with self.lock:
                self.delivery_failures.append(f"{left} requests still queued at the end")

    def _delivered(
        self,
        error: KafkaError | None,
        message: Any,
        request_id: str,
        key: tuple[str, int],
        advance: int,
    ) -> None:
        with self.lock:
            pending = self.outstanding.get(request_id)
            if error is not None:
                # Given up by librdkafka, which cannot say whether a broker has it (possibly
                # in the log, answered, applied): the model cannot place it, so a problem. The
                # delivery timeout outlasts the run's Kafka outages, so none should be.
                self.outstanding.pop(request_id, None)
                self.delivery_failures.append(f"{request_id}: {error}")
                return
            if pending is None:
                return
            offset = message.offset()
            if offset is None:
                # Written at a position librdkafka did not learn (its report for a retried batch
                # the broker already had). Placed before every known position of its key: a
                # later request of the key wins in the model (if it was the key's last, sink =
                # model fails, which shows rather than hides it).
                self.unplaced += 1
                offset = -1
            pending.offset = offset
            if pending.ok is not None:  # answered before this report came
                self._settle(request_id, pending)

    def _settle(self, request_id: str, pending: _Pending) -> None:
        """The request is answered and its log position known: into the model if applied."""
        del self.outstanding[request_id]
        if not pending.ok or pending.offset is None:
            return
        previous = self.last_applied.get(pending.key)
        if previous is None or pending.offset > previous[0]:
            self.last_applied[pending.key] = (pending.offset, pending.advance)

    # -- answers -----------------------------------------------------------------------------
    def _read_answers(self) -> None:
        s = self.s
        # librdkafka reads read_committed by default: an answer counts once its batch committed.
        consumer = Consumer(
            {
                "bootstrap.servers": s.bootstrap,
                # Required by librdkafka; nothing is committed (partitions are assigned).
                "group.id": f"{s.tag}-answers",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "log_level": _LOG_LEVEL,
            }
        )
        try:
            metadata = consumer.list_topics(s.responses_topic, timeout=30)
            partitions = sorted(metadata.topics[s.responses_topic].partitions)
            ends = []
            for p in partitions:
                _low, high = consumer.get_watermark_offsets(
                    TopicPartition(s.responses_topic, p), timeout=30
                )
                ends.append(TopicPartition(s.responses_topic, p, high))
            consumer.assign(ends)
            while not self.stop_reading.is_set():
                for message in consumer.consume(num_messages=1000, timeout=0.2):
                    if message.error() is not None or message.key() is None:
                        continue
                    self._answered(message.key().decode(), message.value(), message.timestamp())
        finally:
            consumer.close()

    def _answered(self, request_id: str, value: bytes, timestamp: tuple[int, int]) -> None:
        now = time.monotonic()
        answer = json.loads(value)
        ok = answer["errorCode"] == 0 and not any(p["errorCode"] for p in answer["partitions"])
        timed_out = answer["errorCode"] == REQUEST_TIMED_OUT
        with self.lock:
            if ok:
                self.marks.answer(timestamp[1])
            earlier = self.recent.get(request_id)
            if earlier is not None:  # a replayed batch answers again: the same way
                if earlier != ok:
                    self.conflicting_answers.append(f"{request_id}: now {value[:300]!r}")
                    self.conflicting_ids.append(request_id)
                return
            pending = self.outstanding.get(request_id)
            if pending is None or pending.ok is not None:  # another run's request
                return
            self.recent[request_id] = ok
            if len(self.recent) > _ANSWERED_MEMORY:
                self.recent.popitem(last=False)
            pending.ok = ok
            self.answered_total += 1
            self.window.answered += 1
            self.window.latencies.append(now - pending.sent_at)
            if timed_out:
                self.timed_out_total += 1
                self.window.timed_out += 1
            elif not ok:
                self.window.errors += 1
                self.error_answers.append(f"{request_id}: {value[:300]!r}")
            if pending.offset is not None:
                self._settle(request_id, pending)

    # -- the commit client -------------------------------------------------------------------
    def _client_commits(self) -> None:
        from connectors.client import OffsetCommitClient
        from connectors.client.errors import CommitFailedError, CommitTimeoutError
        from state.coordinator.errors import ErrorCode

        s = self.s
        rng = random.Random(s.seed)
        groups = [client_group(i) for i in range(s.client_groups)]
        positions = dict.fromkeys(groups, 0)
        client = OffsetCommitClient(
            bootstrap_servers=s.bootstrap,
            ingest_topic=s.ingest_topic,
            responses_topic=s.responses_topic,
            client_id=f"{s.tag}-client",
            default_timeout_s=s.client_timeout_s,
        )

        def commit(group: str) -> bool:
            positions[group] += rng.randrange(1, 1_000)
            offsets = {("soak-client-topic", p): positions[group] + p for p in range(3)}
            at = time.monotonic()
            try:
                client.commit(group, offsets)
            except CommitTimeoutError as error:
                # commitSync's contract in a long outage: every attempt was answered
                # REQUEST_TIMED_OUT, or the last may still apply (Kafka's ambiguity). The
                # group's closing commit below settles what its offsets must be.
                with self.lock:
                    self.client_timeouts.append(f"{group}: {error}"[:300])
                    self.window.client_timeouts += 1
                return False
            except CommitFailedError as error:
                if not (
                    error.will_not_be_applied
                    and error.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
                ):
                    with self.lock:
                        self.client_failures.append(f"{group}: {error!r}"[:300])
                        self.window.client_failures += 1
                    return False
                # No broker reachable and nothing sent (a Kafka outage): failed, never applied.
                with self.lock:
                    self.client_not_sent.append(f"{group}: {error}"[:300])
                    self.window.client_timeouts += 1
                return False
            except Exception as error:  # any other failure is a problem
                with self.lock:
                    self.client_failures.append(f"{group}: {error!r}"[:300])
                    self.window.client_failures += 1
                return False
            elapsed = time.monotonic() - at
            with self.lock:
                for (topic, p), offset in offsets.items():
                    self.client_model[(group, topic, p)] = offset
                self.window.client_latencies.append(elapsed)
                self.marks.answer(int(time.time() * 1000))
            return True

        try:
            n = 0
            started = time.monotonic()
            while not self.stop_sending.is_set():
                delay = started + n / s.client_rate - time.monotonic()
                if delay > 0:
                    time.sleep(min(delay, 0.5))
                    continue
                commit(groups[n % len(groups)])
                with self.lock:
                    self.client_calls += 1
                    self.window.client_calls += 1
                n += 1
            # One closing commit per group, once the load stops: it lands after any earlier
            # attempt, so the model is exact even where a call timed out ambiguously.
            for group in groups:
                if not commit(group):
                    with self.lock:
                        self.client_failures.append(f"{group}: the closing commit failed")
                        for p in range(3):
                            self.client_model.pop((group, "soak-client-topic", p), None)
        finally:
            client.close()

    # -- Kafka's own consumer groups (for the mirror) ----------------------------------------
    def _data_producer(self) -> None:
        s = self.s
        producer = Producer(
            {"bootstrap.servers": s.bootstrap, "linger.ms": 20, "log_level": _LOG_LEVEL}
        )
        n = 0
        started = time.monotonic()
        while not self.stop_sending.is_set():
            delay = started + n / s.data_rate - time.monotonic()
            if delay > 0:
                time.sleep(min(delay, 0.5))
                continue
            with contextlib.suppress(BufferError):
                producer.produce(s.data_topic, value=f"m{n}".encode())
            producer.poll(0)
            n += 1
        producer.flush(60)

    def _native_consumer(self, group: str, index: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.s.bootstrap,
                "group.id": group,
                "client.id": f"{group}-{index}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "log_level": _LOG_LEVEL,
            }
        )
        consumer.subscribe([self.s.data_topic])
        last_commit = time.monotonic()
        try:
            while not self.stop_sending.is_set():
                messages = consumer.consume(num_messages=500, timeout=0.5)
                with self.lock:
                    self.window.native_messages += len(messages)
                if time.monotonic() - last_commit >= NATIVE_COMMIT_INTERVAL_S:
                    last_commit = time.monotonic()
                    try:
                        consumer.commit(asynchronous=False)
                        with self.lock:
                            self.window.native_commits += 1
                    except Exception:  # nothing consumed yet, a rebalance, a broker down
                        with self.lock:
                            self.native_commit_errors += 1
            with contextlib.suppress(Exception):
                consumer.commit(asynchronous=False)
        finally:
            consumer.close()

    # -- control -----------------------------------------------------------------------------
    def start(self) -> None:
        targets: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = [
            ("answers", self._read_answers, ()),
            ("raw", self._produce, ()),
        ]
        if self.s.client_rate > 0 and self.s.client_groups > 0:
            targets.append(("client", self._client_commits, ()))
        if self.s.native_groups > 0:
            targets.append(("data", self._data_producer, ()))
            for g in range(self.s.native_groups):
                for c in range(self.s.native_consumers_per_group):
                    targets.append((f"native-{g}-{c}", self._native_consumer, (native_group(g), c)))
        for name, target, args in targets:
            thread = threading.Thread(target=target, args=args, name=name, daemon=True)
            thread.start()
            self.threads.append(thread)

    def take_window(self) -> dict[str, Any]:
        with self.lock:
            window, self.window = self.window, _Window()
            waiting = [p.sent_at for p in self.outstanding.values() if p.ok is None]
            outstanding = len(waiting)
            oldest = min(waiting, default=None)
            marks = dict(self.marks.resolved)
        return {
            "sent": window.sent,
            "answered": window.answered,
            "timed_out": window.timed_out,
            "error_answers": window.errors,
            "ack_s": percentiles(window.latencies),
            "client_calls": window.client_calls,
            "client_failures": window.client_failures,
            "client_timeouts": window.client_timeouts,
            "client_s": percentiles(window.client_latencies),
            "native_commits": window.native_commits,
            "native_messages": window.native_messages,
            "outstanding": outstanding,
            "oldest_outstanding_s": None if oldest is None else time.monotonic() - oldest,
            "marks": marks,
        }

    def model(self) -> dict[tuple[str, str, int], int]:
        """The committed offsets the job must hold: raw requests' and the client's."""
        s = self.s
        model: dict[tuple[str, str, int], int] = {}
        with self.lock:
            applied = dict(self.last_applied)
            model.update(self.client_model)
        for (group, topic_index), (_offset, advance) in applied.items():
            positions = group_positions(group, s.partitions_per_request, advance)
            for p, offset in enumerate(positions):
                model[(group, f"soak-t{topic_index}", p)] = offset
        return model

    def stop(self, drain_timeout_s: float) -> dict[str, Any]:
        self.stop_sending.set()
        for thread in self.threads:
            if thread.name != "answers":
                thread.join(660)
        deadline = time.monotonic() + drain_timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if not self.outstanding:
                    break
            time.sleep(0.5)
        self.stop_reading.set()
        for thread in self.threads:
            thread.join(30)
        with self.lock:
            unanswered = sorted(self.outstanding)
        return {
            "window": self.take_window(),
            "sent": self.sent_total,
            "answered": self.answered_total,
            "timed_out": self.timed_out_total,
            "conflicting_answers": self.conflicting_answers[:20],
            "conflicting_ids": self.conflicting_ids[:20],
            "unanswered": len(unanswered),
            "unanswered_sample": unanswered[:20],
            "unplaced": self.unplaced,
            "error_answers": self.error_answers[:20],
            "error_answer_count": len(self.error_answers),
            "delivery_failures": self.delivery_failures[:20],
            "delivery_failure_count": len(self.delivery_failures),
            "client_calls": self.client_calls,
            "client_failures": self.client_failures[:20],
            "client_failure_count": len(self.client_failures),
            "client_timeouts": self.client_timeouts[:20],
            "client_timeout_count": len(self.client_timeouts),
            "client_not_sent": self.client_not_sent[:20],
            "client_not_sent_count": len(self.client_not_sent),
            "native_commit_errors": self.native_commit_errors,
            "model": [[*key, offset] for key, offset in self.model().items()],
        }


def _child_main(settings: LoadSettings, conn: Connection) -> None:
    child = LoadChild(settings)
    child.start()
    while True:
        command, *args = conn.recv()
        if command == "window":
            conn.send(child.take_window())
        elif command == "mark":
            name, at_ms = args
            with child.lock:
                child.marks.add(name, at_ms)
            conn.send(None)
        elif command == "stop":
            conn.send(child.stop(*args))
            return


class LoadHandle:
    """The parent's side: starts the child and talks to it (thread-safe)."""

    def __init__(self, settings: LoadSettings) -> None:
        self.settings = settings
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self.process = context.Process(
            target=_child_main, args=(settings, child_conn), name="soak-load", daemon=True
        )
        self._lock = threading.Lock()

    def start(self) -> None:
        self.process.start()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def _ask(self, *message: Any, timeout_s: float = 120.0) -> Any:
        with self._lock:
            self._conn.send(message)
            if not self._conn.poll(timeout_s):
                raise RuntimeError(f"the load process did not answer {message[0]!r}")
            return self._conn.recv()

    def window(self) -> dict[str, Any]:
        return self._ask("window")

    def mark(self, name: str, at_s: float) -> None:
        """Ask for the time from ``at_s`` (``time.time()``) to the next answer produced."""
        self._ask("mark", name, int(at_s * 1000))

    def stop(self, drain_timeout_s: float = 300.0) -> dict[str, Any]:
        result = self._ask("stop", drain_timeout_s, timeout_s=drain_timeout_s + 900)
        self.process.join(60)
        result["model"] = {(g, t, p): o for g, t, p, o in result["model"]}
        return result

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
            self.process.join(10)


def settings_dict(settings: LoadSettings) -> dict[str, Any]:
    return asdict(settings)
