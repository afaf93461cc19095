"""The commit client: argument checks first; then its request/response protocol against a
scripted responder on the real broker (answers the job rarely gives: retriable codes, silence);
then, marked slow, everything through the real streaming job, including the Spark progress
listener and foreachBatch wrapper that commit a query's offsets."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from connectors.client import (
    ClientClosedError,
    CommitFailedError,
    CommitResult,
    CommitTimeoutError,
    DeleteGroupFailedError,
    OffsetCommitClient,
    OffsetDeleteFailedError,
    OffsetsError,
    describe_error,
)
from connectors.sinks import open_sink
from state.coordinator.errors import ErrorCode
from state.coordinator.model import MemberMetadata, OffsetAndMetadata, TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    Request,
)
from state.formats.request_codec import decode_request
from tests.fixtures.job import RunningJob, unique_group
from tests.fixtures.kafka import TopicFactory
from tests.streaming.helpers import produce_requests, read_responses, wait_for

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)

# --- arguments (no Kafka) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offsets", "error", "match"),
    [
        ({TP0: -1}, ValueError, "negative offset"),
        ({TP0: True}, TypeError, "must be an int"),
        ({TP0: "5"}, TypeError, "must be an int"),
        ({("orders", "0"): 5}, TypeError, "partition"),
        ({TP0: OffsetAndMetadata(5, metadata=7)}, TypeError, "metadata"),  # type: ignore[arg-type]
        # A lone surrogate cannot be sent as UTF-8 JSON.
        ({TP0: OffsetAndMetadata(5, metadata="\ud800")}, ValueError, "utf-8"),
    ],
)
def test_malformed_offsets_are_refused_before_anything_is_sent(
    offsets: Any, error: type[Exception], match: str
) -> None:
    # Nothing listens on port 1: a client that tried to connect would fail differently.
    client = OffsetCommitClient(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(error, match=match):
        client.commit("g", offsets)
    with pytest.raises(error, match=match):
        client.commit_async("g", offsets)
    client.close()


def test_an_unreachable_cluster_fails_commit_and_commit_async_at_once() -> None:
    client = OffsetCommitClient(bootstrap_servers="127.0.0.1:1")
    started = time.monotonic()
    with pytest.raises(CommitFailedError, match=r"cannot reach Kafka at 127\.0\.0\.1:1") as raised:
        client.commit("g", {TP0: 1}, timeout_s=30)
    # The first attempt found no broker: nothing was sent, and the call does not wait its 30 s.
    assert time.monotonic() - started < 10
    assert not isinstance(raised.value, CommitTimeoutError) and raised.value.will_not_be_applied
    assert raised.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    error = client.commit_async("g", {TP0: 1}, timeout_s=1).exception(timeout=30)
    assert isinstance(error, CommitFailedError)
    assert error.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and error.retriable
    client.close()


def test_an_empty_commit_sends_nothing() -> None:
    client = OffsetCommitClient(bootstrap_servers="127.0.0.1:1")
    assert client.commit("g", {}) == CommitResult("g", {})
    called: list[Any] = []
    future = client.commit_async("g", {}, lambda *outcome: called.append(outcome))
    assert future.result(timeout=1) == CommitResult("g", {})
    assert called == [(CommitResult("g", {}), None)]
    client.close()


def test_errors_carry_kafka_names_codes_and_retriability() -> None:
    error = CommitFailedError(12, {TP0: 12, TP1: 0}, "too big")
    assert error.error_code is ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert str(error).startswith("OFFSET_METADATA_TOO_LARGE (12)")
    assert not error.retriable
    assert error.failed_partitions == {TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE}
    timeout = CommitTimeoutError(7)
    assert isinstance(timeout, CommitFailedError) and timeout.retriable
    assert describe_error(14) == "COORDINATOR_LOAD_IN_PROGRESS (14)"
    assert describe_error(9999) == "UNKNOWN_ERROR_CODE (9999)"


# --- a scripted responder on the real broker --------------------------------------------------

Answer = Callable[[Request, int], dict[str, Any] | None]


def response(
    request: Request, codes: dict[TopicPartition, int] | None = None, top: int = 0
) -> dict[str, Any]:
    """A response message value in the job's format (``streaming.spark.writer``)."""
    partitions = [
        {
            "topic": tp.topic,
            "partitionIndex": tp.partition,
            "errorCode": code,
            "errorMessage": None if code == 0 else ErrorCode(code).name,
        }
        for tp, code in (codes or {}).items()
    ]
    return {
        "version": 1,
        "requestId": request.request_id,
        "groupId": request.group_id,
        "api": type(request).__name__,
        "errorCode": top,
        "errorMessage": None if top == 0 else ErrorCode(top).name,
        "partitions": partitions,
    }


def partitions_of(request: Request) -> list[TopicPartition]:
    if isinstance(request, OffsetCommitRequest):
        return [TopicPartition(p.topic, p.partition) for p in request.partitions]
    if isinstance(request, OffsetDeleteRequest):
        return list(request.partitions)
    return []


def all_ok(request: Request, _attempt: int) -> dict[str, Any]:
    return response(request, dict.fromkeys(partitions_of(request), 0))


class ScriptedResponder:
    """Stands in for the job: reads the ingest topic and answers each request with
    ``answer(request, attempt)`` (attempt counts requests per group from 0; None: no answer)."""

    def __init__(self, bootstrap: str, ingest: str, responses: str, answer: Answer) -> None:
        self.answer = answer
        self.responses = responses
        #: (ingest partition, key, decoded request) of everything received.
        self.received: list[tuple[int, bytes, Request]] = []
        #: Each received request's message timestamp, by request id.
        self.timestamps: dict[str, int] = {}
        self._attempts: dict[str, int] = {}
        self._stop = threading.Event()
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        tps = [KafkaTopicPartition(ingest, p) for p in self._consumer.partitions_for_topic(ingest)]
        self._consumer.assign(tps)
        for tp, end in self._consumer.end_offsets(tps).items():
            self._consumer.seek(tp, end)
        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for records in self._consumer.poll(timeout_ms=50).values():
                for record in records:
                    request = decode_request(record.value)
                    assert not hasattr(request, "error_code"), request
                    self.received.append((record.partition, record.key, request))
                    self.timestamps[request.request_id] = record.timestamp
                    attempt = self._attempts.get(request.group_id, 0)
                    self._attempts[request.group_id] = attempt + 1
                    value = self.answer(request, attempt)
                    if value is not None:
                        self.send(request.request_id, value)

    def send(self, request_id: str, value: dict[str, Any]) -> None:
        self._producer.send(
            self.responses, key=request_id.encode(), value=json.dumps(value).encode()
        )
        self._producer.flush()

    def requests_of(self, group: str) -> list[Request]:
        return [r for _, _, r in self.received if r.group_id == group]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()
        self._producer.close()


@pytest.fixture
def job_topics(topic_factory: TopicFactory) -> tuple[str, str]:
    """(ingest topic with 4 partitions, responses topic with 3)."""
    return topic_factory(partitions=4), topic_factory(partitions=3)


@pytest.fixture
def scripted(
    kafka_bootstrap: str, job_topics: tuple[str, str]
) -> Iterator[Callable[[Answer], tuple[ScriptedResponder, OffsetCommitClient]]]:
    opened: list[Any] = []

    def start(answer: Answer) -> tuple[ScriptedResponder, OffsetCommitClient]:
        ingest, responses = job_topics
        responder = ScriptedResponder(kafka_bootstrap, ingest, responses, answer)
        client = OffsetCommitClient(
            bootstrap_servers=kafka_bootstrap,
            ingest_topic=ingest,
            responses_topic=responses,
            client_id=f"test-{uuid.uuid4().hex[:6]}",
            retry_backoff_s=0.05,
        )
        opened.extend([client, responder])
        return responder, client

    yield start
    for thing in opened:
        thing.close()


def test_commit_sends_one_request_per_group_to_its_shard_and_returns_its_answer(
    scripted: Any, job_topics: tuple[str, str]
) -> None:
    responder, client = scripted(all_ok)
    offsets = {TP0: 10, TP1: OffsetAndMetadata(20, leader_epoch=3, metadata="m"), ("other", 2): 7}
    result = client.commit("payments", offsets, timeout_s=10)

    assert result.group_id == "payments" and result.attempts == 1
    assert result.offsets == {
        TP0: OffsetAndMetadata(10),
        TP1: OffsetAndMetadata(20, leader_epoch=3, metadata="m"),
        TopicPartition("other", 2): OffsetAndMetadata(7),
    }
    [(partition, key, request)] = responder.received
    assert partition == partition_for("payments", 4)
    assert key == b"payments"
    assert isinstance(request, OffsetCommitRequest)
    assert request.request_id == result.request_ids[0]
    assert uuid.UUID(request.request_id).version == 4
    assert [
        (p.topic, p.partition, p.offset, p.leader_epoch, p.metadata) for p in request.partitions
    ] == [
        ("orders", 0, 10, -1, ""),
        ("orders", 1, 20, 3, "m"),
        ("other", 2, 7, -1, ""),
    ]
    assert (request.generation_id, request.member_id, request.retention_time_ms) == (-1, "", -1)


def test_retriable_errors_are_retried_for_the_failed_partitions_only(scripted: Any) -> None:
    def answer(request: Request, attempt: int) -> dict[str, Any]:
        if attempt == 0:
            return response(request, {TP0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, TP1: 0})
        return all_ok(request, attempt)

    responder, client = scripted(answer)
    result = client.commit("g", {TP0: 1, TP1: 2}, timeout_s=10)
    assert result.attempts == 2
    first, second = responder.requests_of("g")
    assert partitions_of(first) == [TP0, TP1]
    assert partitions_of(second) == [TP0]
    assert first.request_id != second.request_id


def test_a_top_level_retriable_error_retries_the_whole_request(scripted: Any) -> None:
    def answer(request: Request, attempt: int) -> dict[str, Any]:
        if attempt < 2:
            return response(request, top=ErrorCode.NOT_COORDINATOR)
        return all_ok(request, attempt)

    responder, client = scripted(answer)
    assert client.commit("g", {TP0: 1, TP1: 2}, timeout_s=10).attempts == 3
    assert [partitions_of(r) for r in responder.requests_of("g")] == [[TP0, TP1]] * 3


def test_a_non_retriable_error_raises_at_once_with_every_partitions_code(scripted: Any) -> None:
    def answer(request: Request, _attempt: int) -> dict[str, Any]:
        return response(request, {TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE, TP1: 0})

    responder, client = scripted(answer)
    with pytest.raises(CommitFailedError) as raised:
        client.commit("g", {TP0: 1, TP1: 2}, timeout_s=10)
    error = raised.value
    assert type(error) is CommitFailedError
    assert error.error_code == ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert error.partitions == {TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE, TP1: ErrorCode.NONE}
    assert not error.retriable
    assert "OFFSET_METADATA_TOO_LARGE (12)" in str(error)
    assert len(responder.requests_of("g")) == 1


def test_no_answer_raises_commit_timeout_at_the_deadline(scripted: Any) -> None:
    _, client = scripted(lambda request, attempt: None)
    client.start(timeout_s=10)
    started = time.monotonic()
    with pytest.raises(CommitTimeoutError) as raised:
        client.commit("g", {TP0: 1}, timeout_s=1.0)
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 3.0
    assert raised.value.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert raised.value.partitions == {TP0: ErrorCode.REQUEST_TIMED_OUT}


def test_retriable_errors_until_the_deadline_end_in_a_timeout_naming_the_last_error(
    scripted: Any,
) -> None:
    responder, client = scripted(
        lambda request, _attempt: response(request, {TP0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
    )
    client.start(timeout_s=10)
    with pytest.raises(CommitTimeoutError, match=r"COORDINATOR_LOAD_IN_PROGRESS \(14\)") as raised:
        client.commit("g", {TP0: 1}, timeout_s=1.5)
    assert raised.value.partitions == {TP0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    # Backoff doubles from 50 ms: several attempts, but far fewer than a busy loop would make.
    assert 3 <= len(responder.requests_of("g")) <= 12


def test_many_concurrent_commits_share_one_response_reader(scripted: Any) -> None:
    def answer(request: Request, attempt: int) -> dict[str, Any]:
        # Other clients' answers on the same topic must be skipped.
        responder.send(str(uuid.uuid4()), all_ok(request, attempt))
        return all_ok(request, attempt)

    responder, client = scripted(answer)
    client.start(timeout_s=10)
    results: list[CommitResult] = []
    errors: list[BaseException] = []

    def commit_many(worker: int) -> None:
        for i in range(10):
            try:
                results.append(client.commit(f"g-{worker}-{i}", {TP0: i}, timeout_s=30))
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=commit_many, args=(w,)) for w in range(20)]
    for t in threads:
        t.start()
    readers = [t for t in threading.enumerate() if t.name == f"{client.client_id}-responses"]
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(results) == 200
    assert len({r.request_ids[0] for r in results}) == 200
    assert len(readers) == 1


def test_commit_async_completes_futures_and_calls_back_on_success_and_failure(
    scripted: Any,
) -> None:
    def answer(request: Request, _attempt: int) -> dict[str, Any]:
        if request.group_id == "bad":
            return response(request, {TP0: ErrorCode.ILLEGAL_GENERATION})
        return all_ok(request, 0)

    _, client = scripted(answer)
    calls: list[tuple[CommitResult | None, BaseException | None]] = []
    done = threading.Event()

    def callback(result: CommitResult | None, error: BaseException | None) -> None:
        calls.append((result, error))
        if len(calls) == 2:
            done.set()

    good = client.commit_async("good", {TP0: 5}, callback, timeout_s=10)
    bad = client.commit_async("bad", {TP0: 5}, callback, timeout_s=10)
    assert isinstance(good, Future)
    assert good.result(15).offsets == {TP0: OffsetAndMetadata(5)}
    with pytest.raises(CommitFailedError) as raised:
        bad.result(15)
    assert raised.value.error_code == ErrorCode.ILLEGAL_GENERATION
    assert done.wait(5)
    by_outcome = {("ok" if r else "error"): (r, e) for r, e in calls}
    assert by_outcome["ok"][0] is not None and by_outcome["ok"][1] is None
    assert by_outcome["error"][0] is None and by_outcome["error"][1] is raised.value


def test_commit_async_is_not_retried_and_times_out(scripted: Any) -> None:
    def answer(request: Request, _attempt: int) -> dict[str, Any] | None:
        if request.group_id == "silent":
            return None
        return response(request, {TP0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})

    responder, client = scripted(answer)
    with pytest.raises(CommitFailedError) as raised:
        client.commit_async("g", {TP0: 1}, timeout_s=10).result(15)
    assert raised.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert raised.value.retriable
    assert len(responder.requests_of("g")) == 1

    errors: list[BaseException | None] = []
    future = client.commit_async("silent", {TP0: 1}, lambda r, e: errors.append(e), timeout_s=0.5)
    with pytest.raises(CommitTimeoutError):
        future.result(10)
    wait_for(lambda: errors, lambda got: len(got) == 1, timeout_s=5)
    assert isinstance(errors[0], CommitTimeoutError)


def test_close_fails_what_is_still_waiting(scripted: Any) -> None:
    _, client = scripted(lambda request, _attempt: None)
    future = client.commit_async("g", {TP0: 1}, timeout_s=60)
    client.close(timeout_s=0.2)
    with pytest.raises(ClientClosedError):
        future.result(10)
    with pytest.raises(ClientClosedError):
        client.commit("g", {TP0: 1})


def test_deletes_raise_their_own_typed_errors(scripted: Any) -> None:
    def answer(request: Request, _attempt: int) -> dict[str, Any]:
        if isinstance(request, DeleteGroupsRequest):
            return response(request, top=ErrorCode.NON_EMPTY_GROUP)
        assert isinstance(request, OffsetDeleteRequest)
        return response(request, {TP0: 0, TP1: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC})

    _, client = scripted(answer)
    with pytest.raises(DeleteGroupFailedError) as group_error:
        client.delete_group("g", timeout_s=10)
    assert group_error.value.error_code == ErrorCode.NON_EMPTY_GROUP
    with pytest.raises(OffsetDeleteFailedError) as offsets_error:
        client.delete_offsets("g", [TP0, TP1], timeout_s=10)
    assert offsets_error.value.error_code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    assert offsets_error.value.failed_partitions == {TP1: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}


def test_every_attempt_carries_what_is_left_of_the_call_as_its_timeout(scripted: Any) -> None:
    """Each attempt is a request of its own with its own deadline at the job: about the call's
    deadline, so that no retry can be followed by an older attempt applied late."""

    def answer(request: Request, attempt: int) -> dict[str, Any]:
        if attempt < 2:
            return response(request, top=ErrorCode.NOT_COORDINATOR)
        return all_ok(request, attempt)

    responder, client = scripted(answer)
    client.start(timeout_s=10)
    started_ms = time.time() * 1000
    client.commit("g", {TP0: 1}, timeout_s=20)
    client.delete_offsets("g", [TP0], timeout_s=20)
    client.delete_group("g", timeout_s=20)
    requests = responder.requests_of("g")
    assert len(requests) == 5
    commits = requests[:3]
    timeouts = [r.timeout_ms for r in commits]
    assert all(t is not None for t in timeouts)
    assert 19_000 <= timeouts[0] <= 20_000
    assert timeouts[0] >= timeouts[1] >= timeouts[2]
    # The attempts' deadlines at the job all fall within a second of the call's own deadline.
    deadlines = [responder.timestamps[r.request_id] + r.timeout_ms for r in commits]
    assert all(abs(d - (started_ms + 20_000)) < 1_500 for d in deadlines), deadlines
    assert all(r.timeout_ms is not None and r.timeout_ms > 19_000 for r in requests[3:])


def test_an_unanswered_commit_waits_for_its_deadline_and_says_it_will_not_be_applied(
    scripted: Any,
) -> None:
    responder, client = scripted(lambda request, attempt: None)
    client.start(timeout_s=10)
    with pytest.raises(CommitTimeoutError, match="it will not be applied") as raised:
        client.commit("g", {TP0: 1}, timeout_s=1.0)
    raised_at_ms = time.time() * 1000
    error = raised.value
    (request,) = responder.requests_of("g")
    assert request.timeout_ms is not None and 900 <= request.timeout_ms <= 1_000
    deadline = responder.timestamps[request.request_id] + request.timeout_ms
    assert error.will_not_be_applied and error.deadline_ms == deadline
    # From here on the job refuses it: this client's clock has passed the deadline.
    assert raised_at_ms >= deadline

    with pytest.raises(DeleteGroupFailedError, match="it will not be applied") as deleted:
        client.delete_group("g", timeout_s=0.5)
    assert deleted.value.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert deleted.value.will_not_be_applied


def test_a_commit_async_timeout_names_the_deadline_without_blocking(scripted: Any) -> None:
    responder, client = scripted(lambda request, attempt: None)
    client.start(timeout_s=10)
    future = client.commit_async("g", {TP0: 1}, timeout_s=0.5)
    error = future.exception(timeout=10)
    assert isinstance(error, CommitTimeoutError)
    (request,) = responder.requests_of("g")
    assert error.deadline_ms == responder.timestamps[request.request_id] + request.timeout_ms
    assert ("will not be applied" in str(error)) == error.will_not_be_applied


def test_answered_retriable_errors_until_the_deadline_are_never_applied_later(
    scripted: Any,
) -> None:
    _, client = scripted(
        lambda request, _attempt: response(request, {TP0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
    )
    client.start(timeout_s=10)
    with pytest.raises(CommitTimeoutError, match="it will not be applied") as raised:
        client.commit("g", {TP0: 1}, timeout_s=0.5)
    raised_at_ms = time.time() * 1000
    error = raised.value
    assert error.will_not_be_applied
    # Every attempt answered: no deadline to name. On a loaded host the last retry may still be
    # in flight when the call's time runs out; then its deadline is named, and it has passed.
    assert error.deadline_ms is None or error.deadline_ms <= raised_at_ms


def test_a_short_timeout_bounds_connecting_too_and_sends_nothing_late(scripted: Any) -> None:
    """A first call of 10 ms fails in its time (connecting counts against it, as finding the
    coordinator does for ``commitSync(timeout)``), never sent after its deadline; the
    connection goes on opening for the next call."""
    responder, client = scripted(all_ok)
    with pytest.raises(CommitTimeoutError, match=r"not sent within 0\.01 s") as raised:
        client.commit("g", {TP0: 1}, timeout_s=0.01)
    # It failed without waiting for the connection (0.3-1 s, longer on a loaded host): still
    # opening, not open, when the call gave up.
    assert client._connection is None
    assert raised.value.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert raised.value.will_not_be_applied
    assert client.commit("g", {TP0: 2}, timeout_s=10).offsets[TP0].offset == 2
    # Only the second call's request reached the ingest topic.
    assert [r.partitions[0].offset for r in responder.requests_of("g")] == [2]


def test_missing_topics_mean_no_coordinator(kafka_bootstrap: str) -> None:
    client = OffsetCommitClient(
        bootstrap_servers=kafka_bootstrap,
        ingest_topic=f"missing-{uuid.uuid4().hex[:8]}",
        responses_topic=f"missing-{uuid.uuid4().hex[:8]}",
    )
    try:
        with pytest.raises(OffsetsError) as raised:
            client.start(timeout_s=1)
        assert raised.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        with pytest.raises(CommitTimeoutError, match="does not exist"):
            client.commit("g", {TP0: 1}, timeout_s=1)
    finally:
        client.close()


# --- through the real job ---------------------------------------------------------------------


def sink_offsets(job: RunningJob, group: str) -> dict[TopicPartition, tuple[int, int, str]]:
    with open_sink(job.config.sink_url, read_only=True) as sink:
        return {
            o.topic_partition: (o.offset, o.leader_epoch, o.metadata)
            for o in sink.fetch_offsets(group)
        }


@pytest.fixture(scope="module")
def job_client(running_job: RunningJob) -> Iterator[OffsetCommitClient]:
    with OffsetCommitClient(running_job.config, default_timeout_s=60) as client:
        yield client


@pytest.mark.slow
def test_sync_commit_returns_only_once_the_offsets_are_readable(
    running_job: RunningJob, job_client: OffsetCommitClient
) -> None:
    group = unique_group()
    for round_ in range(3):
        job_client.commit(
            group, {TP0: 10 + round_, TP1: OffsetAndMetadata(20 - round_, 4, f"round {round_}")}
        )
        # No waiting: the answer came after the sink's transaction committed.
        assert sink_offsets(running_job, group) == {
            TP0: (10 + round_, -1, ""),
            TP1: (20 - round_, 4, f"round {round_}"),
        }


@pytest.mark.slow
def test_async_callbacks_fire_for_success_and_failure(
    running_job: RunningJob, job_client: OffsetCommitClient
) -> None:
    group, missing = unique_group(), unique_group("missing")
    outcomes: dict[str, tuple[CommitResult | None, BaseException | None]] = {}
    both = threading.Event()

    def recorder(name: str) -> Callable[[CommitResult | None, BaseException | None], None]:
        def callback(result: CommitResult | None, error: BaseException | None) -> None:
            outcomes[name] = (result, error)
            if len(outcomes) == 2:
                both.set()

        return callback

    ok = job_client.commit_async(group, {TP0: 3}, recorder("ok"))
    # A member's commit to a group that does not exist: Kafka answers ILLEGAL_GENERATION.
    bad = job_client.commit_async(
        missing, {TP0: 3}, recorder("bad"), generation_id=2, member_id="m-1"
    )
    assert ok.result(60).offsets == {TP0: OffsetAndMetadata(3)}
    with pytest.raises(CommitFailedError) as raised:
        bad.result(60)
    assert raised.value.error_code == ErrorCode.ILLEGAL_GENERATION
    assert both.wait(10)
    assert outcomes["ok"][0] is not None and outcomes["ok"][1] is None
    assert outcomes["bad"] == (None, raised.value)
    assert sink_offsets(running_job, group) == {TP0: (3, -1, "")}
    assert sink_offsets(running_job, missing) == {}


@pytest.mark.slow
def test_oversized_metadata_fails_its_partition_with_code_12_and_applies_the_other(
    running_job: RunningJob, job_client: OffsetCommitClient
) -> None:
    group = unique_group()
    too_big = "x" * (running_job.config.metadata_max_bytes + 1)
    with pytest.raises(CommitFailedError) as raised:
        job_client.commit(group, {TP0: OffsetAndMetadata(5, metadata=too_big), TP1: 6})
    error = raised.value
    assert error.error_code == ErrorCode.OFFSET_METADATA_TOO_LARGE == 12
    assert error.partitions == {TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE, TP1: ErrorCode.NONE}
    assert sink_offsets(running_job, group) == {TP1: (6, -1, "")}


@pytest.mark.slow
def test_delete_offsets_and_delete_group_follow_kafka(
    running_job: RunningJob, job_client: OffsetCommitClient
) -> None:
    group = unique_group()
    job_client.commit(group, {TP0: 1, TP1: 2})
    job_client.delete_offsets(group, [TP0])
    assert sink_offsets(running_job, group) == {TP1: (2, -1, "")}
    job_client.delete_group(group)
    assert sink_offsets(running_job, group) == {}
    with pytest.raises(DeleteGroupFailedError) as raised:
        job_client.delete_group(group)
    assert raised.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    with pytest.raises(OffsetDeleteFailedError) as deleted:
        job_client.delete_offsets(group, [TP1])
    assert deleted.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def add_member(job: RunningJob, group: str, topic: str) -> None:
    """Store a classic group with one member subscribed to ``topic`` (generation 1)."""
    request_id = f"join-{uuid.uuid4().hex}"
    member = MemberMetadata("member-1", client_id="c", subscribed_topics=(topic,))
    request = GroupMetadataRequest(request_id, group, generation_id=1, members=(member,))
    config = job.config
    produce_requests(config.bootstrap_servers, config.ingest_topic, [request])
    answers = wait_for(
        lambda: read_responses(config.bootstrap_servers, config.responses_topic),
        lambda got: request_id in got,
        timeout_s=60,
    )
    assert answers[request_id]["errorCode"] == 0


@pytest.mark.slow
def test_a_group_with_members_refuses_admin_commits_and_deletion(
    running_job: RunningJob, job_client: OffsetCommitClient
) -> None:
    group = unique_group()
    add_member(running_job, group, "orders")
    with pytest.raises(CommitFailedError) as admin:
        job_client.commit(group, {TP0: 9})
    assert admin.value.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # The member itself commits with its generation.
    job_client.commit(group, {TP0: 9}, generation_id=1, member_id="member-1")
    with pytest.raises(DeleteGroupFailedError) as delete:
        job_client.delete_group(group)
    assert delete.value.error_code == ErrorCode.NON_EMPTY_GROUP
    with pytest.raises(OffsetDeleteFailedError) as subscribed:
        job_client.delete_offsets(group, [TP0])
    assert subscribed.value.error_code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    assert sink_offsets(running_job, group) == {TP0: (9, -1, "")}


@pytest.mark.slow
def test_concurrent_sync_commits_through_the_job(
    running_job: RunningJob, job_client: OffsetCommitClient
) -> None:
    groups = [unique_group(f"c{i}") for i in range(40)]
    errors: list[BaseException] = []

    def commit(group: str) -> None:
        try:
            job_client.commit(group, {TP0: len(group), TP1: 1})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(g,)) for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    for group in groups:
        assert sink_offsets(running_job, group) == {TP0: (len(group), -1, ""), TP1: (1, -1, "")}


# --- a Spark query's progress as a group's offsets (through the real job) ---------------------


def produce_data(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for partition, count in per_partition.items():
        for i in range(count):
            producer.send(topic, value=f"m{i}".encode(), partition=partition)
    producer.flush()
    producer.close()


def start_reader_query(
    spark: Any, job: RunningJob, topic: str, name: str, checkpoint: Path, **sink: Any
) -> Any:
    reader = spark.readStream.format("kafka")
    for key, value in job.config.spark_kafka_options().items():
        reader = reader.option(key, value)
    stream = reader.option("subscribe", topic).option("startingOffsets", "earliest").load()
    writer = stream.writeStream.queryName(name).option("checkpointLocation", str(checkpoint))
    writer = writer.trigger(processingTime="200 milliseconds")
    if "foreach_batch" in sink:
        writer = writer.foreachBatch(sink["foreach_batch"])
    else:
        writer = writer.format("noop")
    return writer.start()


@pytest.mark.slow
def test_progress_listener_commits_each_batch_end_offsets(
    spark: Any,
    running_job: RunningJob,
    job_client: OffsetCommitClient,
    topic_factory: TopicFactory,
    tmp_path: Path,
) -> None:
    from connectors.client.spark.progress import CommitProgressListener

    topic = topic_factory(partitions=2)
    group = unique_group("spark")
    name = f"reader_{uuid.uuid4().hex[:8]}"
    produce_data(running_job.config.bootstrap_servers, topic, {0: 5, 1: 3})
    listener = CommitProgressListener(job_client, group, query_name=name, metadata="from spark")
    spark.streams.addListener(listener)
    query = start_reader_query(spark, running_job, topic, name, tmp_path / "cp")
    try:
        expected = {
            TopicPartition(topic, 0): (5, -1, "from spark"),
            TopicPartition(topic, 1): (3, -1, "from spark"),
        }
        wait_for(lambda: sink_offsets(running_job, group), lambda got: got == expected)
        produce_data(running_job.config.bootstrap_servers, topic, {1: 4})
        expected[TopicPartition(topic, 1)] = (7, -1, "from spark")
        wait_for(lambda: sink_offsets(running_job, group), lambda got: got == expected)
        # The job's own query is not followed: nothing of the ingest topic was committed.
        assert all(tp.topic == topic for tp in sink_offsets(running_job, group))
    finally:
        spark.streams.removeListener(listener)
        query.stop()


@pytest.mark.slow
def test_foreach_batch_wrapper_commits_after_the_batch_function(
    spark: Any,
    running_job: RunningJob,
    job_client: OffsetCommitClient,
    topic_factory: TopicFactory,
    tmp_path: Path,
) -> None:
    from connectors.client.spark.progress import commit_after_batch

    topic = topic_factory(partitions=2)
    group = unique_group("batch")
    seen: list[int] = []
    committed_before: list[dict[TopicPartition, tuple[int, int, str]]] = []

    def process(batch: Any, batch_id: int) -> None:
        # The group's offsets are committed after this returns, never before.
        committed_before.append(sink_offsets(running_job, group))
        seen.append(batch.count())

    produce_data(running_job.config.bootstrap_servers, topic, {0: 4, 1: 2})
    wrapped = commit_after_batch(process, job_client, group, metadata="batch")
    query = start_reader_query(
        spark,
        running_job,
        topic,
        f"batch_{uuid.uuid4().hex[:8]}",
        tmp_path / "cp",
        foreach_batch=wrapped,
    )
    try:
        expected = {
            TopicPartition(topic, 0): (4, -1, "batch"),
            TopicPartition(topic, 1): (2, -1, "batch"),
        }
        wait_for(lambda: sink_offsets(running_job, group), lambda got: got == expected)
        assert sum(seen) == 6
        assert committed_before[0] == {}
    finally:
        query.stop()
