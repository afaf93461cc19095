"""Waiting out a sink outage: ``with_sink_retries`` retries ``SinkError`` for a bounded time."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from connectors.sinks import SinkError
from connectors.sinks.retry import with_sink_retries

log = logging.getLogger("tests.retry")


def failing(times: int, error: Exception | None = None) -> tuple[list[float], Callable[[], str]]:
    """A write that fails ``times`` times with ``error`` (a SinkError), then returns "done"."""
    calls: list[float] = []

    def write() -> str:
        calls.append(time.monotonic())
        if len(calls) <= times:
            raise error or SinkError("database is locked")
        return "done"

    return calls, write


def test_a_write_that_recovers_is_retried_until_it_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls, write = failing(2)
    with caplog.at_level(logging.WARNING, logger="tests.retry"):
        assert with_sink_retries(write, 10.0, "shard 3's rebuilt state", log) == "done"
    assert len(calls) == 3
    assert calls[1] - calls[0] >= 0.2  # backed off between attempts
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("shard 3's rebuilt state: sink write failed (attempt 1)")
    assert messages[-1] == "shard 3's rebuilt state: sink write succeeded on attempt 3"


def test_an_outage_longer_than_the_timeout_raises_the_last_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls, write = failing(1000)
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="tests.retry"), pytest.raises(SinkError):
        with_sink_retries(write, 0.6, "batch 7", log)
    assert 0.6 <= time.monotonic() - started < 3.0
    assert len(calls) >= 2
    assert "batch 7: sink still failing after" in caplog.records[-1].getMessage()


def test_no_timeout_fails_at_once_and_other_errors_are_not_retried() -> None:
    calls, write = failing(1)
    with pytest.raises(SinkError):
        with_sink_retries(write, 0, "batch 1", log)
    assert len(calls) == 1
    calls, write = failing(1, ValueError("records lack RECORD_FRAME_SCHEMA columns"))
    with pytest.raises(ValueError):
        with_sink_retries(write, 10.0, "batch 2", log)
    assert len(calls) == 1
