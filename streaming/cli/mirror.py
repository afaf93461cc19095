"""``consumer-offsets mirror``: keep a Kafka cluster's committed offsets in the sink.

Reads the source cluster's ``__consumer_offsets`` (read-only) and writes the job's sink tables
(``streaming.mirror``). Runs until interrupted (SIGINT/SIGTERM) or, with ``--duration``, for that
many seconds. Settings come, as the job's do, from a ``--config`` TOML file (``MirrorConfig``
keys), then ``CONSUMER_OFFSETS_MIRROR_*`` environment variables, then flags. Source client
options take the Java client's names, ``--source-kafka-option security.protocol=SASL_SSL`` and
so on; their secret values are never logged. As in Kafka's tools, ``--bootstrap-server`` and
``--kafka-option`` spell the source's flags too.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from connectors.sinks.url import parse_sink_url
from streaming.cli.errors import UsageError
from streaming.cli.kafka_flags import option_pair
from streaming.cli.run import add_log_level_argument, configure_logging, run_until_stopped

log = logging.getLogger(__name__)


def add_mirror_arguments(parser: argparse.ArgumentParser) -> None:
    """The mirror's flags; each overrides the environment and the ``--config`` file."""
    parser.add_argument("--config", help="TOML file with the mirror's keys (MirrorConfig)")
    parser.add_argument(
        "--source-bootstrap-servers",
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="source_bootstrap_servers",
        metavar="HOST:PORT",
        help="the source cluster",
    )
    parser.add_argument(
        "--source-kafka-option",
        "--kafka-option",
        dest="source_kafka_option",
        action="append",
        default=[],
        type=option_pair,
        metavar="KEY=VALUE",
        help="a Kafka client option for the source cluster (repeatable)",
    )
    parser.add_argument("--sink-url")
    parser.add_argument("--checkpoint-location")
    parser.add_argument("--cluster-name")
    parser.add_argument("--trigger-interval")
    parser.add_argument(
        "--log-end-interval",
        dest="log_end_interval_s",
        metavar="SECONDS",
        help="how often the committed topics' log-end offsets are read into the sink",
    )
    parser.add_argument(
        "--no-history",
        dest="keep_history",
        action="store_const",
        const=False,
        default=None,
        help="keep only the latest offsets, no history",
    )
    parser.add_argument(
        "--history-retention-ms",
        metavar="MS",
        help="how long a commit stays in the history (default one day; -1 keeps it forever)",
    )
    parser.add_argument("--history-retention-check-interval-ms", metavar="MS")
    parser.add_argument(
        "--sink-write-timeout-s",
        metavar="SECONDS",
        help="how long a batch waits out a sink outage before the mirror fails (default 60)",
    )
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    add_log_level_argument(parser)


def mirror_config_from_args(args: argparse.Namespace) -> Any:
    """The mirror's configuration: flags over environment over ``--config`` file; a
    :class:`UsageError` naming what is missing or wrong."""
    from streaming.mirror import load_mirror_config

    overrides: dict[str, Any] = {
        name: getattr(args, name)
        for name in (
            "source_bootstrap_servers",
            "sink_url",
            "checkpoint_location",
            "cluster_name",
            "trigger_interval",
            "log_end_interval_s",
            "keep_history",
            "history_retention_ms",
            "history_retention_check_interval_ms",
            "sink_write_timeout_s",
        )
    }
    if args.source_kafka_option:
        overrides["source_kafka_options"] = dict(args.source_kafka_option)
    try:
        config = load_mirror_config(args.config, overrides=overrides)
        parse_sink_url(config.sink_url)
        return config
    except (OSError, ValueError) as exc:
        raise UsageError(f"configuration: {exc}") from None


def run_mirror(args: argparse.Namespace) -> int:
    """Start the mirror and wait for a signal, ``--duration`` or the query's end; 1 when the
    query failed."""
    from streaming.mirror import OffsetsMirror

    config = mirror_config_from_args(args)
    configure_logging(args.log_level)
    mirror = OffsetsMirror.create(config)
    try:
        return run_until_stopped(mirror, mirror.start(), args.duration)
    finally:
        mirror.stop()
        mirror.sink.close()
