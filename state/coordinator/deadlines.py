"""Request deadlines: a request is handled before its deadline or never.

A request's deadline is its ingest message's timestamp plus its ``timeoutMs`` (absent: the job's
``request_timeout_ms``, Kafka's ``default.api.timeout.ms``). One reached at or after it is
answered REQUEST_TIMED_OUT (7), request-level, and changes nothing. "Reached" is decided against
``now_ms``, the micro-batch's time kept in Spark's offset log, so a replayed batch decides as the
first run did. The check is Kafka's ``Timer.isExpired`` (``now >= deadline``), written as the
message's age against its timeout so that no sum overflows.
"""

from __future__ import annotations

from datetime import UTC, datetime

from state.coordinator.config import CoordinatorConfig

__all__ = [
    "format_utc_ms",
    "is_timed_out",
    "request_deadline_ms",
    "request_timeout_ms",
    "timed_out_reason",
]


def request_timeout_ms(timeout_ms: int | None, config: CoordinatorConfig) -> int:
    """A request's timeout: its own ``timeoutMs``, or ``config.request_timeout_ms`` when it has
    none (None, or a negative value, which the decoder refuses but a request frame may hold)."""
    return config.request_timeout_ms if timeout_ms is None or timeout_ms < 0 else timeout_ms


def request_deadline_ms(
    timestamp_ms: int, timeout_ms: int | None, config: CoordinatorConfig
) -> int:
    """The deadline of a request whose ingest message has timestamp ``timestamp_ms`` and whose
    ``timeoutMs`` is ``timeout_ms``."""
    return timestamp_ms + request_timeout_ms(timeout_ms, config)


def is_timed_out(
    timestamp_ms: int, timeout_ms: int | None, now_ms: int, config: CoordinatorConfig
) -> bool:
    """Whether that request is refused by a batch of time ``now_ms``: ``now_ms`` is at or after
    its deadline."""
    return now_ms - timestamp_ms >= request_timeout_ms(timeout_ms, config)


def format_utc_ms(ms: int) -> str:
    """``ms`` since the epoch as an ISO-8601 UTC time (the raw number when out of range)."""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"


def timed_out_reason(deadline_ms: int, now_ms: int) -> str:
    """The ``error_reason`` of a REQUEST_TIMED_OUT answer: names the deadline and the batch time,
    so that a replayed batch gives the same text."""
    deadline, now = format_utc_ms(deadline_ms), format_utc_ms(now_ms)
    return (
        f"request timed out: its deadline {deadline} (message timestamp + timeoutMs) "
        f"passed before the job reached it (batch time {now}); nothing was applied"
    )
