"""``consumer-offsets mirror``: keep a Kafka cluster's committed offsets in the sink
(``streaming.spark.mirror``), until interrupted or for ``--duration`` seconds. Settings come
from ``--config`` (its ``[mirror]`` table), then ``CONSUMER_OFFSETS_MIRROR_*``, then flags; as
in Kafka's tools, ``--bootstrap-server`` and ``--kafka-option`` name the source's.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from typing import Any

from connectors.sinks.url import parse_sink_url
from streaming.cli.errors import EXIT_FAILURE, UsageError
from streaming.cli.kafka_flags import option_pair
from streaming.cli.run import (
    EXAMPLE_CONFIG,
    add_log_level_argument,
    add_standby_argument,
    configure_logging,
    run_until_stopped,
    setting_help,
    settings_epilog,
)
from streaming.config import MIRROR_ENV_PREFIX, MirrorConfig, load_mirror_config


def add_mirror_arguments(parser: argparse.ArgumentParser) -> None:
    """The mirror's flags, each over the environment and the ``--config`` file."""
    parser.add_argument(
        "--config", metavar="FILE", help=f"TOML file of settings, as {EXAMPLE_CONFIG} ([mirror])"
    )
    parser.epilog = settings_epilog(MIRROR_ENV_PREFIX, "mirror")
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    add_standby_argument(parser, "mirror")
    add_log_level_argument(parser)
    settings = parser.add_argument_group("settings (MirrorConfig)")
    settings.add_argument(
        "--source-bootstrap-servers",
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="source_bootstrap_servers",
        metavar="HOST:PORT",
        help=setting_help(MirrorConfig, "source_bootstrap_servers"),
    )
    settings.add_argument(
        "--source-kafka-option",
        "--kafka-option",
        dest="source_kafka_option",
        action="append",
        default=[],
        type=option_pair,
        metavar="KEY=VALUE",
        help="one of source_kafka_options, repeatable: "
        + setting_help(MirrorConfig, "source_kafka_options"),
    )
    for name, metavar in (
        ("sink_url", "URL"),
        ("checkpoint_location", "PATH"),
        ("cluster_name", "NAME"),
        ("trigger_interval", "INTERVAL"),
        ("history_retention_ms", "MS"),
        ("history_retention_check_interval_ms", "MS"),
        ("sink_write_timeout_s", "SECONDS"),
        ("log_end_interval_s", "SECONDS"),
        ("lease_ttl_ms", "MS"),
    ):
        flag = "log-end-interval" if name == "log_end_interval_s" else name.replace("_", "-")
        help_ = setting_help(MirrorConfig, name)
        settings.add_argument(f"--{flag}", dest=name, metavar=metavar, help=help_)
    settings.add_argument(
        "--no-history",
        dest="keep_history",
        action="store_const",
        const=False,
        default=None,
        help="keep only the latest offsets, no history (keep_history = false)",
    )


def mirror_config_from_args(args: argparse.Namespace) -> Any:
    """The mirror's configuration: flags over environment over ``--config`` file; a
    :class:`UsageError` naming what is missing or wrong."""
    overrides: dict[str, Any] = {
        f.name: getattr(args, f.name)
        for f in fields(MirrorConfig)
        if f.name != "source_kafka_options"
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
    """Take the lease "mirror" (``--standby``: warm up, then wait for it), start the mirror and
    wait for a signal, ``--duration`` or the query's end; 1 when the query failed or another
    mirror of the deployment holds the lease. Stopped, then the lease released, on the way out."""
    from streaming.cli.run import StartUpSignals, hold_lease, open_keeper, require_kafka
    from streaming.spark.lease_keeper import MIRROR_LEASE, LeaseHeld
    from streaming.spark.mirror import OffsetsMirror

    config = mirror_config_from_args(args)
    configure_logging(args.log_level)
    require_kafka(
        config.source_bootstrap_servers,
        "--source-bootstrap-servers (or source_bootstrap_servers in --config, "
        f"{MIRROR_ENV_PREFIX}SOURCE_BOOTSTRAP_SERVERS)",
    )
    keeper = open_keeper(config.sink_url, MIRROR_LEASE, config.lease_ttl_ms)
    signals = StartUpSignals()  # a signal during start-up stops the mirror once it runs
    try:
        mirror = hold_lease(
            keeper, args.standby, signals, None, lambda spark: OffsetsMirror.create(config, spark)
        )
        if mirror is None:
            return signals.exit_status  # a standby stopped while waiting
        try:
            mirror.start()
            return run_until_stopped(mirror, args.duration, signals)
        finally:
            signals.end()
            mirror.stop()
            mirror.sink.close()
    except LeaseHeld as held:
        print(f"error: {held}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception:
        if not signals.requested.is_set():
            raise
        # The signal reached Spark's JVM too and ended the start-up's call into it.
        print("interrupted during start-up; nothing was mirrored", file=sys.stderr)
        return signals.exit_status
    finally:
        signals.end()
        keeper.release()
