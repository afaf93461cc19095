"""A lease contender in a process of its own, driven line by line on stdin (the lease tests).

``python -m tests.connectors.sinks.lease_holder <sink url>``, then one command per line, one
answer per line: ``acquire NAME TTL_MS`` → ``held EPOCH`` or ``busy``; ``contend NAME TTL_MS
SECONDS`` (a standby polling every 100 ms, a failing poll counted as refused) → ``held EPOCH``
at once when taken, else ``busy POLLS FAILED``; ``keep TTL_MS PERIOD_MS`` (renew in the
background) → ``keeping``; ``write BATCH_ID`` → ``wrote`` or ``lost <message>``; ``quiet
SECONDS`` (a fenced write transaction whose client then sends nothing) → ``inside`` once past
its fencing check, then ``wrote`` or ``failed <message>``; ``release`` → ``released``.
"""

from __future__ import annotations

import sys
import threading
import time

from connectors.sinks import LeaseLost, Sink, SinkError, lease_holder, open_sink
from connectors.sinks.core import Statements
from tests.connectors.sinks.record_frames import commit, frame, progress


def _keep(sink: Sink, ttl_ms: int, period_ms: int) -> None:
    stop = threading.Event()
    while not stop.wait(period_ms / 1000):
        try:
            sink.renew_lease(ttl_ms)
        except LeaseLost:
            return


def _contend(sink: Sink, name: str, ttl_ms: int, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    holder = lease_holder()
    polls = failed = 0
    while time.monotonic() < deadline:
        polls += 1
        try:
            held = sink.acquire_lease(name, holder, ttl_ms)
        except SinkError:
            failed += 1
        else:
            if held is not None:
                return f"held {held.epoch}"
        time.sleep(0.1)
    return f"busy {polls} {failed}"


def _answer(sink: Sink, command: list[str]) -> str:
    match command:
        case ["acquire", name, ttl_ms]:
            held = sink.acquire_lease(name, lease_holder(), int(ttl_ms))
            return f"held {held.epoch}" if held else "busy"
        case ["contend", name, ttl_ms, seconds]:
            return _contend(sink, name, int(ttl_ms), float(seconds))
        case ["keep", ttl_ms, period_ms]:
            args = (sink, int(ttl_ms), int(period_ms))
            threading.Thread(target=_keep, args=args, daemon=True).start()
            return "keeping"
        case ["write", batch_id]:
            try:
                records = frame(commit("zombie", "t", 0, int(batch_id)))
                sink.write_batch(int(batch_id), records, progress(int(batch_id)))
            except LeaseLost as lost:
                return f"lost {lost}"
            return "wrote"
        case ["quiet", seconds]:

            def quiet(tx: Statements) -> bool:
                print("inside", flush=True)
                time.sleep(float(seconds))
                return True

            try:
                sink._write(quiet, "quiet write")  # the fenced transaction every write runs in
            except SinkError as failed:
                return f"failed {failed}"
            return "wrote"
        case ["release"]:
            sink.release_lease()
            return "released"
    raise ValueError(f"unknown command {command}")


def main() -> None:
    sink = open_sink(sys.argv[1])
    for line in sys.stdin:
        print(_answer(sink, line.split()), flush=True)
    sink.close()


if __name__ == "__main__":
    main()
