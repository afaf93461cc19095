"""Recovery time after a driver SIGKILL: kill → the first commit the restarted driver answers.

    python -m tests.bench.bench_recovery [--kills 3] [--rate 20] [--bootstrap HOST:PORT]
                                         [--json FILE]

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

Starts a one-node broker of its own unless ``--bootstrap`` names one.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from connectors.runtime import runtime_dir
from tests.bench.broker import bench_broker
from tests.bench.results import print_and_save
from tests.fixtures.job import prepare_topics
from tests.reliability.load import CommitLoad, DriverProcess, driver
from tests.reliability.support import last_batch_id, reliability_config, wait_until
from tests.streaming.helpers import read_all

#: Python logging's timestamp at the start of the driver's log lines.
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


@dataclass(frozen=True)
class Recovery:
    kill: int
    session_s: float | None
    query_s: float | None
    first_batch_s: float | None
    ack_s: float


def _stamped(line: str) -> float | None:
    match = _STAMP.match(line)
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


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
        elif "consumer_offsets.batches: batch" in line:
            found.setdefault("first_batch_s", at - killed_at)
    return found


def first_answer_after(bootstrap: str, topic: str, after_s: float) -> float | None:
    """CreateTime (epoch s) of the earliest answer produced after ``after_s``."""
    times = [r.timestamp / 1000 for r in read_all(bootstrap, topic) if r.timestamp / 1000 > after_s]
    return min(times) if times else None


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--rate", type=float, default=20.0, help="commit requests per second")
    parser.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="bench-recovery-", dir=runtime_dir()))
    load_average_start = os.getloadavg()
    bootstrap, cluster = bench_broker(args.bootstrap)
    try:
        recoveries = measure(bootstrap, folder, args.kills, args.rate)
    finally:
        if cluster is not None:
            cluster.stop()
    results: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "load_average_start": load_average_start,
        "load_average_end": os.getloadavg(),
        "kills": [asdict(r) for r in recoveries],
        "ack_s_median": statistics.median(r.ack_s for r in recoveries),
    }
    print_and_save(results, report(recoveries), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
