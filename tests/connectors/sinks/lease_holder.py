"""A lease contender in a process of its own, driven line by line on stdin (the lease tests).

``python -m tests.connectors.sinks.lease_holder <sink url>``, then one command per line, one
answer per line: ``acquire NAME TTL_MS`` → ``held EPOCH`` or ``busy``; ``keep TTL_MS PERIOD_MS``
(renew in the background) → ``keeping``; ``write BATCH_ID`` → ``wrote`` or ``lost <message>``;
``release`` → ``released``.
"""

from __future__ import annotations

import sys
import threading

from connectors.sinks import LeaseLost, Sink, lease_holder, open_sink
from tests.connectors.sinks.record_frames import commit, frame, progress


def _keep(sink: Sink, ttl_ms: int, period_ms: int) -> None:
    stop = threading.Event()
    while not stop.wait(period_ms / 1000):
        try:
            sink.renew_lease(ttl_ms)
        except LeaseLost:
            return


def _answer(sink: Sink, command: list[str]) -> str:
    match command:
        case ["acquire", name, ttl_ms]:
            held = sink.acquire_lease(name, lease_holder(), int(ttl_ms))
            return f"held {held.epoch}" if held else "busy"
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
