"""``python -m streaming``: run the offset manager's streaming job (also ``consumer-offsets run``).

Flags override ``CONSUMER_OFFSETS_*`` environment variables, which override the ``--config`` TOML
file. The job runs until interrupted (SIGINT/SIGTERM stop the query cleanly) or, with
``--duration``, for that many seconds. A Kafka cluster that does not answer fails it within
seconds, before anything is created (exit 1); a signal before its first micro-batch completed
ends it with one line (exit 130). One job of a deployment runs: it holds the sink's lease "job"
(``streaming.spark.lease_keeper``); another is refused (exit 1) unless ``--standby``, which warms
up and waits to take over. A job that lost the lease exits at once with status 3.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import Field, fields
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from streaming.cli.context import load_job_config
from streaming.cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_LEASE_LOST
from streaming.cli.kafka_flags import add_bootstrap_server, add_kafka_options
from streaming.config import ENV_PREFIX, JobConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.spark.job import OffsetsJob
    from streaming.spark.lease_keeper import LeaseKeeper

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS: Final = ("debug", "info", "warning", "error")
#: Libraries that log at INFO what a user cannot act on (kafka-python: every connection opened
#: and closed; py4j: every callback; librdkafka, the job's producer). They log warnings and
#: errors only, unless --log-level debug.
LIBRARY_LOGGERS: Final = ("kafka", "py4j", "urllib3", "librdkafka")
#: The signals that stop the job or the mirror: Ctrl-C and a service manager's stop.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


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


def add_standby_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--standby",
        action="store_true",
        help=f"start warm (Spark session, Python workers, sink) and wait to take over when the "
        f"deployment's active {what} stops or dies; without it, exit 1 while another holds the "
        "lease",
    )


#: Where every setting is described in full, with its default.
EXAMPLE_CONFIG: Final = "deploy/config.example.toml"


def settings_epilog(env_prefix: str, table: str | None = None) -> str:
    """The ``--help`` epilog of a command whose flags are settings: where each comes from."""
    where = f"the [{table}] table of the --config file" if table else "the --config file"
    return (
        f"Each setting comes from, the last one found winning: its default, {where} (TOML, "
        f"the setting's name as the key: {EXAMPLE_CONFIG} lists them all, with their meaning), "
        f"the environment variable {env_prefix}<NAME> (e.g. {env_prefix}SINK_URL), the flag."
    )


def field_default(kind: type, name: str) -> Any:
    """The default of ``kind``'s field ``name`` (``dataclasses.MISSING`` when it has none)."""
    (found,) = [f for f in fields(kind) if f.name == name]
    if found.default_factory is not dataclasses.MISSING:
        return found.default_factory()
    return found.default


def setting_help(kind: type, name: str) -> str:
    """``--help``'s text for the field ``name`` of ``kind``: the first sentence of its ``#:``
    comment in the dataclass's source, and its default."""
    try:
        lines = inspect.getsource(kind).splitlines()
    except (OSError, TypeError):
        lines = []
    comment: list[str] = []
    for line in lines:
        if line.strip().startswith("#:"):
            comment.append(line.strip()[2:].strip())
        elif re.match(rf" {{4}}{name}: ", line):
            break
        else:
            comment = []
    else:
        comment = []
    doc = re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join(comment).replace("``", ""))[0]
    default = field_default(kind, name)
    if default is dataclasses.MISSING:
        text = f"{doc} (required)"
    elif default is None or default == () or default == {} or default == "":
        text = doc  # what unset means, the comment says
    else:
        text = f"{doc} (default: {str(default).lower() if isinstance(default, bool) else default})"
    return text.strip().replace("%", "%%")


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per JobConfig field (its help: the field's meaning and default), plus
    --config, --embedded and --duration."""
    parser.add_argument(
        "--config", metavar="FILE", help=f"TOML file of settings, as {EXAMPLE_CONFIG}"
    )
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="single local broker defaults: replication factor 1, min.insync.replicas 1",
    )
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    add_standby_argument(parser, "job")
    add_log_level_argument(parser)
    parser.epilog = settings_epilog(ENV_PREFIX)
    settings = parser.add_argument_group("settings (JobConfig)")
    for f in fields(JobConfig):
        flag = "--" + f.name.replace("_", "-")
        text = setting_help(JobConfig, f.name)
        if f.name == "bootstrap_servers":
            add_bootstrap_server(settings, text, dest=f.name, default=None)
        elif f.name == "kafka_options":
            add_kafka_options(settings, f"one of kafka_options, repeatable: {text}")
        elif f.name == "keep_history":
            settings.add_argument(flag, action="store_const", const=True, default=None, help=text)
        else:
            settings.add_argument(flag, dest=f.name, default=None, metavar=_metavar(f), help=text)


def _metavar(f: Field[Any]) -> str:
    """A flag's placeholder by its field: MS, SECONDS, N (an int) or its name."""
    if f.name.endswith("_ms"):
        return "MS"
    if f.name.endswith("_s"):
        return "SECONDS"
    return "N" if "int" in str(f.type) else f.name.upper()


def config_from_args(args: argparse.Namespace) -> JobConfig:
    """The job's configuration: flags over environment over ``--config`` file; ``--embedded``
    defaults replication to a single broker's. :class:`UsageError` names what is wrong."""
    overrides: dict[str, Any] = {f.name: getattr(args, f.name, None) for f in fields(JobConfig)}
    overrides["kafka_options"] = None
    if args.embedded:
        overrides["replication_factor"] = overrides["replication_factor"] or 1
        overrides["min_insync_replicas"] = overrides["min_insync_replicas"] or 1
    return load_job_config(args.config, overrides, args.kafka_option)


def configure_logging(level: str = "info") -> None:
    """Log lines on stderr: the project's from ``level`` on, libraries' warnings and errors."""
    numeric = getattr(logging, level.upper())
    logging.basicConfig(level=numeric, format=LOG_FORMAT)
    logging.getLogger().setLevel(numeric)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(numeric if numeric <= logging.DEBUG else logging.WARNING)


def run(args: argparse.Namespace) -> int:
    """Take the deployment's lease (``--standby``: warm up first, then wait for it), start the
    job and wait until a signal, ``--duration`` or the query's end; 1 when the query failed or
    another process holds the lease, :data:`EXIT_INTERRUPTED` for a signal before the first
    micro-batch completed, else 0. The job is stopped, then the lease released, on the way out;
    a lost lease ends the process with :data:`EXIT_LEASE_LOST`."""
    from streaming.spark.lease_keeper import LeaseHeld

    signals = StartUpSignals()
    try:
        return _start_and_run(args, signals)
    except LeaseHeld as held:
        print(f"error: {held}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        signals.end()


def open_keeper(sink_url: str, name: str, ttl_ms: int) -> LeaseKeeper:
    """A keeper of lease ``name`` on a sink of its own (made now if there is none)."""
    from connectors.sinks import open_sink
    from streaming.spark.lease_keeper import LeaseKeeper

    return LeaseKeeper(open_sink(sink_url), name, ttl_ms)


def warm_up(keeper: LeaseKeeper, master: str | None) -> SparkSession:
    """A standby's start: its registry row WARMING, the Spark session and Python workers up."""
    from streaming.spark.processor import warm_python_workers
    from streaming.spark.session import spark_session

    keeper.register("WARMING")
    spark = spark_session(master=master)
    warm_python_workers(spark)
    return spark


class _HasSink(Protocol):
    sink: Any


W = TypeVar("W", bound=_HasSink)


def hold_lease(
    keeper: LeaseKeeper,
    standby: bool,
    signals: StartUpSignals,
    master: str | None,
    create: Callable[[SparkSession], W],
) -> W | None:
    """``create(spark)`` (the job or the mirror) once this process holds the lease, its sink
    fenced by it. A standby warms up and creates first (its sink open), then waits; else the
    lease is taken before the JVM starts, so a second active is refused (LeaseHeld) in a
    second. None when a signal ended a standby's wait (what it created is closed)."""
    from streaming.spark.session import spark_session

    if standby:
        created = create(warm_up(keeper, master))
        signals.creating()  # from now on a signal ends the wait below
        if keeper.wait(signals.requested.is_set) is None:
            created.sink.close()
            return None
    else:
        keeper.take()
        spark = spark_session(master=master)
        signals.creating()
        created = create(spark)
    keeper.fence(created.sink)
    return created


def _start_and_run(args: argparse.Namespace, signals: StartUpSignals) -> int:
    from streaming.spark.job import OffsetsJob, StartInterrupted
    from streaming.spark.lease_keeper import JOB_LEASE

    config = config_from_args(args)
    require_kafka(
        config.bootstrap_servers,
        f"--bootstrap-server (or bootstrap_servers in --config, {ENV_PREFIX}BOOTSTRAP_SERVERS)",
    )
    keeper = open_keeper(config.sink_url, JOB_LEASE, config.lease_ttl_ms)
    try:
        job = hold_lease(
            keeper,
            args.standby,
            signals,
            config.spark_master,
            lambda spark: OffsetsJob.create(config, spark),
        )
        if job is None:
            return 0
        job.lease = keeper.fence_token()
        return _run_job(job, args.duration, signals)
    except StartInterrupted as stopped:
        print(f"interrupted during start-up ({stopped}); nothing was acknowledged", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        keeper.release()


def _run_job(job: OffsetsJob, duration: float | None, signals: StartUpSignals) -> int:
    """Start ``job`` and run it until stopped; stopped on the way out."""
    from streaming.spark.job import StartInterrupted

    try:
        job.start(signals.requested.is_set)
        code = run_until_stopped(job, duration, signals)
        if code == 0 and signals.requested.is_set() and _still_starting(job.sink):
            raise StartInterrupted("stopped before the first micro-batch completed")
        return code
    finally:
        job.stop()


def _still_starting(sink: Any) -> bool:
    """Whether the sink still says STARTING: no answer was sent yet."""
    from connectors.sinks import SinkError

    try:
        return bool(sink.status().status == "STARTING")
    except SinkError:
        return False


def require_kafka(servers: str, setting: str) -> None:
    """``ConnectionError`` naming ``servers`` and the ``setting`` that gave them when none
    accepts a connection: in seconds, before anything is created."""
    from streaming.spark.heartbeat import kafka_reachable

    reason = kafka_reachable(servers)
    if reason is not None:
        raise ConnectionError(
            f"no Kafka broker answers at {servers} ({reason}): check {setting} and that the "
            "broker is running; nothing was created"
        )


class StartUpSignals:
    """SIGINT and SIGTERM while the job (or the mirror) starts, taken by a thread of their own:
    in the main thread a signal would break py4j's call under way. Until :meth:`creating` the
    watcher ends the process at once; after, it sets :attr:`requested`, which start-up checks
    between steps. :meth:`end` gives the signals back to the main thread."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._created = False
        self._done = threading.Event()
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        self._watcher = threading.Thread(target=self._watch, name="start-up-signals", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            if signal.sigtimedwait(STOP_SIGNALS, 0.2) is None:
                continue
            self.requested.set()
            if not self._created:
                sys.stderr.write("interrupted during start-up; nothing was created\n")
                sys.stderr.flush()
                # Spark's JVM ends with this process (its stdin closes).
                os._exit(EXIT_INTERRUPTED)

    def creating(self) -> None:
        """From now on the job creates things (sink, topics, checkpoint): a signal is noted."""
        self._created = True

    def end(self) -> bool:
        """Stop watching and let the main thread's handlers take the signals from now on;
        whether one came during start-up (it is not delivered again). Idempotent."""
        if not self._done.is_set():
            self._done.set()
            self._watcher.join()
            while signal.sigtimedwait(STOP_SIGNALS, 0) is not None:
                self.requested.set()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        return self.requested.is_set()


def run_until_stopped(
    runner: Any, duration: float | None, signals: StartUpSignals | None = None
) -> int:
    """Wait until SIGINT/SIGTERM (also one during start-up), ``duration`` seconds or the end of
    ``runner``'s query (a job or a mirror); 1 when the query failed, :data:`EXIT_LEASE_LOST`
    when it failed because another process of the deployment took over, else 0."""
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        logging.getLogger(__name__).info("signal %d: stopping", signum)
        if signals is not None:
            signals.requested.set()
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if signals is not None and signals.end():
        _stop(signal.SIGINT, None)
    error = runner.lifecycle.run_until(stop, duration)
    if error is not None and getattr(runner, "fenced", False):
        # As the lease's watchdog would, had it seen the lease lost first.
        print(
            "error: another process of this deployment took over (its Kafka producer fenced "
            "this one's); this one wrote nothing after that and exits",
            file=sys.stderr,
        )
        return EXIT_LEASE_LOST
    if error is not None:
        # One line (Spark's message carries the JVM's stack trace); all of it at debug.
        text = str(error)
        if not logging.getLogger().isEnabledFor(logging.DEBUG):
            text = next((line.strip() for line in text.splitlines() if line.strip()), text)
            text += " (--log-level debug shows the stack trace)"
        print(f"error: the query failed: {text}", file=sys.stderr)
        return 1
    return 0


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
