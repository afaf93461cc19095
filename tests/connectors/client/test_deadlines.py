"""The client's side of request deadlines (no Kafka): an attempt's ``timeoutMs``, and waiting
until the job's deadline for an unanswered attempt has passed on this client's clock."""

from __future__ import annotations

import threading
import time

import pytest

from connectors.client.deadlines import SentAttempt, attempt_timeout_ms, await_refusal


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
