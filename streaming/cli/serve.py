"""``consumer-offsets serve``: Prometheus metrics, Burrow's v3 API and a dashboard over the
sink, read-only (``streaming.serve``).

Log-end offsets (for lag) come from the Kafka cluster when ``--bootstrap-server`` is given
(client options as ``--kafka-option KEY=VALUE``, the Java client's names), else from the sink's
stored ones, which a mirror keeps.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from connectors.sinks.url import parse_sink_url
from streaming.cli.errors import UsageError
from streaming.cli.kafka_flags import add_bootstrap_server, add_kafka_options
from streaming.cli.run import add_log_level_argument, configure_logging

log = logging.getLogger("streaming.serve")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sink-url", required=True, help="the job's or the mirror's sink")
    add_bootstrap_server(
        parser, "the cluster to read log-end offsets from", dest="bootstrap_servers"
    )
    add_kafka_options(parser)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--cluster-name", default="local", help="its name in Burrow's API")
    parser.add_argument(
        "--log-end-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often log-end offsets are read",
    )
    parser.add_argument(
        "--granularity",
        choices=("partition", "topic"),
        default="partition",
        help="/metrics' lag series per partition, or per group and topic (fewer series)",
    )
    parser.add_argument(
        "--evaluation-interval",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how often every group's Burrow status and the dashboard's index are computed",
    )
    parser.add_argument(
        "--tenants",
        metavar="FILE",
        help="the job's [[tenants]] (its config file, or a file of them): a user named like a "
        "tenant sees only the groups its rules let it DESCRIBE",
    )
    parser.add_argument(
        "--web-config-file",
        metavar="FILE",
        help="TLS and users, as Prometheus exporters' web config (tls_server_config, "
        "basic_auth_users with bcrypt hashes)",
    )
    add_log_level_argument(parser, default="warning")


def web_config_from_args(args: argparse.Namespace) -> Any:
    """The web config file's settings (none: plain HTTP, no users); UsageError naming a bad
    field."""
    from streaming.serve.web_config import WebConfig, load_web_config

    if not args.web_config_file:
        return WebConfig()
    try:
        return load_web_config(args.web_config_file)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def serve_config_from_args(args: argparse.Namespace) -> Any:
    from connectors.kafka.kafka_python import kafka_python_options
    from connectors.secrets import hide_in_logs, secret_values
    from streaming.serve import ServeConfig

    options = dict(args.kafka_option)
    hide_in_logs(secret_values(options))
    if options and not args.bootstrap_servers:
        raise UsageError("--kafka-option needs --bootstrap-server")
    try:
        parse_sink_url(args.sink_url)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.log_end_interval <= 0:
        raise UsageError(f"--log-end-interval must be > 0, got {args.log_end_interval}")
    if args.evaluation_interval <= 0:
        raise UsageError(f"--evaluation-interval must be > 0, got {args.evaluation_interval}")
    client_options = None
    if args.bootstrap_servers:
        try:
            client_options = kafka_python_options(args.bootstrap_servers, options)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return ServeConfig(
        sink_url=args.sink_url,
        client_options=client_options,
        bootstrap_servers=args.bootstrap_servers.split(",") if args.bootstrap_servers else [],
        cluster_name=args.cluster_name,
        log_end_interval_s=args.log_end_interval,
        granularity=args.granularity,
        evaluation_interval_s=args.evaluation_interval,
        tenants=_tenants(args.tenants),
    )


def _tenants(path: str | None) -> tuple[Any, ...]:
    """The tenants of ``--tenants FILE`` (its ``[[tenants]]`` tables: a tenants file or the
    job's configuration file), or none; a UsageError names what is wrong."""
    from streaming.tenants import load_tenants, parse_tenants

    if not path:
        return ()
    try:
        return parse_tenants(load_tenants(path, only_tenants=False))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--tenants {path}: {exc}") from None


def run_serve(args: argparse.Namespace) -> int:
    """Serve until interrupted (uvicorn handles SIGINT/SIGTERM); 0 on a clean stop."""
    from streaming.serve import create_app
    from streaming.serve.server import serve_forever

    config = serve_config_from_args(args)
    web = web_config_from_args(args)
    configure_logging(args.log_level)
    if config.tenants:
        users = set(web.basic_auth_users)
        views = sorted(users & {t.name for t in config.tenants})
        log.info(
            "tenant views for %s; every other user sees every group",
            ", ".join(views) or "no user (no user is named like a tenant)",
        )
        if not users:
            log.warning("--tenants without users (--web-config-file): everyone sees every group")
    serve_forever(create_app(config), args.host, args.port, web, args.log_level)
    return 0
