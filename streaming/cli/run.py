"""``python -m streaming``: run the offset manager's streaming job (also ``consumer-offsets run``).

Flags override ``CONSUMER_OFFSETS_*`` environment variables, which override the ``--config`` TOML
file. The job runs until interrupted or, with ``--duration``, for that many seconds. SIGTERM
(a service manager's stop) or SIGINT (Ctrl-C), at any moment, to the driver alone or to its
whole process group (Spark's JVM runs in a session of its own), stops it cleanly: the query
stopped, the sink's status STOPPED, the lease released, one line, exit 0 (130 for SIGINT). A
Kafka cluster that does not answer fails it within seconds, before anything is created (exit
1). One job of a deployment runs: it holds the sink's lease "job"
(``streaming.spark.lease_keeper``); another is refused (exit 1) unless ``--standby``, which warms
up and waits to take over. A job that lost the lease exits at once with status 3.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
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
from streaming.cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_LEASE_LOST, EXIT_OK
from streaming.cli.kafka_flags import add_bootstrap_server, add_kafka_options
from streaming.config import ENV_PREFIX, JobConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.spark.job import OffsetsJob
    from streaming.spark.lease_keeper import LeaseKeeper
    from streaming.spark.warm_up import WarmWorkers

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS: Final = ("debug", "info", "warning", "error")
#: Libraries that log at INFO what a user cannot act on (kafka-python: every connection opened
#: and closed; py4j: every callback; librdkafka, the job's producer). They log warnings and
#: errors only, unless --log-level debug.
LIBRARY_LOGGERS: Final = ("kafka", "py4j", "urllib3", "librdkafka")
#: The signals that stop the job or the mirror: Ctrl-C and a service manager's stop.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
#: Logged by what talks to Spark's JVM: once a stop is asked for, the JVM may be ending too
#: (systemd's default KillMode signals every process of the unit), and their complaints about
#: it (py4j's "Answer from Java side is empty", a callback's broken pipe) are that stop's.
JVM_CLIENT_LOGGERS: Final = ("py4j",)

log = logging.getLogger(__name__)
#: How long a query that ended on its own waits for the stop signal that may have ended it.
STOP_GRACE_S: Final = 1.0


def stop_status(signum: int | None) -> int:
    """The exit status of a stop by ``signum``: 130 (128 + SIGINT, as shells report Ctrl-C) for
    SIGINT, else 0 (a service manager's SIGTERM is a clean stop)."""
    return EXIT_INTERRUPTED if signum == signal.SIGINT else EXIT_OK


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


@functools.cache
def _field_comments(kind: type) -> dict[str, str]:
    """Each field of ``kind`` → its ``#:`` comment in the dataclass's source, read once (the
    source is parsed once per class, not once per flag: ``--help`` builds ~60 flags)."""
    try:
        lines = inspect.getsource(kind).splitlines()
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    comment: list[str] = []
    for line in lines:
        if line.strip().startswith("#:"):
            comment.append(line.strip()[2:].strip())
            continue
        if match := re.match(r" {4}(\w+): ", line):
            found[match.group(1)] = " ".join(comment)
        comment = []
    return found


def setting_help(kind: type, name: str) -> str:
    """``--help``'s text for the field ``name`` of ``kind``: the first sentence of its ``#:``
    comment in the dataclass's source, and its default."""
    comment = _field_comments(kind).get(name, "")
    doc = re.split(r"(?<=\.)\s+(?=[A-Z])", comment.replace("``", ""))[0]
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
            settings.add_argument(
                "--no-history",
                dest="keep_history",
                action="store_const",
                const=False,
                help="keep only the latest offsets, no history (keep_history = false)",
            )
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
    micro-batch completed, else 0; a stop by a signal: :func:`stop_status`. The job is stopped,
    then the sink says STOPPED and the lease is released, on the way out; a lost lease ends the
    process with :data:`EXIT_LEASE_LOST`."""
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


def release_stopped(keeper: LeaseKeeper) -> None:
    """Release ``keeper``'s lease, the sink's status set to STOPPED first when this process
    holds it (the status is then this process's to write, and written by Python whatever Spark's
    JVM is doing); a standby that never held it only leaves the registry."""
    from connectors.sinks import SinkError

    try:
        if keeper.lease is not None:
            keeper.sink.set_status("STOPPED")
        else:
            keeper.drop_standby()
    except SinkError as exc:
        log.warning("the sink's status is not STOPPED: %s", exc)
    finally:
        keeper.release()


def warm_up(keeper: LeaseKeeper, master: str | None) -> tuple[SparkSession, WarmWorkers]:
    """A standby's start: its registry row WARMING, the Spark session and Python workers up
    (kept warm until stopped)."""
    from streaming.spark.session import spark_session
    from streaming.spark.warm_up import keep_python_workers_warm

    keeper.warm()
    spark = spark_session(master=master)
    return spark, keep_python_workers_warm(spark)


class _HasSink(Protocol):
    sink: Any
    on_alive: Callable[[], None]


W = TypeVar("W", bound=_HasSink)


def hold_lease(
    keeper: LeaseKeeper,
    standby: bool,
    signals: StartUpSignals,
    master: str | None,
    create: Callable[[SparkSession], W],
    warm_created: Callable[[W], object] = lambda _created: None,
) -> W | None:
    """``create(spark)`` (the job or the mirror) once this process holds the lease, its sink
    fenced by it and its status STARTING from then on. A standby warms up, creates first (its
    sink open, WARMING meanwhile) and warms that (``warm_created``), then waits; else the
    lease is taken before the JVM starts, so a second active is refused (LeaseHeld) in a
    second. None when a signal ended a standby's wait (what it created is closed)."""
    from streaming.spark.session import spark_session

    # A signal before anything is created ends the process at once: the lease, or the standby's
    # registry row, is given back first.
    signals.before_creating(lambda: release_stopped(keeper))
    if standby:
        spark, warm = warm_up(keeper, master)
        try:
            created = create(spark)
            signals.creating()  # from now on a signal ends the wait below
            try:
                warm_created(created)
            except Exception as exc:  # py4j's or Kafka's: the takeover starts colder
                if not signals.requested.is_set():
                    log.warning("the standby's warm-up failed (a takeover starts colder): %s", exc)
            held = keeper.wait(signals.requested.is_set)
        finally:
            warm.stop()  # its workers idle in Spark's pool: the job's query takes them
        if held is None:
            created.sink.close()
            return None
        keeper.announce_start()
    else:
        keeper.take()
        keeper.announce_start()  # STARTING from the first second, not after Spark's start
        spark = spark_session(master=master)
        signals.creating()
        created = create(spark)
    keeper.fence(created.sink)
    created.on_alive = keeper.started
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
            OffsetsJob.warm_up,
        )
        if job is None:
            return signals.exit_status  # a standby stopped while waiting
        job.lease = keeper.fence_token()
        return _run_job(job, args.duration, signals)
    except StartInterrupted as stopped:
        print(f"interrupted during start-up ({stopped}); nothing was acknowledged", file=sys.stderr)
        return signals.exit_status
    except Exception:
        if not signals.requested.is_set():
            raise
        # The signal reached Spark's JVM too and ended the start-up's call into it.
        log.debug("start-up ended by the stop signal", exc_info=True)
        print("interrupted during start-up; nothing was acknowledged", file=sys.stderr)
        return signals.exit_status
    finally:
        release_stopped(keeper)


def _run_job(job: OffsetsJob, duration: float | None, signals: StartUpSignals) -> int:
    """Start ``job`` and run it until stopped; stopped on the way out."""
    from streaming.spark.job import StartInterrupted

    try:
        job.start(signals.requested.is_set)
        code = run_until_stopped(job, duration, signals)
        if signals.requested.is_set() and _still_starting(job.sink):
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
    watcher ends the process at once (after the clean-up given to :meth:`before_creating`);
    after, it sets :attr:`requested`, which start-up checks between steps. :meth:`end` gives the
    signals back to the main thread. :attr:`signum` is the first stop signal seen."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.signum: int | None = None
        self._created = False
        self._clean_up: Callable[[], None] | None = None
        #: Held while the watcher ends the process, so nothing is created meanwhile.
        self._creation = threading.Lock()
        self._done = threading.Event()
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        self._watcher = threading.Thread(target=self._watch, name="start-up-signals", daemon=True)
        self._watcher.start()

    def note(self, signum: int) -> None:
        """A stop signal came: :attr:`requested` set, the first one's number kept."""
        if self.signum is None:
            self.signum = signum
        self.requested.set()

    @property
    def exit_status(self) -> int:
        """The process's exit status for the stop asked for (:func:`stop_status`)."""
        return stop_status(self.signum)

    def _watch(self) -> None:
        while not self._done.is_set():
            info = signal.sigtimedwait(STOP_SIGNALS, 0.2)
            if info is None:
                continue
            self.note(info.si_signo)
            with self._creation:
                if not self._created:
                    self._end_before_creating()

    def _end_before_creating(self) -> None:
        try:
            if self._clean_up is not None:
                self._clean_up()
        except Exception as exc:  # the process ends whatever the clean-up met
            log.warning("stopping during start-up: %s", exc)
        sys.stderr.write("interrupted during start-up; nothing was created\n")
        sys.stderr.flush()
        logging.shutdown()
        # Spark's JVM, if it is starting, ends with this process (its stdin closes).
        os._exit(self.exit_status)

    def before_creating(self, clean_up: Callable[[], None]) -> None:
        """Call ``clean_up`` (give the lease back) when a signal ends the process before
        :meth:`creating`."""
        self._clean_up = clean_up

    def creating(self) -> None:
        """From now on the job creates things (sink, topics, checkpoint): a signal is noted."""
        with self._creation:
            self._created = True

    def end(self) -> bool:
        """Stop watching and let the main thread's handlers take the signals from now on;
        whether one came during start-up (it is not delivered again). Idempotent."""
        if not self._done.is_set():
            self._done.set()
            self._watcher.join()
            while (info := signal.sigtimedwait(STOP_SIGNALS, 0)) is not None:
                self.note(info.si_signo)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        return self.requested.is_set()


def run_until_stopped(
    runner: Any, duration: float | None, signals: StartUpSignals | None = None
) -> int:
    """Wait until SIGINT/SIGTERM (also one during start-up), ``duration`` seconds or the end of
    ``runner``'s query (a job or a mirror); 1 when the query failed, :data:`EXIT_LEASE_LOST`
    when it failed because another process of the deployment took over, :func:`stop_status`
    after a signal (whatever the signal did to Spark's JVM meanwhile), else 0."""
    stop = threading.Event()
    stopped_by: list[int] = []

    def _stop(signum: int, _frame: object) -> None:
        if stop.is_set():
            return  # one line per stop; the first signal decides the exit status
        log.info("%s: stopping", signal.Signals(signum).name)
        quiet_jvm_clients()
        if signals is not None:
            signals.note(signum)
        stopped_by.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if signals is not None and signals.end():
        _stop(signals.signum or signal.SIGINT, None)
    try:
        error = runner.lifecycle.run_until(stop, duration)
    except Exception as exc:  # py4j: Spark's JVM is gone
        error = exc
    if error is not None and not stop.is_set():
        # A signal to every process of the job may end the query a moment before the driver's
        # handler runs: the stop, not a failure.
        stop.wait(STOP_GRACE_S)
    if stop.is_set():
        if error is not None:
            log.debug("the query ended with the stop: %s", error)
        return stop_status(stopped_by[0])
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


def quiet_jvm_clients() -> None:
    """Once a stop is asked for, unless at debug: what talks to Spark's JVM silent about its
    end (:data:`JVM_CLIENT_LOGGERS`, py4j's lines through the root logger, the accumulator
    server's printed tracebacks)."""
    if logging.getLogger().isEnabledFor(logging.DEBUG):
        return
    for name in JVM_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    logging.getLogger().addFilter(_not_from_jvm_clients)
    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    active = getattr(context, "_active_spark_context", None)
    server = getattr(active, "_accumulatorServer", None)
    if server is not None:
        # socketserver prints a request's error itself: here, the JVM's connection ending.
        server.handle_error = lambda *_: None


def _not_from_jvm_clients(record: logging.LogRecord) -> bool:
    """Whether ``record`` was logged by other code than py4j's (which also logs through the
    root logger)."""
    return f"{os.sep}py4j{os.sep}" not in record.pathname


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
