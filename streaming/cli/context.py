"""One command's context: its arguments, configuration, output streams and the clients it
opens on first use."""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, TextIO

from connectors.client.liveness import Liveness, liveness
from connectors.sinks import SinkError, redact_url
from connectors.sinks.url import parse_sink_url
from streaming.cli.errors import CommandFailed, UsageError
from streaming.cli.failures import one_line
from streaming.cli.output import format_table, print_failure
from streaming.config import JobConfig, load_config

if TYPE_CHECKING:
    from connectors.client import OffsetCommitClient, OffsetsReader
    from streaming.serve.tenant_views import Viewer

#: Default wait for the job's answer, in ms (Kafka's admin ``request.timeout.ms``).
DEFAULT_TIMEOUT_MS: Final = 30_000
#: The commit client's Kafka ``client.id``.
CLIENT_ID: Final = "consumer-offsets-cli"


def load_job_config(
    path: str | None, overrides: dict[str, Any], kafka_option: list[tuple[str, str]] | None
) -> JobConfig:
    """:func:`load_config` with ``--kafka-option`` pairs over the file's ``kafka_options``; a
    :class:`UsageError` names what is wrong, a sink URL that names no sink included."""
    try:
        config = load_config(path, overrides=overrides)
        parse_sink_url(config.sink_url)
    except (OSError, ValueError) as exc:
        raise UsageError(f"configuration: {exc}") from None
    options = dict(kafka_option or [])
    return replace(config, kafka_options={**config.kafka_options, **options}) if options else config


class Context:
    """Configuration, output and lazily opened clients for one command."""

    def __init__(self, args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> None:
        """Validate ``--timeout`` and load the configuration (flags over environment over
        ``--config`` file); UsageError for either, and for a sink URL that names no sink."""
        self.args = args
        self.stdout = stdout
        self.stderr = stderr
        self.json: bool = bool(getattr(args, "json", False))
        timeout_ms = getattr(args, "timeout", None) or DEFAULT_TIMEOUT_MS
        if timeout_ms <= 0:
            raise UsageError(f"--timeout must be > 0 ms, got {timeout_ms}")
        self.timeout_s = timeout_ms / 1000
        overrides = {"bootstrap_servers": args.bootstrap_server, "sink_url": args.sink_url}
        self.config: JobConfig = load_job_config(args.config, overrides, args.kafka_option)

    @functools.cached_property
    def viewer(self) -> Viewer | None:
        """What ``--tenant NAME`` may see, as Kafka's OffsetFetch answers it; None without."""
        name = getattr(self.args, "tenant", None)
        if name is None:
            return None
        tenants = {t.name: t for t in self.config.tenants}
        if name not in tenants:
            known = ", ".join(sorted(tenants)) or "none"
            raise UsageError(f"--tenant {name!r}: not a tenant of the configuration ({known})")
        from streaming.serve.tenant_views import Viewer

        return Viewer(tenants[name].authorizer)

    @functools.cached_property
    def reader(self) -> OffsetsReader:
        """Reads committed offsets from the sink and log offsets from the broker."""
        from connectors.client import OffsetsReader  # on use: --help loads no client

        return OffsetsReader(
            self.config.sink_url,
            self.config.kafka_python_options(),
            ingest_topic=self.config.ingest_topic,
            tenant_topics=[t.ingest_topic for t in self.config.tenants],
            tenant_acls={t.ingest_topic: t.authorizer for t in self.config.tenants},
        )

    @functools.cached_property
    def client(self) -> OffsetCommitClient:
        """Commits and deletes through the job, so Kafka's rules hold."""
        from connectors.client import OffsetCommitClient

        try:
            return OffsetCommitClient(
                self.config,
                client_id=CLIENT_ID,
                default_timeout_s=self.timeout_s,
                tenant=getattr(self.args, "tenant", None),
            )
        except ValueError as exc:  # a tenant the configuration does not have
            raise UsageError(str(exc)) from None

    def close(self) -> None:
        """Close the clients that were opened; the commit client does not wait for answers."""
        if "client" in self.__dict__:
            self.client.close(timeout_s=0)
        if "reader" in self.__dict__:
            self.reader.close()

    def out(self, text: str) -> None:
        """A line on stdout (the command's result)."""
        self.stdout.write(text + "\n")

    def err(self, text: str) -> None:
        """A line on stderr (messages and warnings)."""
        self.stderr.write(text + "\n")

    def emit_json(self, data: object) -> None:
        """The command's one JSON document on stdout."""
        self.out(json.dumps(data, indent=2, ensure_ascii=False))

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[object]],
        errors: Sequence[str | None] | None = None,
    ) -> None:
        """An aligned table on stdout; with ``errors`` (one per row) a last ERROR column."""
        if errors is not None:
            headers = [*headers, "ERROR"]
            rows = [[*row, error] for row, error in zip(rows, errors, strict=True)]
        self.out(format_table(headers, rows))

    def dry_run_note(self) -> None:
        """Say (stderr) that a command without ``--execute`` changed nothing."""
        self.err("dry run: nothing was committed (add --execute to commit these offsets)")

    def liveness(self) -> Liveness:
        """The job's status row judged now (``connectors.client.liveness``)."""
        return liveness(self.reader.status())

    def check_status_note(self) -> None:
        """Warn when answers come from the last state of a job STOPPED or not responding."""
        alive = self.liveness()
        if alive.status == "STOPPED":
            detail = self.reader.status().detail
            self.err(f"note: the offsets job is STOPPED; showing its last state ({detail})")
        elif not alive.responding:
            self.err(f"note: the offsets job is {alive.describe()}; showing its last state")

    def require_live_job(self) -> None:
        """Before sending: refuse (exit 1, nothing sent) when the job is STOPPED, not
        responding or unknown (the sink unreadable), unless ``--force``."""
        if getattr(self.args, "force", False):
            return
        try:
            source = self.reader.sink.source_cluster()
            alive = self.liveness()
        except SinkError as exc:
            message = (
                f"cannot tell whether the offsets job runs: {one_line(str(exc))}; nothing was sent "
                "(--force to send anyway)"
            )
            print_failure(self.stdout, self.stderr, self.json, "SinkError", message)
            raise CommandFailed from None
        if source is not None:
            # Its heartbeat is the mirror's: no job reads what would be sent, and on a plain
            # cluster its ingest topic would be made for nothing.
            sink = redact_url(self.config.sink_url)
            message = (
                f"{sink} is the mirror of cluster {source.cluster_name}, not the offsets job's "
                "sink: nothing was sent (on plain Kafka, commit the offsets with "
                "kafka-consumer-groups.sh --reset-offsets --to-offset; --force to send to the "
                "job anyway)"
            )
            print_failure(self.stdout, self.stderr, self.json, "MirrorSink", message)
            raise CommandFailed
        if alive.status == "STARTING":
            # Sent now, the request waits in the ingest topic for the job's first micro-batch.
            self.err("note: the offsets job is STARTING; waiting for its first micro-batch")
        if alive.responding:
            return
        if alive.status == "STOPPED":
            state = "STOPPED" + (f" ({alive.last_seen()})" if alive.last_seen_ms else "")
        else:
            state = alive.describe()
        message = (
            f"the offsets job is {state}: nothing was sent (start it with "
            "'consumer-offsets run', or --force to send anyway)"
        )
        print_failure(self.stdout, self.stderr, self.json, "JobNotResponding", message)
        raise CommandFailed

    def groups(self) -> list[str]:
        """``--all-groups``: every group in the sink (``--tenant``'s visible ones), else the
        ``--group`` values, each once, in order."""
        if getattr(self.args, "all_groups", False):
            groups = [g.group_id for g in self.reader.list_groups()]
            return groups if self.viewer is None else self.viewer.groups(groups)
        return list(dict.fromkeys(self.args.group or []))

    def refuse_hidden_groups(self, groups: list[str]) -> list[str]:
        """``groups`` less those ``--tenant`` may not DESCRIBE, each said on stderr as
        GROUP_AUTHORIZATION_FAILED (30), whether it exists or not."""
        if self.viewer is None:
            return groups
        from connectors.client.errors import describe_error
        from state.coordinator.errors import ErrorCode

        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
        for group in groups:
            if not self.viewer.may_see_group(group):
                self.err(f"error: {describe_error(refused)}: group {group!r}")
        return self.viewer.groups(groups)
