"""Reading answers against requests (no Kafka): per-partition codes, retriability, the typed
errors of the waiting calls and of ``commit_async``; and, when no answer came, the client's side
of request deadlines: an attempt's ``timeoutMs``, and waiting until the job's deadline for it
has passed on this client's clock."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from connectors.client.answers import (
    CommitResult,
    SentAttempt,
    async_commit_outcome,
    attempt_timeout_ms,
    await_refusal,
    outcome,
)
from connectors.client.errors import (
    AttemptTimeout,
    CommitFailedError,
    CommitTimeoutError,
    TopicsNotAvailable,
)
from state.coordinator.errors import ErrorCode
from state.coordinator.model import OffsetAndMetadata, TopicPartition
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.formats.response_codec import Response

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
REQUEST = OffsetCommitRequest(
    "r-1", "g", (PartitionCommit("orders", 0, 5), PartitionCommit("orders", 1, 7, 2, "m"))
)


def answer(top: int = 0, **codes: int) -> Response:
    partitions = {TopicPartition("orders", int(p[1:])): (c, None) for p, c in codes.items()}
    return Response("r-1", "g", "OffsetCommit", top, None, partitions)


def done(value: Response | BaseException) -> Future[Response]:
    future: Future[Response] = Future()
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)
    return future


def test_a_request_level_code_answers_every_asked_partition() -> None:
    read = outcome(answer(ErrorCode.INVALID_REQUEST), [TP0, TP1])
    assert read.codes == {TP0: ErrorCode.INVALID_REQUEST, TP1: ErrorCode.INVALID_REQUEST}
    assert not read.ok and not read.retriable and read.main_code() == ErrorCode.INVALID_REQUEST


def test_the_main_code_is_the_first_non_retriable_partition_code() -> None:
    read = outcome(answer(p0=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, p1=12), [TP0, TP1])
    assert not read.retriable and read.main_code() == 12
    assert "orders-1: OFFSET_METADATA_TOO_LARGE (12)" in read.describe()
    retriable = outcome(answer(p0=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, p1=0), [TP0, TP1])
    assert retriable.retriable and retriable.main_code() == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert outcome(answer(p0=0, p1=0), [TP0, TP1]).ok


def test_commit_async_outcomes() -> None:
    sent = SentAttempt(1500)
    ok = async_commit_outcome(done(answer(p0=0, p1=0)), REQUEST, 5, sent)
    assert ok == CommitResult(
        "g", {TP0: OffsetAndMetadata(5), TP1: OffsetAndMetadata(7, 2, "m")}, ("r-1",)
    )
    timeout = async_commit_outcome(done(AttemptTimeout("r-1")), REQUEST, 1.5, sent)
    assert isinstance(timeout, CommitTimeoutError) and "no answer within 1.5 s" in str(timeout)
    assert timeout.partitions == dict.fromkeys([TP0, TP1], ErrorCode.REQUEST_TIMED_OUT)
    # Never acknowledged by the broker: its deadline at the job is unknown.
    assert not timeout.will_not_be_applied and "may still be applied" in str(timeout)
    # Acknowledged, and its deadline (append time + timeoutMs) already passed on this clock.
    sent.appended(int(time.time() * 1000) - 2000)
    passed = async_commit_outcome(done(AttemptTimeout("r-1")), REQUEST, 1.5, sent)
    assert isinstance(passed, CommitTimeoutError) and passed.will_not_be_applied
    assert passed.deadline_ms == sent.appended_ms + 1500 and "will not be applied" in str(passed)
    # Acknowledged, but its deadline is still ahead: it may still be applied until then.
    later = SentAttempt(60_000)
    later.appended(int(time.time() * 1000))
    pending = async_commit_outcome(done(AttemptTimeout("r-1")), REQUEST, 1.5, later)
    assert isinstance(pending, CommitTimeoutError) and not pending.will_not_be_applied
    assert "may still be applied until" in str(pending)
    unreachable = async_commit_outcome(done(TopicsNotAvailable("no topic")), REQUEST, 1, sent)
    assert isinstance(unreachable, CommitFailedError) and unreachable.retriable
    assert unreachable.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    # Retriable answers fail commit_async too: it is never retried.
    busy = async_commit_outcome(
        done(answer(p0=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, p1=0)), REQUEST, 1, sent
    )
    assert isinstance(busy, CommitFailedError) and busy.failed_partitions == {
        TP0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    }
    assert busy.request_ids == ("r-1",) and str(busy).startswith("COORDINATOR_LOAD_IN_PROGRESS")


@pytest.mark.parametrize(
    ("remaining_s", "timeout_ms"),
    [(5.0, 5000), (0.0001, 1), (0.0, 1), (-1.0, 1), (1.2341, 1235), (10**9, 2**31 - 1)],
)
def test_an_attempt_timeout_is_what_is_left_rounded_up(remaining_s: float, timeout_ms: int) -> None:
    assert attempt_timeout_ms(remaining_s) == timeout_ms


def now_ms() -> int:
    return int(time.time() * 1000)


def test_refusal_waits_until_the_deadline_passes_on_this_clock() -> None:
    sent = SentAttempt(300)
    sent.appended(now_ms())
    started = time.monotonic()
    assert await_refusal(sent, time.monotonic() + 5)
    assert 0.25 <= time.monotonic() - started < 2
    assert sent.deadline_ms is not None and now_ms() >= sent.deadline_ms


def test_refusal_waits_for_the_acknowledgement_from_another_thread() -> None:
    sent = SentAttempt(0)
    threading.Timer(0.2, sent.appended, [now_ms()]).start()
    assert await_refusal(sent, time.monotonic() + 5)


def test_no_refusal_without_acknowledgement_or_past_the_wait() -> None:
    unacknowledged = SentAttempt(0)
    assert not await_refusal(unacknowledged, time.monotonic() + 0.1)
    assert unacknowledged.deadline_ms is None
    far = SentAttempt(60_000)
    far.appended(now_ms())
    started = time.monotonic()
    assert not await_refusal(far, time.monotonic() + 0.5)
    # It gives up at once when the deadline lies past the wait, instead of sleeping for nothing.
    assert time.monotonic() - started < 0.4


def test_an_attempt_never_sent_is_refused_at_once() -> None:
    assert await_refusal(SentAttempt(60_000, not_sent=True), time.monotonic())
