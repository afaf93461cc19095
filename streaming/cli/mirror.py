"""``consumer-offsets mirror``: keep a Kafka cluster's committed offsets in the sink.

Reads the source cluster's ``__consumer_offsets`` (read-only) and writes the job's sink tables
(``streaming.mirror``). Runs until interrupted (SIGINT/SIGTERM) or, with ``--duration``, for that
many seconds. Source client options take the Java client's names, ``--source-kafka-option
security.protocol=SASL_SSL`` and so on; values are never logged.
"""

from __future__ import annotations

import argparse
import logging

from streaming.cli.run import configure_logging, run_until_stopped

log = logging.getLogger(__name__)


def add_mirror_arguments(parser: argparse.ArgumentParser) -> None:
    """The mirror's flags."""
    parser.add_argument("--source-bootstrap-servers", required=True, metavar="HOST:PORT")
    parser.add_argument(
        "--source-kafka-option",
        action="append",
        default=[],
        type=_option,
        metavar="KEY=VALUE",
        help="a Kafka client option for the source cluster (repeatable)",
    )
    parser.add_argument("--sink-url", required=True)
    parser.add_argument("--checkpoint-location", required=True)
    parser.add_argument("--cluster-name", default="source")
    parser.add_argument("--trigger-interval", default="1 second")
    parser.add_argument(
        "--log-end-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often the committed topics' log-end offsets are read into the sink",
    )
    parser.add_argument(
        "--no-history", action="store_true", help="keep only the latest offsets, no history"
    )
    parser.add_argument("--duration", type=float, help="stop after this many seconds")


def _option(pair: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair (argparse reports anything else as a usage error, value unshown)."""
    key, sep, value = pair.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got a value for {key.strip()!r}")
    return key.strip(), value


def run_mirror(args: argparse.Namespace) -> int:
    """Start the mirror and wait for a signal, ``--duration`` or the query's end; 1 when the
    query failed."""
    from streaming.mirror import MirrorConfig, OffsetsMirror

    configure_logging()
    config = MirrorConfig(
        source_bootstrap_servers=args.source_bootstrap_servers,
        sink_url=args.sink_url,
        checkpoint_location=args.checkpoint_location,
        source_kafka_options=dict(args.source_kafka_option),
        keep_history=not args.no_history,
        trigger_interval=args.trigger_interval,
        cluster_name=args.cluster_name,
        log_end_interval_s=args.log_end_interval,
    )
    mirror = OffsetsMirror.create(config)
    try:
        return run_until_stopped(mirror, mirror.start(), args.duration)
    finally:
        mirror.stop()
        mirror.sink.close()
