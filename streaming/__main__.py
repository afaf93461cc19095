"""``python -m streaming``: run the offset manager's streaming job (also ``consumer-offsets run``).

Flags override ``CONSUMER_OFFSETS_*`` environment variables, which override the ``--config`` TOML
file. The job runs until interrupted (SIGINT/SIGTERM stop the query cleanly) or, with
``--duration``, for that many seconds.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from streaming.config import JobConfig, load_config


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per JobConfig field, plus --config and --duration."""
    parser.add_argument("--config", help="TOML file with JobConfig keys")
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="single local broker defaults: replication factor 1, min.insync.replicas 1",
    )
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    for f in fields(JobConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.name == "keep_history":
            parser.add_argument(flag, action="store_const", const=True, default=None)
        else:
            parser.add_argument(flag, dest=f.name, default=None, help=f"override {f.name}")


def config_from_args(args: argparse.Namespace) -> JobConfig:
    overrides: dict[str, Any] = {f.name: getattr(args, f.name, None) for f in fields(JobConfig)}
    if args.embedded:
        overrides["replication_factor"] = overrides["replication_factor"] or 1
        overrides["min_insync_replicas"] = overrides["min_insync_replicas"] or 1
    return load_config(args.config, overrides=overrides)


#: Restarts after Spark's replay progress bug (see ``streaming.job.is_replay_metrics_failure``).
MAX_REPLAY_RESTARTS = 3


def run(args: argparse.Namespace) -> int:
    from streaming.job import OffsetsJob, is_replay_metrics_failure

    config = config_from_args(args)
    job = OffsetsJob.create(config)
    query = job.start()
    restarts = 0
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        logging.getLogger(__name__).info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    deadline = None if args.duration is None else time.monotonic() + args.duration
    try:
        while True:
            while not stop.is_set() and query.isActive:
                stop.wait(0.5)
                if deadline is not None and time.monotonic() >= deadline:
                    break
            error = query.exception()
            if (
                error is None
                or stop.is_set()
                or restarts >= MAX_REPLAY_RESTARTS
                or not is_replay_metrics_failure(error)
            ):
                break
            # The replayed batch is committed; only Spark's progress report failed.
            restarts += 1
            logging.getLogger(__name__).warning(
                "query failed after replaying a batch (SPARK-55271); restarting from the "
                "checkpoint (%d/%d)",
                restarts,
                MAX_REPLAY_RESTARTS,
            )
            query = job.start()
        if query.exception() is not None:
            print(f"query failed: {query.exception()}", file=sys.stderr)
            return 1
        return 0
    finally:
        job.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streaming", description=__doc__)
    add_job_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
