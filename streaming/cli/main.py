"""``consumer-offsets``: the offset manager's command line, like ``kafka-consumer-groups.sh``.
Tables for people, one JSON document on stdout with ``--json`` (errors too), messages on
stderr; exit 0 success, 1 the operation failed, 2 usage errors."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Final, TextIO

from streaming.cli import mirror as mirror_runner
from streaming.cli import run as job_runner
from streaming.cli import serve as serve_runner
from streaming.cli.commands.delete import cmd_delete, cmd_delete_offsets
from streaming.cli.commands.offsets import (
    cmd_commit,
    cmd_describe,
    cmd_history,
    cmd_list,
    cmd_status,
)
from streaming.cli.commands.reset import cmd_reset_offsets
from streaming.cli.commands.transfer import cmd_export, cmd_import
from streaming.cli.context import DEFAULT_TIMEOUT_MS, Context
from streaming.cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE
from streaming.cli.failures import PROG, report_failure
from streaming.cli.kafka_flags import add_bootstrap_server, add_kafka_options
from streaming.config import DEFAULT_BOOTSTRAP_SERVERS, DEFAULT_SINK_URL


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, without breaking lines at hyphens (topic names and URLs stay whole)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _common(parser: argparse.ArgumentParser) -> None:
    """The connection and output flags every service command takes."""
    group = parser.add_argument_group("connection and output")
    add_bootstrap_server(
        group,
        "the job's Kafka cluster (default: CONSUMER_OFFSETS_BOOTSTRAP_SERVERS, else the "
        "config file's bootstrap_servers, else KAFKA_BOOTSTRAP_SERVERS, else "
        f"{DEFAULT_BOOTSTRAP_SERVERS})",
    )
    add_kafka_options(
        group, "a Kafka client option, the Java client's name, over the config file's (repeatable)"
    )
    group.add_argument(
        "--sink-url",
        metavar="URL",
        help="the job's sink (default: CONSUMER_OFFSETS_SINK_URL, else the config file's "
        f"sink_url, else {DEFAULT_SINK_URL})",
    )
    group.add_argument(
        "--config",
        metavar="FILE",
        help="the job's TOML configuration, as deploy/config.example.toml (default: "
        "CONSUMER_OFFSETS_CONFIG)",
    )
    group.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        default=DEFAULT_TIMEOUT_MS,
        help=f"milliseconds to wait for the job's answers (default {DEFAULT_TIMEOUT_MS})",
    )
    group.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    job_runner.add_log_level_argument(group, default="warning")


def _sends(parser: argparse.ArgumentParser) -> None:
    """``--force`` and ``--tenant NAME`` of a command that sends requests."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="send even when the job is STOPPED or NOT RESPONDING (requests wait in the "
        "ingest topic; this command times out unless the job answers in time)",
    )
    parser.add_argument(
        "--tenant",
        metavar="NAME",
        help="send through this tenant's ingest and responses topics (the config file's "
        "[[tenants]]); its ACLs decide, as Kafka's would for its principal",
    )


def _tenant_view(parser: argparse.ArgumentParser) -> None:
    """``--tenant NAME`` of a reading command."""
    parser.add_argument(
        "--tenant",
        metavar="NAME",
        help="show only what Kafka's OffsetFetch answers this tenant (the config file's "
        "[[tenants]]): groups and, in them, topics its ACLs let it DESCRIBE",
    )


def _group_choice(parser: argparse.ArgumentParser, what: str) -> None:
    """``--group G`` (repeatable) or ``--all-groups``, exactly one."""
    choice = parser.add_mutually_exclusive_group(required=True)
    choice.add_argument("--group", action="append", metavar="G", help=f"{what} (repeatable)")
    choice.add_argument("--all-groups", action="store_true", help="every group in the sink")


def _add_reset_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--group", required=True, metavar="G", help="the group (it must be inactive)")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--all-topics", action="store_true", help="every topic the group committed")
    scope.add_argument(
        "--topic", action="append", metavar="T[:P,P]", help="a topic, or some partitions of it"
    )
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument(
        "--to-current",
        action="store_true",
        help="the committed offset (none committed: the log end offset, as Kafka's tool)",
    )
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (kept in the log range)")
    to.add_argument(
        "--shift-by",
        type=int,
        metavar="N",
        help="committed offset + N (may be < 0); every partition needs a committed offset",
    )
    to.add_argument(
        "--to-datetime",
        metavar="ISO8601",
        help="first offset at or after this time, e.g. 2024-05-01T12:00:00Z (no zone: local)",
    )
    to.add_argument(
        "--to-committed-at",
        metavar="TIME",
        help="the offsets the group had committed at TIME (ISO 8601 or epoch ms), from the "
        "history; partitions without a commit then are left alone unless --or-earliest/-latest",
    )
    fallback = p.add_mutually_exclusive_group()
    fallback.add_argument(
        "--or-earliest",
        action="store_true",
        help="with --to-committed-at: the log start offset where there was no commit then",
    )
    fallback.add_argument(
        "--or-latest",
        action="store_true",
        help="with --to-committed-at: the log end offset where there was no commit then",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show them (the default)")


def _run_job(args: argparse.Namespace) -> int:
    """``run``: the streaming job, as ``python -m streaming`` runs it."""
    job_runner.configure_logging(args.log_level)
    return job_runner.run(args)


Runner = Callable[[argparse.Namespace], int]
#: The commands that run until stopped: their flags, their runner, their help and description.
SERVICES: Final[dict[str, tuple[Callable[[argparse.ArgumentParser], None], Runner, str, str]]] = {
    "run": (
        job_runner.add_job_arguments,
        _run_job,
        "run the streaming job",
        "Run the offset manager's streaming job.",
    ),
    "mirror": (
        mirror_runner.add_mirror_arguments,
        mirror_runner.run_mirror,
        "keep a Kafka cluster's committed offsets in the sink",
        "Mirror a Kafka cluster's __consumer_offsets into the sink (read-only).",
    ),
    "serve": (
        serve_runner.add_serve_arguments,
        serve_runner.run_serve,
        "Prometheus metrics, Burrow's API and a dashboard over the sink",
        "A read-only HTTP server over the sink: /metrics, Burrow's /v3, a dashboard.",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``consumer-offsets`` parser; each command's handler in ``handler`` (None for the
    :data:`SERVICES` and ``kafka``)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Kafka consumer-group offsets, managed by the consumer-offsets streaming job.",
        epilog="Exit status: 0 success, 1 failure, 2 usage error.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(
        name: str, handler: Callable[[Context], int], help_: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_, formatter_class=HelpFormatter)
        p.set_defaults(handler=handler)
        _common(p)
        return p

    _tenant_view(command("list", cmd_list, "list the groups the sink knows"))

    p = command("describe", cmd_describe, "committed offsets, log-end offsets and lag")
    _group_choice(p, "group to describe")
    p.add_argument(
        "--starting-offsets",
        action="store_true",
        help="print the group's offsets as a Spark Kafka query's startingOffsets JSON",
    )
    p.add_argument(
        "--topic",
        action="append",
        metavar="T",
        help="with --starting-offsets: a topic the query subscribes to (repeatable; "
        "default: the group's topics)",
    )
    p.add_argument(
        "--require-stable",
        action="store_true",
        help="answer UNSTABLE_OFFSET_COMMIT (88) for a partition a transaction holds an offset "
        "of (open, or committed and not applied yet), as Kafka's OffsetFetch with RequireStable",
    )
    p.add_argument(
        "--as-of",
        metavar="TIME",
        help="the offsets the group had committed at TIME (ISO 8601 or epoch ms), from the "
        "history (thinned as it ages: each answer says how exact it is)",
    )
    _tenant_view(p)

    p = command("commit", cmd_commit, "commit one offset (synchronously, through the job)")
    p.add_argument("--group", required=True, metavar="G", help="the consumer group")
    p.add_argument("--topic", required=True, metavar="T", help="the topic")
    p.add_argument("--partition", type=int, required=True, metavar="P", help="its partition")
    p.add_argument(
        "--offset", type=int, required=True, metavar="O", help="the next offset to consume"
    )
    p.add_argument("--metadata", default="", help="commit metadata (default: empty)")
    p.add_argument(
        "--leader-epoch",
        type=int,
        default=-1,
        metavar="E",
        help="the leader epoch of the record before the offset (default: -1, unknown)",
    )
    _sends(p)

    p = command(
        "reset-offsets", cmd_reset_offsets, "move a group's offsets (dry run unless --execute)"
    )
    _add_reset_arguments(p)
    _sends(p)

    p = command("delete-offsets", cmd_delete_offsets, "delete some of a group's offsets")
    p.add_argument("--group", required=True, metavar="G", help="the group")
    p.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="T[:P,P]",
        help="a topic, or some partitions of it (repeatable)",
    )
    _sends(p)

    p = command("delete", cmd_delete, "delete empty groups and their offsets")
    p.add_argument(
        "--group", action="append", required=True, metavar="G", help="a group (repeatable)"
    )
    _sends(p)

    p = command("export", cmd_export, "write committed offsets as CSV")
    _group_choice(p, "group to export")
    p.add_argument("--file", metavar="F.csv", help="output file (default: stdout)")
    _tenant_view(p)

    p = command("import", cmd_import, "commit offsets from a CSV export (dry run unless --execute)")
    p.add_argument(
        "--file",
        "--from-file",
        required=True,
        metavar="F.csv",
        help="input file ('-': stdin): this tool's export, or the CSV of Kafka's "
        "kafka-consumer-groups.sh --reset-offsets --export",
    )
    p.add_argument(
        "--group",
        help="the group of a Kafka export's topic,partition,offset rows (which name none)",
    )
    p.add_argument("--execute", action="store_true", help="commit the offsets")
    _sends(p)

    p = command("history", cmd_history, "a group's applied commits, newest first")
    p.add_argument("--group", required=True, metavar="G", help="the group")
    p.add_argument("--topic", metavar="T", help="only this topic's commits")
    p.add_argument(
        "--partition", type=int, metavar="P", help="only this partition's (with --topic)"
    )
    p.add_argument(
        "--limit", type=int, default=100, metavar="N", help="at most N commits (default: 100)"
    )

    command("status", cmd_status, "the job's coordinator status")

    for name, (add_arguments, _, help_, description) in SERVICES.items():
        p = sub.add_parser(name, help=help_, description=description, formatter_class=HelpFormatter)
        add_arguments(p)
        p.set_defaults(handler=None)

    kafka = sub.add_parser(
        "kafka",
        help="start/stop the local Kafka broker",
        description="The local Kafka broker (also: python -m connectors.kafka.local).",
        add_help=False,
    )
    # main() hands everything after "kafka" to the launcher before this parser runs; the
    # sub-parser is here for the command list in --help.
    kafka.add_argument("kafka_args", nargs=argparse.REMAINDER)
    return parser


def main(
    argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run one command; returns the exit status (see the module docstring)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["kafka"]:
        # Everything after "kafka" belongs to the launcher, options included.
        from connectors.kafka.local import main as kafka_main

        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return kafka_main(argv[1:], prog=f"{PROG} kafka")
    parser = build_parser()
    try:
        # argparse prints help and usage errors itself: onto this call's streams.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 0 for --help, 2 for usage errors
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    if args.command is None:
        parser.print_usage(err)
        err.write(f"{PROG}: error: a command is required\n")
        return EXIT_USAGE
    if args.command not in SERVICES and args.log_level != "debug":
        # kafka-python logs every refused connection; the command reports what matters itself.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    return _dispatch(args, out, err)


def _dispatch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the parsed command and map its outcome to an exit status (``report_failure``)."""
    ctx: Context | None = None
    try:
        if args.command in SERVICES:
            return SERVICES[args.command][1](args)
        ctx = Context(args, out, err)
        return int(args.handler(ctx))
    except (Exception, KeyboardInterrupt) as exc:
        if ctx is not None:
            servers = ctx.config.bootstrap_servers
        else:
            servers = getattr(args, "source_bootstrap_servers", None) or getattr(
                args, "bootstrap_servers", None
            )
        return report_failure(
            exc,
            out,
            err,
            json_mode=bool(getattr(args, "json", False)),
            debug=args.log_level == "debug",
            kafka_servers=servers or "",
        )
    finally:
        if ctx is not None:
            ctx.close()


def console_main() -> None:
    """The ``consumer-offsets`` script: :func:`main`, then exit; a closed pipe (``export |
    head``) ends it quietly with status 1."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # Python's documented way: no second failure at the exit's flush
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        status = EXIT_FAILURE
    except KeyboardInterrupt:  # Ctrl-C before a command's own handling (parsing the flags)
        sys.stderr.write("interrupted\n")
        status = EXIT_INTERRUPTED
    sys.exit(status)


if __name__ == "__main__":
    console_main()
