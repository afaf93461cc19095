"""Request deadlines over columns: ``state.coordinator.deadlines`` for a whole batch at once.

Every row of a request carries its message's timestamp and timeout, so the decision is one
numpy comparison per row, the same for all rows of a request: the message's age at the batch
against its timeout. Only the reasons of the requests refused are built one by one (they name
each deadline).
"""

from __future__ import annotations

import numpy as np

from state.coordinator.config import CoordinatorConfig
from state.coordinator.deadlines import request_deadline_ms, timed_out_reason
from state.engine.apply.batch import Batch


def timed_out_rows(batch: Batch, now_ms: int, config: CoordinatorConfig) -> np.ndarray:
    """Per row: whether its request is refused by a batch of time ``now_ms``
    (``deadlines.is_timed_out``; a request without a timeout, negative in ``batch.timeout``, has
    the coordinator's ``request_timeout_ms``)."""
    age = now_ms - batch.timestamp
    if batch.timeout is None:  # no request of the batch has its own
        return age >= config.request_timeout_ms
    return age >= np.where(batch.timeout < 0, config.request_timeout_ms, batch.timeout)


def timed_out_reasons(
    batch: Batch, rows: np.ndarray, now_ms: int, config: CoordinatorConfig
) -> list[str | None]:
    """The REQUEST_TIMED_OUT reason of each of ``rows`` (batch row indexes)."""
    timeouts = [None] * rows.size if batch.timeout is None else batch.timeout[rows].tolist()
    return [
        timed_out_reason(request_deadline_ms(ts, timeout, config), now_ms)
        for ts, timeout in zip(batch.timestamp[rows].tolist(), timeouts, strict=True)
    ]
