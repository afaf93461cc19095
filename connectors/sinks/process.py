"""A sink's batch writes in a child process: a connection of its own to the same sink, fenced at
each write by the lease its parent's sink holds then, so that a large batch's write runs beside
the parent's own work (in one process, Python's GIL would take turns between them).

The child reports its writes through the parent sink's :class:`WriteSignals` (shared memory):
the lease keeper sees a write of the child's that holds the write lock, and its renewals, as its
own. It ignores SIGINT and SIGTERM (the parent stops it) and ends when the parent does: its
pipe closes. A write it leaves unfinished rolls back; one it finished is the batch's, which a
replay skips."""

from __future__ import annotations

import logging
import multiprocessing
import signal
from multiprocessing.connection import Connection
from typing import Any

import pyarrow as pa

from connectors.sinks import BatchProgress, Sink, SinkWriteError, open_sink
from connectors.sinks.core import WriteSignals

log = logging.getLogger(__name__)

#: How often a wait for the child checks that it is alive.
_ALIVE_CHECK_S = 1.0


class SinkProcess:
    """Writes batches of ``sink`` (opened with ``open_sink``) in a child process, one at a time:
    :meth:`submit`, then :meth:`result`. The child starts with the first batch."""

    def __init__(self, sink: Sink) -> None:
        if sink.opened_with is None:
            raise ValueError(f"{sink.url} was not opened by open_sink: no child can reopen it")
        self._sink = sink
        self._process: multiprocessing.process.BaseProcess | None = None
        self._pipe: Connection | None = None

    def submit(
        self, batch_id: int, records: pa.Table, progress: BatchProgress, activate: bool
    ) -> None:
        """Start ``Sink.write_batch`` of the batch in the child, fenced by the parent sink's
        lease now, then the status ACTIVE when ``activate``."""
        request = (batch_id, records, progress, activate, self._sink.fence)
        try:
            (self._pipe if self._alive() else self._start()).send(request)  # type: ignore[union-attr]
        except OSError:  # it ended just now
            self._start().send(request)

    @property
    def pid(self) -> int | None:
        """The child's process id; None before it started."""
        return None if self._process is None else self._process.pid

    def result(self) -> bool:
        """Wait for the submitted write: ``write_batch``'s answer, or its error raised here
        (SinkWriteError when the child exited: it is started again with the next batch)."""
        process, pipe = self._process, self._pipe
        assert process is not None and pipe is not None, "submit first"
        try:
            while not pipe.poll(_ALIVE_CHECK_S):
                if not process.is_alive():
                    break
            written, answer = pipe.recv()
        except (EOFError, OSError) as exc:
            self.close()
            raise SinkWriteError(
                f"{self._sink.url}: the sink's writer process ended (exit code "
                f"{process.exitcode}) before the batch's write did: replaying it is safe"
            ) from exc
        if not written:
            raise answer
        return bool(answer)

    def close(self, timeout_s: float = 10.0) -> None:
        """End the child: once its write in progress, if any, ended."""
        process, pipe = self._process, self._pipe
        self._process = self._pipe = None
        if pipe is not None:
            pipe.close()  # the child's next receive ends it
        if process is not None:
            process.join(timeout_s)
            if process.is_alive():
                process.kill()
                process.join()

    def _alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def _start(self) -> Connection:
        self.close()
        url, options = self._sink.opened_with  # type: ignore[misc]
        context = multiprocessing.get_context("spawn")
        signals = self._sink.share_write_signals(context)
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_serve,
            args=(theirs, url, options, signals, logging.getLogger().getEffectiveLevel()),
            name="sink-writer",
            daemon=True,
        )
        process.start()
        theirs.close()
        self._process, self._pipe = process, ours
        return ours


def _serve(
    pipe: Connection, url: str, options: dict[str, Any], signals: WriteSignals, level: int
) -> None:
    """The child: each request a batch's write, answered (written, answer or error), until the
    pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sink: Sink | None = None
    try:
        while True:
            try:
                batch_id, records, progress, activate, fence = pipe.recv()
            except (EOFError, OSError):
                return
            reply: tuple[bool, Any]
            try:
                if sink is None:  # opened with the first write, tried again with the next
                    sink = open_sink(url, **options)
                    sink.write_signals = signals
                if fence is not None:
                    sink.fence_writes(*fence)
                reply = (True, sink.write_batch(batch_id, records, progress))
                if activate:
                    sink.set_status("ACTIVE")
            except Exception as failure:
                reply = (False, failure)
            try:
                pipe.send(reply)
            except (EOFError, OSError):
                return
            except Exception as unpicklable:  # an error that cannot cross: its text does
                pipe.send((False, SinkWriteError(f"{reply[1]!r} ({unpicklable})")))
    finally:
        if sink is not None:
            sink.close()
