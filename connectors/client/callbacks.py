"""The callback thread of ``commit_async``: callers' callbacks run there, in completion order.

Futures complete on the response thread, which must never block; a caller's callback may block
(or commit again), so it runs on this separate single thread instead. A callback that raises is
logged, never propagated: the commit's outcome is already decided.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from connectors.client.results import CommitCallback, CommitResult

log = logging.getLogger(__name__)

__all__ = ["CallbackThread"]


class CallbackThread:
    """Runs ``callback(result, None)`` or ``callback(None, exception)`` on one thread."""

    def __init__(self, client_id: str) -> None:
        self._name = f"{client_id}-cb"
        self._executor: ThreadPoolExecutor | None = None

    def start(self) -> None:
        """Create the thread's executor (when the client connects)."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=self._name)

    def run(self, callback: CommitCallback, outcome: CommitResult | BaseException) -> None:
        """Queue ``callback`` with ``outcome``; run it here when there is no thread (not started
        yet, or shut down) rather than drop it."""

        def call() -> None:
            try:
                if isinstance(outcome, CommitResult):
                    callback(outcome, None)
                else:
                    callback(None, outcome)
            except Exception:
                log.exception("commit callback %r raised", callback)

        executor = self._executor
        if executor is None:
            call()  # failed before the client started: no callback thread yet
            return
        try:
            executor.submit(call)
        except RuntimeError:  # shut down: run it here rather than drop it
            call()

    def shutdown(self) -> None:
        """Run the queued callbacks, then stop the thread (if it was started)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
