"""Recovery time after a driver SIGKILL: kill → the first commit the restarted driver answers.

    python -m tests.bench.bench_recovery [--kills 3] [--rate 20] [--bootstrap HOST:PORT]
                                         [--json FILE]
    python -m tests.bench.bench_recovery --standby [--kills 5] [--rate 100] [--partitions 10]
                                         [--standby-waits S]

Runs the job as its own driver process (``python -m streaming``, as the reliability tests do)
under a steady commit load, SIGKILLs its process group inside a micro-batch, restarts it at
once, and per kill prints where the time went, from the new driver's log and the responses
topic:

- ``session``: kill → the sink opened (Python, the JVM and the Spark session started);
- ``query``: → the query started (topics checked, the checkpoint found, the plan built);
- ``first batch``: → the first micro-batch logged (the batch the kill interrupted, replayed:
  Python workers, the state store opened from the checkpoint);
- ``ack``: kill → the first answer the new driver produced (its CreateTime): what a client
  waits.

With ``--standby`` a warm standby (``python -m streaming --standby``) waits beside the active:
each kill SIGKILLs the active, the standby takes the lease and answers, and the killed driver is
restarted as the next standby (the next kill waits for its "standby ready"). Per kill: kill →
``lease acquired``, → ``first batch`` (the new holder's), → ``ack`` (its first answer), and the
ack p99 of the requests sent from 5 s before the kill to 25 s after it (answer CreateTime -
request CreateTime). ``--rate`` requests/s each commit ``--partitions`` partitions (default 100
x 10: 1,000 offsets/s); every request must be answered at the end.

Starts a one-node broker of its own unless ``--bootstrap`` names one.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from connectors.runtime import runtime_dir
from tests.bench.broker import bench_broker
from tests.bench.results import print_and_save
from tests.fixtures.job import prepare_topics
from tests.reliability.load import CommitLoad, DriverProcess, driver
from tests.reliability.support import (
    READ_COMMITTED,
    first_answer_after,
    last_batch_id,
    log_line_time,
    reliability_config,
    wait_until,
)
from tests.streaming.helpers import read_all

STANDBY = ("--standby",)
ACQUIRED = "lease job acquired"
BATCH_LOGGED = "consumer_offsets.batches: batch"
#: The requests of a kill's window: sent from this long before the kill to this long after.
WINDOW_BEFORE_S = 5.0
WINDOW_AFTER_S = 25.0


@dataclass(frozen=True)
class Recovery:
    kill: int
    session_s: float | None
    query_s: float | None
    first_batch_s: float | None
    ack_s: float


@dataclass(frozen=True)
class Takeover:
    kill: int
    #: Epoch seconds of the SIGKILL.
    killed_at: float
    acquired_s: float
    first_batch_s: float | None
    ack_s: float
    #: p99 of the ack latency of the requests sent in the kill's window.
    window_ack_p99_s: float | None = None


def _stamped(line: str) -> float | None:
    try:
        return log_line_time(line)
    except ValueError:
        return None


def phases(log_text: str, start: int, killed_at: float) -> dict[str, float]:
    """Seconds from ``killed_at`` to each phase of driver start number ``start``, from its log."""
    section = log_text.split(f"=== start {start} ===", 1)[-1].split("=== start ", 1)[0]
    found: dict[str, float] = {}
    for line in section.splitlines():
        at = _stamped(line)
        if at is None:
            continue
        if "opened sink" in line:
            found.setdefault("session_s", at - killed_at)
        elif "query started" in line:
            found.setdefault("query_s", at - killed_at)
        elif BATCH_LOGGED in line:
            found.setdefault("first_batch_s", at - killed_at)
    return found


def measure(bootstrap: str, folder: Path, kills: int, rate: float) -> list[Recovery]:
    config = reliability_config(bootstrap, folder)
    prepare_topics(config)
    load = CommitLoad(config, rate_per_s=rate)
    out: list[Recovery] = []
    with driver(config, folder / "driver.log") as job:
        job.start()
        load.start()
        try:
            for kill in range(1, kills + 1):
                _kill_inside_a_batch(job, config.sink_url)
                killed_at = time.time()
                job.kill()
                job.start()
                first_ack = _wait_for_answer(job, bootstrap, config.responses_topic, killed_at)
                found = phases(job.log_path.read_text(errors="replace"), job.starts, killed_at)
                out.append(
                    Recovery(
                        kill=kill,
                        session_s=found.get("session_s"),
                        query_s=found.get("query_s"),
                        first_batch_s=found.get("first_batch_s"),
                        ack_s=first_ack - killed_at,
                    )
                )
                print(_line(out[-1]), flush=True)
        finally:
            load.stop()
    return out


def measure_failover(
    bootstrap: str, folder: Path, kills: int, rate: float, partitions: int, waits_s: float = 0
) -> list[Takeover]:
    """``kills`` SIGKILLs of the active, each taken over by the warm standby once it waited
    ``waits_s`` ready."""
    config = reliability_config(bootstrap, folder)
    prepare_topics(config)
    load = CommitLoad(
        config,
        rate_per_s=rate,
        topic_partitions=partitions,
        partitions_per_request=(partitions, partitions),
    )
    out: list[Takeover] = []
    with (
        driver(config, folder / "first.log") as active,
        driver(config, folder / "second.log", STANDBY) as standby,
    ):
        active.start()
        active.wait_for_log(ACQUIRED, 300)
        standby.start()
        load.start()
        try:
            for kill in range(1, kills + 1):
                standby.wait_for_log("standby ready", 300)
                time.sleep(waits_s)
                _kill_inside_a_batch(active, config.sink_url)
                killed_at = time.time()
                active.kill()
                out.append(_takeover(kill, standby, killed_at))
                print(_takeover_line(out[-1]), flush=True)
                active.start(STANDBY)  # the killed driver comes back as the next standby
                active, standby = standby, active
            time.sleep(WINDOW_AFTER_S)  # the last kill's window
        finally:
            load.stop()
        produced = load.request_ids()
        answers: dict[str, float] = {}
        wait_until(
            lambda: produced
            <= set(_answer_times(config.bootstrap_servers, config.responses_topic, answers)),
            300,
            "every request answered",
            active.check_alive,
            interval_s=2,
        )
    sent_s = [s.sent_ms / 1000 for s in load.sent]
    print(
        f"{len(produced)} requests x {partitions} partitions in {max(sent_s) - min(sent_s):.0f} s "
        f"({len(produced) / (max(sent_s) - min(sent_s)):.0f} requests/s), every one answered",
        flush=True,
    )
    return [_with_window_p99(t, load, answers) for t in out]


def _takeover(kill: int, standby: DriverProcess, killed_at: float) -> Takeover:
    """What the standby's log and the responses topic tell of one takeover."""
    acquired = log_line_time(standby.wait_for_log(ACQUIRED, 120))
    # The new holder's first answer: one produced after it took the lease (the killed driver
    # may still have committed a batch between ``killed_at`` and its SIGKILL).
    first_ack = _wait_for_answer(
        standby, standby.config.bootstrap_servers, standby.config.responses_topic, acquired
    )
    batches = [
        at
        for line in standby.current_log().splitlines()
        if BATCH_LOGGED in line and (at := _stamped(line)) is not None and at >= acquired
    ]
    return Takeover(
        kill=kill,
        killed_at=killed_at,
        acquired_s=acquired - killed_at,
        first_batch_s=min(batches) - killed_at if batches else None,
        ack_s=first_ack - killed_at,
    )


def _answer_times(bootstrap: str, topic: str, into: dict[str, float]) -> dict[str, float]:
    """Request id → CreateTime (epoch s) of its first committed answer, filled into ``into``."""
    into.clear()
    for r in read_all(bootstrap, topic, READ_COMMITTED):
        if r.key is not None:
            rid = r.key.decode("utf-8")
            into[rid] = min(into.get(rid, math.inf), r.timestamp / 1000)
    return into


def _with_window_p99(t: Takeover, load: CommitLoad, answers: dict[str, float]) -> Takeover:
    """``t`` with the ack p99 of the requests sent in its window."""
    start, end = t.killed_at - WINDOW_BEFORE_S, t.killed_at + WINDOW_AFTER_S
    latencies = sorted(
        answers[s.request_id] - s.sent_ms / 1000
        for s in load.sent
        if start <= s.sent_ms / 1000 <= end
    )
    if not latencies:
        return t
    p99 = latencies[min(len(latencies) - 1, math.ceil(0.99 * len(latencies)) - 1)]
    return dataclasses.replace(t, window_ack_p99_s=p99)


def _wait_for_answer(job: DriverProcess, bootstrap: str, topic: str, after_s: float) -> float:
    """CreateTime of the first answer produced after ``after_s``, once there is one."""
    found: list[float] = []

    def answered() -> bool:
        at = first_answer_after(bootstrap, topic, after_s)
        found[:] = [] if at is None else [at]
        return at is not None

    wait_until(answered, 300, "the restarted driver's first answer", job.check_alive)
    return found[0]


def _kill_inside_a_batch(job: DriverProcess, sink_url: str) -> None:
    """Wait until the driver commits a new micro-batch, then a little into the next one."""
    wait_until(lambda: _batch_or_none(sink_url) is not None, 300, "a first batch", job.check_alive)
    batch = _batch_or_none(sink_url)
    wait_until(
        lambda: (_batch_or_none(sink_url) or -1) > (batch or -1),
        120,
        "a new micro-batch",
        job.check_alive,
        interval_s=0.2,
    )
    time.sleep(0.5)


def _batch_or_none(sink_url: str) -> int | None:
    try:
        return last_batch_id(sink_url)
    except Exception:
        return None


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _line(r: Recovery) -> str:
    return (
        f"kill {r.kill}: session {_seconds(r.session_s)} s, query {_seconds(r.query_s)} s, "
        f"first batch {_seconds(r.first_batch_s)} s, kill → ack {r.ack_s:.1f} s"
    )


def report(recoveries: Sequence[Recovery]) -> str:
    rows = ["| kill | → session s | → query s | → first batch s | → ack s |"]
    rows.append("|---|---|---|---|---|")
    for r in recoveries:
        rows.append(
            f"| {r.kill} | {_seconds(r.session_s)} | {_seconds(r.query_s)} | "
            f"{_seconds(r.first_batch_s)} | {r.ack_s:.1f} |"
        )
    acks = [r.ack_s for r in recoveries]
    rows.append("")
    rows.append(
        f"kill → ack: min {min(acks):.1f} s, median {statistics.median(acks):.1f} s, "
        f"max {max(acks):.1f} s over {len(acks)} kills"
    )
    return "\n".join(rows)


def _takeover_line(t: Takeover) -> str:
    return (
        f"kill {t.kill}: lease acquired {t.acquired_s:.1f} s, first batch "
        f"{_seconds(t.first_batch_s)} s, kill → ack {t.ack_s:.1f} s"
    )


def failover_report(takeovers: Sequence[Takeover]) -> str:
    rows = ["| kill | → lease acquired s | → first batch s | → ack s | ack p99 in the window s |"]
    rows.append("|---|---|---|---|---|")
    for t in takeovers:
        rows.append(
            f"| {t.kill} | {t.acquired_s:.1f} | {_seconds(t.first_batch_s)} | {t.ack_s:.1f} | "
            f"{_seconds(t.window_ack_p99_s)} |"
        )
    acks = [t.ack_s for t in takeovers]
    rows.append("")
    rows.append(
        f"kill → ack with a warm standby: min {min(acks):.1f} s, median "
        f"{statistics.median(acks):.1f} s, max {max(acks):.1f} s over {len(acks)} kills; "
        "every request answered"
    )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--standby", action="store_true", help="a warm standby takes over")
    parser.add_argument("--kills", type=int, default=None, help="default 3, 5 with --standby")
    parser.add_argument(
        "--rate", type=float, default=None, help="commit requests/s (20, 100 with --standby)"
    )
    parser.add_argument("--partitions", type=int, default=10, help="per request (--standby)")
    parser.add_argument(
        "--standby-waits",
        type=float,
        default=0,
        metavar="S",
        help="seconds the standby waits, ready, before each kill (a real one waits for hours)",
    )
    parser.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    kills = args.kills or (5 if args.standby else 3)
    rate = args.rate or (100.0 if args.standby else 20.0)
    folder = Path(tempfile.mkdtemp(prefix="bench-recovery-", dir=runtime_dir()))
    load_average_start = os.getloadavg()
    bootstrap, cluster = bench_broker(args.bootstrap)
    try:
        if args.standby:
            runs: Sequence[Recovery | Takeover] = measure_failover(
                bootstrap, folder, kills, rate, args.partitions, args.standby_waits
            )
        else:
            runs = measure(bootstrap, folder, kills, rate)
    finally:
        if cluster is not None:
            cluster.stop()
    results: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "load_average_start": load_average_start,
        "load_average_end": os.getloadavg(),
        "standby": args.standby,
        "standby_waits_s": args.standby_waits,
        "rate_per_s": rate,
        "kills": [asdict(r) for r in runs],
        "ack_s_median": statistics.median(r.ack_s for r in runs),
    }
    text = (
        failover_report([r for r in runs if isinstance(r, Takeover)])
        if args.standby
        else report([r for r in runs if isinstance(r, Recovery)])
    )
    print_and_save(results, text, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
