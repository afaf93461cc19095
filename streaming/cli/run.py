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
from dataclasses import fields, replace
from typing import Any, Final

from connectors.sinks.url import parse_sink_url
from streaming.cli.errors import UsageError
from streaming.cli.kafka_flags import add_bootstrap_server, add_kafka_options
from streaming.config import JobConfig, load_config

#: How long a query that ended may take to be replaced by the job's own restart.
RESTART_GRACE_S: Final = 60.0
LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS: Final = ("debug", "info", "warning", "error")
#: Libraries that log at INFO what a user cannot act on (kafka-python: every connection opened
#: and closed; py4j: every callback; librdkafka, the job's producer). They log warnings and
#: errors only, unless --log-level debug.
LIBRARY_LOGGERS: Final = ("kafka", "py4j", "urllib3", "librdkafka")


def add_log_level_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, default: str = "info"
) -> None:
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=default,
        help=f"the project's log lines from this level on (default {default}); libraries "
        "warn only, unless debug",
    )


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per JobConfig field, plus --config and --duration."""
    parser.add_argument("--config", help="TOML file with JobConfig keys")
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="single local broker defaults: replication factor 1, min.insync.replicas 1",
    )
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    add_log_level_argument(parser)
    for f in fields(JobConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.name == "bootstrap_servers":
            add_bootstrap_server(parser, "override bootstrap_servers", dest=f.name, default=None)
        elif f.name == "kafka_options":
            add_kafka_options(parser, "a Kafka client option over kafka_options (repeatable)")
        elif f.name == "keep_history":
            parser.add_argument(flag, action="store_const", const=True, default=None)
        else:
            parser.add_argument(flag, dest=f.name, default=None, help=f"override {f.name}")


def config_from_args(args: argparse.Namespace) -> JobConfig:
    """The job's configuration: flags over environment over ``--config`` file (each
    ``--kafka-option`` over the same key of ``kafka_options``); ``--embedded`` defaults the
    replication settings to a single broker's. A :class:`UsageError` names what is wrong,
    the sink URL included."""
    overrides: dict[str, Any] = {f.name: getattr(args, f.name, None) for f in fields(JobConfig)}
    overrides["kafka_options"] = None
    if args.embedded:
        overrides["replication_factor"] = overrides["replication_factor"] or 1
        overrides["min_insync_replicas"] = overrides["min_insync_replicas"] or 1
    try:
        config = load_config(args.config, overrides=overrides)
        parse_sink_url(config.sink_url)
    except (OSError, ValueError) as exc:
        raise UsageError(f"configuration: {exc}") from None
    options = dict(getattr(args, "kafka_option", None) or [])
    if options:
        config = replace(config, kafka_options={**config.kafka_options, **options})
    return config


def configure_logging(level: str = "info") -> None:
    """Log lines with time, level and logger name on stderr: the project's from ``level`` on
    (at INFO: one line per micro-batch with its figures), libraries' warnings and errors."""
    numeric = getattr(logging, level.upper())
    logging.basicConfig(level=numeric, format=LOG_FORMAT)
    logging.getLogger().setLevel(numeric)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(numeric if numeric <= logging.DEBUG else logging.WARNING)


def run(args: argparse.Namespace) -> int:
    """Start the job and wait until a signal, ``--duration`` or the query's end; returns 1
    when the query failed, else 0. The job is stopped on the way out, whatever happened."""
    from streaming.job import OffsetsJob

    config = config_from_args(args)
    job = OffsetsJob.create(config)
    try:
        return run_until_stopped(job, job.start(), args.duration)
    finally:
        job.stop()


def run_until_stopped(runner: Any, query: Any, duration: float | None) -> int:
    """Wait until SIGINT/SIGTERM, ``duration`` seconds or the end of ``runner.query`` (a job's
    or a mirror's, which may replace its query after Spark's replayed-batch bug); returns 1 when
    the query failed, else 0. The caller stops the runner."""
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        logging.getLogger(__name__).info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    deadline = None if duration is None else time.monotonic() + duration
    while not stop.is_set():
        query = runner.query or query
        if not query.isActive and not query_replaced(runner, query, stop, RESTART_GRACE_S):
            break
        stop.wait(0.5)
        if deadline is not None and time.monotonic() >= deadline:
            break
    query = runner.query or query
    error = query.exception()
    if error is not None:
        # One line (Spark's message carries the JVM's stack trace); all of it at debug.
        text = str(error)
        if not logging.getLogger().isEnabledFor(logging.DEBUG):
            text = next((line.strip() for line in text.splitlines() if line.strip()), text)
            text += " (--log-level debug shows the stack trace)"
        print(f"error: the query failed: {text}", file=sys.stderr)
        return 1
    return 0


def query_replaced(job: Any, ended: Any, stop: threading.Event, grace_s: float) -> bool:
    """Whether ``job.query`` (a job's or a mirror's) becomes another, active query within
    ``grace_s``: the query is restarted after Spark's replayed-batch bug only."""
    from streaming.job import is_replayed_batch_bug

    deadline = time.monotonic() + grace_s
    while not stop.is_set() and time.monotonic() < deadline:
        current = job.query
        if current is not None and current is not ended and current.isActive:
            return True
        if not is_replayed_batch_bug(ended.exception()):
            return False  # stopped, or a failure the job does not restart
        stop.wait(0.2)
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m streaming`` (and spark-submit's entry file): parse the job flags and run."""
    from streaming.cli.failures import report_failure

    parser = argparse.ArgumentParser(prog="python -m streaming", description=__doc__)
    add_job_arguments(parser)
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        return run(args)
    except (Exception, KeyboardInterrupt) as exc:
        servers = args.bootstrap_servers or ""
        return report_failure(
            exc, sys.stdout, sys.stderr, debug=args.log_level == "debug", kafka_servers=servers
        )
