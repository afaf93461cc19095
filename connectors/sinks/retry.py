"""Waiting out a sink outage: a write retried with backoff for a bounded time (safe: every
write is one idempotent transaction)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from connectors.sinks.values import LeaseLost, SinkError

T = TypeVar("T")

#: First pause after a failed write; doubled after each failure up to ``MAX_BACKOFF_S``.
FIRST_BACKOFF_S = 0.25
MAX_BACKOFF_S = 5.0


def with_sink_retries(
    write: Callable[[], T], timeout_s: float, what: str, log: logging.Logger
) -> T:
    """``write()``, retried while it raises ``SinkError`` for up to ``timeout_s`` seconds (0:
    no retry), then the last error propagates (LeaseLost at once); ``what`` names the write in
    log lines."""
    deadline = time.monotonic() + timeout_s
    backoff_s = FIRST_BACKOFF_S
    attempt = 1
    while True:
        try:
            result = write()
        except LeaseLost:
            raise  # another process writes now: waiting cannot bring the lease back
        except SinkError as error:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                log.error(
                    "%s: sink still failing after %d attempts, failing the query: %s",
                    what,
                    attempt,
                    error,
                )
                raise
            log.warning(
                "%s: sink write failed (attempt %d), retrying for %.0f s more: %s",
                what,
                attempt,
                left_s,
                error,
            )
            time.sleep(min(backoff_s, left_s))
            backoff_s = min(backoff_s * 2, MAX_BACKOFF_S)
            attempt += 1
            continue
        if attempt > 1:
            log.warning("%s: sink write succeeded on attempt %d", what, attempt)
        return result
