"""Reading answers against requests (no Kafka): per-partition codes, retriability, the typed
errors of the waiting calls and of ``commit_async``."""

from __future__ import annotations

from concurrent.futures import Future

from connectors.client.errors import (
    AttemptTimeout,
    CommitFailedError,
    CommitTimeoutError,
    TopicsNotAvailable,
)
from connectors.client.outcomes import async_commit_outcome, outcome
from connectors.client.results import CommitResult
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
    ok = async_commit_outcome(done(answer(p0=0, p1=0)), REQUEST, 5)
    assert ok == CommitResult(
        "g", {TP0: OffsetAndMetadata(5), TP1: OffsetAndMetadata(7, 2, "m")}, ("r-1",)
    )
    timeout = async_commit_outcome(done(AttemptTimeout("r-1")), REQUEST, 1.5)
    assert isinstance(timeout, CommitTimeoutError) and "no answer within 1.5 s" in str(timeout)
    assert timeout.partitions == dict.fromkeys([TP0, TP1], ErrorCode.REQUEST_TIMED_OUT)
    unreachable = async_commit_outcome(done(TopicsNotAvailable("no topic")), REQUEST, 1)
    assert isinstance(unreachable, CommitFailedError) and unreachable.retriable
    assert unreachable.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    # Retriable answers fail commit_async too: it is never retried.
    busy = async_commit_outcome(
        done(answer(p0=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, p1=0)), REQUEST, 1
    )
    assert isinstance(busy, CommitFailedError) and busy.failed_partitions == {
        TP0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    }
    assert busy.request_ids == ("r-1",) and str(busy).startswith("COORDINATOR_LOAD_IN_PROGRESS")
