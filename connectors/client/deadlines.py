"""When an unanswered request can no longer be applied: the client's side of request deadlines.

Each attempt carries ``timeoutMs``: what is left of the call's timeout when it is sent. The job
refuses it (REQUEST_TIMED_OUT, nothing applied) in every micro-batch whose timestamp is at or
after its *deadline*, the message's timestamp plus ``timeoutMs``
(``state.coordinator.deadlines``). The message's timestamp is the broker's append time (the
ingest topic is LogAppendTime), which the producer's acknowledgement reports
(:meth:`SentAttempt.appended`). So once no answer came, the client waits until its own clock
reaches that deadline (a few milliseconds past its own: the produce latency, plus however far
the broker's clock runs ahead of the client's) and can then say the request will not be applied.

That holds when the job's clock is not behind this client's: a micro-batch planned after the
client said so has a timestamp (the job driver's clock) at or after the client's clock, so at or
after the deadline. If the driver's clock is behind the client's by some span, a micro-batch
planned within that span after the client gave up can still apply the request. And a micro-batch
planned *before* the deadline applies it whenever it completes: a batch still running when the
client gave up, or one the job replays after a crash (Kafka's coordinator has the same window:
a request already in its log is applied, answered or not). When the broker never acknowledged
the message, its deadline is unknown (it may still be appended, and get a later timestamp): the
client then says it may still be applied.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

__all__ = [
    "REFUSAL_WAIT_MAX_S",
    "SentAttempt",
    "attempt_timeout_ms",
    "await_refusal",
    "format_ms",
    "timed_out_reason",
]

#: The longest a call waits past its own timeout for the job's deadline of its last attempt
#: (for the broker's acknowledgement, then for the client's clock to reach the deadline).
REFUSAL_WAIT_MAX_S: Final = 2.0
#: Kafka's request timeouts are int32 milliseconds.
_INT32_MAX: Final = 2**31 - 1


def attempt_timeout_ms(remaining_s: float) -> int:
    """The ``timeoutMs`` of an attempt sent ``remaining_s`` seconds before its call's deadline:
    rounded up, at least 1 ms, at most int32."""
    return max(1, min(_INT32_MAX, math.ceil(remaining_s * 1000)))


@dataclass
class SentAttempt:
    """One attempt's message as far as the client knows it: its ``timeoutMs`` and, once the
    broker acknowledged it, its timestamp."""

    timeout_ms: int
    appended_ms: int | None = None
    #: Never handed to the producer (the client could not start): nothing to apply.
    not_sent: bool = False
    _acknowledged: threading.Event = field(default_factory=threading.Event, repr=False)

    def appended(self, timestamp_ms: int) -> None:
        """The producer's acknowledgement: the message's timestamp (its append time)."""
        self.appended_ms = timestamp_ms
        self._acknowledged.set()

    def wait_appended(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the acknowledgement; whether it came."""
        return self._acknowledged.wait(max(0.0, timeout_s))

    @property
    def deadline_ms(self) -> int | None:
        """The job's deadline for this attempt (ms since the epoch), None until acknowledged."""
        return None if self.appended_ms is None else self.appended_ms + self.timeout_ms


def await_refusal(sent: SentAttempt, give_up: float) -> bool:
    """After ``sent`` went unanswered: wait (until ``time.monotonic()`` reaches ``give_up`` at
    the latest) until this client's clock reaches the job's deadline for it. True when it did:
    from then on the job refuses it. An attempt never sent is refused at once."""
    if sent.not_sent:
        return True
    if not sent.wait_appended(give_up - time.monotonic()):
        return False
    deadline_ms = sent.deadline_ms
    assert deadline_ms is not None
    while True:
        left_s = deadline_ms / 1000 - time.time()
        if left_s <= 0:
            return True
        if time.monotonic() + left_s > give_up:
            return False
        time.sleep(left_s)


def format_ms(ms: int) -> str:
    """``ms`` since the epoch as an ISO-8601 UTC time."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def timed_out_reason(timeout_s: float, sent: SentAttempt, refused: bool) -> str:
    """What a REQUEST_TIMED_OUT error says about an unanswered attempt: whether it can still be
    applied (``refused``: the client's clock reached its deadline at the job)."""
    head = f"no answer within {timeout_s:g} s"
    deadline_ms = sent.deadline_ms
    if deadline_ms is None:
        return f"{head}; the broker had not acknowledged the request, so it may still be applied"
    deadline = format_ms(deadline_ms)
    if refused:
        return (
            f"{head}: it will not be applied (the job refuses it from {deadline}, its deadline; "
            "only a micro-batch planned before then, still running or replayed after a crash, "
            "could apply it)"
        )
    return f"{head}; it may still be applied until {deadline} (its deadline at the job)"
