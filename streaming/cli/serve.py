"""``consumer-offsets serve``'s flags and start: :class:`ServeSettings` from the ``--config``
file's ``[serve]`` table, then ``CONSUMER_OFFSETS_SERVE_*`` variables, then flags."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, Final

from connectors.sinks.url import parse_sink_url
from streaming.cli.errors import UsageError
from streaming.cli.kafka_flags import add_bootstrap_server, add_kafka_options
from streaming.cli.run import (
    EXAMPLE_CONFIG,
    add_log_level_argument,
    configure_logging,
    setting_help,
    settings_epilog,
)
from streaming.config import DEFAULT_SINK_URL, load_settings, read_config_file
from streaming.serve import GRANULARITIES, ServeSettings

log = logging.getLogger("streaming.serve")

#: Environment variables of serve's settings: ``CONSUMER_OFFSETS_SERVE_PORT``…
SERVE_ENV_PREFIX = "CONSUMER_OFFSETS_SERVE_"


def load_serve_settings(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ServeSettings:
    """serve's settings from a TOML file's ``[serve]`` table (the job's top-level ``sink_url``,
    else the job's default sink, ``bootstrap_servers`` and ``kafka_options`` fill those it does
    not set), then
    ``CONSUMER_OFFSETS_SERVE_*`` environment variables, then ``overrides`` (flags)."""
    env = os.environ if env is None else env
    path = path or env.get(f"{SERVE_ENV_PREFIX}CONFIG")
    job = read_config_file(path) if path else {}
    # The job's client options belong to the job's cluster: taken only with its address.
    borrowed = (
        ("sink_url", "ingest_topic", "bootstrap_servers", "kafka_options")
        if job.get("bootstrap_servers")
        else ("sink_url", "ingest_topic")
    )
    fallbacks = {k: job.get(k) for k in borrowed}
    if path:  # the sink `run --config` with this file writes: its sink_url, else the default
        fallbacks["sink_url"] = job.get("sink_url") or DEFAULT_SINK_URL
    return load_settings(
        ServeSettings, SERVE_ENV_PREFIX, path, env, overrides, fallbacks, table="serve"
    )


#: serve's plain flags: (flag, setting, metavar, argparse's extra keywords).
_FLAGS: Final = (
    ("--host", "host", None, {}),
    ("--port", "port", None, {"type": int}),
    ("--cluster-name", "cluster_name", "NAME", {}),
    ("--ingest-topic", "ingest_topic", "TOPIC", {}),
    ("--log-end-interval", "log_end_interval_s", "SECONDS", {"type": float}),
    ("--granularity", "granularity", None, {"choices": GRANULARITIES}),
    ("--evaluation-interval", "evaluation_interval_s", "SECONDS", {"type": float}),
    ("--tenants", "tenants", "FILE", {}),
    ("--web-config-file", "web_config_file", "FILE", {}),
)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """serve's flags, each one's help the setting's meaning and default."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"TOML file of settings, as {EXAMPLE_CONFIG}: its [serve] table, and the job's "
        "sink_url, bootstrap_servers, kafka_options and [[tenants]] for those it does not set",
    )
    parser.epilog = settings_epilog(SERVE_ENV_PREFIX, "serve")
    add_log_level_argument(parser, default="warning")
    settings = parser.add_argument_group("settings (ServeSettings)")
    settings.add_argument("--sink-url", metavar="URL", help=setting_help(ServeSettings, "sink_url"))
    add_bootstrap_server(
        settings, setting_help(ServeSettings, "bootstrap_servers"), dest="bootstrap_servers"
    )
    add_kafka_options(
        settings,
        "one of kafka_options, repeatable: " + setting_help(ServeSettings, "kafka_options"),
    )
    for flag, name, metavar, extra in _FLAGS:
        help_ = setting_help(ServeSettings, name)
        settings.add_argument(flag, dest=name, metavar=metavar, help=help_, **extra)


def serve_config_from_args(args: argparse.Namespace) -> tuple[ServeSettings, tuple[Any, ...]]:
    """The server's settings (flags over ``CONSUMER_OFFSETS_SERVE_*`` over the ``--config``
    file) and tenants (``--tenants``, else that file's ``[[tenants]]``). Sets ``args.host``,
    ``args.port`` and ``args.web_config_file`` to the settings'. A :class:`UsageError` names
    what is wrong."""
    names = [f.name for f in fields(ServeSettings) if f.name != "kafka_options"]
    overrides: dict[str, Any] = {name: getattr(args, name, None) for name in names}
    if args.kafka_option:
        overrides["kafka_options"] = dict(args.kafka_option)
    try:
        settings = load_serve_settings(args.config, overrides=overrides)
        parse_sink_url(settings.sink_url)
    except (OSError, ValueError) as exc:
        raise UsageError(f"configuration: {exc}") from None
    if settings.kafka_options and not settings.bootstrap_servers:
        raise UsageError("--kafka-option needs --bootstrap-server")
    try:
        settings.kafka_python_options()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    args.host, args.port = settings.host, settings.port
    args.web_config_file = settings.web_config_file
    return settings, _tenants(settings.tenants or args.config)


def _tenants(path: str | None) -> tuple[Any, ...]:
    """The ``[[tenants]]`` of ``path`` (a tenants file or the job's configuration), or none."""
    from streaming.tenants import load_tenants, parse_tenants

    if not path:
        return ()
    try:
        return parse_tenants(load_tenants(path, only_tenants=False))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--tenants {path}: {exc}") from None


def _check_views(tenants: tuple[Any, ...], users: set[str], operators: set[str]) -> None:
    """A user both a tenant and an operator is a UsageError; one WARNING names every user who
    is neither (403 everywhere) and every tenant without a user."""
    names = {t.name for t in tenants}
    both = sorted(names & operators)
    if both:
        raise UsageError(
            f"web config: operators {', '.join(both)} are tenants too: a user is either a "
            "tenant (its view) or an operator (every group)"
        )
    if not users:
        if tenants:
            log.warning("--tenants without users (--web-config-file): everyone sees every group")
        return
    refused = sorted(users - names - operators)
    lonely = sorted(names - users)
    problems = []
    if refused:
        problems.append(
            f"users {', '.join(refused)} are neither tenants nor operators: 403 on every route"
        )
    if lonely:
        problems.append(f"tenants {', '.join(lonely)} have no user: no view")
    if problems:
        log.warning("%s", "; ".join(problems))


def run_serve(args: argparse.Namespace) -> int:
    """Serve until interrupted (uvicorn handles SIGINT/SIGTERM); 0 on a clean stop."""
    from streaming.serve.app import create_app
    from streaming.serve.server import serve_forever
    from streaming.serve.web_config import WebConfig, load_web_config

    settings, tenants = serve_config_from_args(args)
    try:  # no web config file: plain HTTP, no users
        web = load_web_config(args.web_config_file) if args.web_config_file else WebConfig()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    configure_logging(args.log_level)
    _check_views(tenants, set(web.basic_auth_users), set(web.operators))
    names = [t.name for t in tenants]
    serve_forever(create_app(settings, tenants), args.host, args.port, web, args.log_level, names)
    return 0
