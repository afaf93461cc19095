"""Benchmark of ingest decoding: raw OffsetCommit messages to a request frame, with and without
the fast reading of valid commits.

Run with ``python -m tests.bench.bench_decode [--rounds 7]``. Times ``decode_request_messages``
(valid commits read by ``state.formats.request_fast``) against the same frame with every message
through ``request_codec.decode_request`` on batches of encoded commits: (a) 1,000 messages x 100
partitions, (b) 100 x 1,000, (c) 100 x 10. Partitions have differing offsets, a few leader
epochs, and metadata "" but for 5% of them. Prints the min and the median of ``--rounds`` runs of
each, after checking that both give the same frame.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import pyarrow as pa

from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.engine.request_frame import SegmentedFrame, decode_request_messages
from state.formats.request_codec import decode_request, encode_request

Messages = list[tuple[int, int, bytes]]

#: (messages, partitions per message, partitions per topic).
WORKLOADS = [(1_000, 100, 10), (100, 1_000, 50), (100, 10, 10)]


def commit_messages(count: int, partitions: int, per_topic: int, seed: int = 7) -> Messages:
    """``count`` ingest messages, each an OffsetCommit of ``partitions`` partitions."""
    rng = random.Random(seed)
    messages = []
    for i in range(count):
        parts = tuple(
            PartitionCommit(
                f"topic-{p // per_topic}",
                p % per_topic,
                rng.randrange(10**12),
                rng.choice((-1, 0, 3)),
                "" if rng.random() < 0.95 else f"consumer-{i}-meta",
            )
            for p in range(partitions)
        )
        request = OffsetCommitRequest(
            f"req-{i:08d}", f"consumer-group-{i % 37}", parts, 5, f"consumer-{i % 7}-1a2b"
        )
        messages.append((1_000 + i, 1_700_000_000_000 + i, encode_request(request)))
    return messages


def decode_exactly(messages: Messages) -> pa.Table:
    """``decode_request_messages`` without the fast path: every message through the exact
    decoder."""
    frame = SegmentedFrame()
    for offset, timestamp_ms, value in messages:
        frame.add(decode_request(value), offset, timestamp_ms)
    return frame.table()


def timings(decode: Callable[[Messages], pa.Table], messages: Messages, rounds: int) -> list[float]:
    """Seconds per run of ``decode(messages)``, ``rounds`` runs after one warm-up."""
    decode(messages)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        decode(messages)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"ms per batch, min / median of {args.rounds} runs")
    print(f"{'workload':>24} | {'exact':>15} | {'fast':>15} | speed-up (min, median)")
    for count, partitions, per_topic in WORKLOADS:
        messages = commit_messages(count, partitions, per_topic)
        if not decode_request_messages(messages).equals(decode_exactly(messages)):
            raise SystemExit("the fast path's frame differs from the exact one")
        exact = timings(decode_exactly, messages, args.rounds)
        fast = timings(decode_request_messages, messages, args.rounds)

        def ms(times: list[float]) -> str:
            return f"{min(times) * 1e3:6.1f} / {statistics.median(times) * 1e3:6.1f}"

        medians = statistics.median(exact) / statistics.median(fast)
        print(
            f"{count:>5,} msgs x {partitions:>5,} parts | {ms(exact)} | {ms(fast)} | "
            f"{min(exact) / min(fast):.1f}x, {medians:.1f}x"
        )


if __name__ == "__main__":
    main()
