"""The Kafka connection flags as Kafka's tools spell them: ``--bootstrap-server`` and a repeated
``--kafka-option KEY=VALUE``; ``--bootstrap-servers`` and ``--kafka-options K=V,K=V`` alias them."""

from __future__ import annotations

import argparse


def option_pair(pair: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair (argparse reports anything else as a usage error, value unshown)."""
    key, sep, value = pair.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got a value for {key.strip()!r}")
    return key.strip(), value


def option_pairs(text: str) -> list[tuple[str, str]]:
    """``KEY=VALUE[,KEY=VALUE]`` (the earlier ``--kafka-options`` form) as pairs."""
    return [option_pair(p) for p in text.split(",") if p.strip()]


def add_bootstrap_server(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    help_: str,
    *,
    dest: str = "bootstrap_server",
    **kwargs: object,
) -> None:
    """``--bootstrap-server`` (and ``--bootstrap-servers``) into ``dest``."""
    names = ["--bootstrap-server", "--bootstrap-servers"]
    parser.add_argument(*names, dest=dest, metavar="HOST:PORT[,...]", help=help_, **kwargs)  # type: ignore[arg-type]


def add_kafka_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    help_: str = "a Kafka client option, the Java client's name (repeatable)",
    *,
    dest: str = "kafka_option",
) -> None:
    """A repeated ``--kafka-option KEY=VALUE`` into ``dest``, a list of pairs."""
    parser.add_argument(
        "--kafka-option",
        dest=dest,
        action="append",
        default=[],
        type=option_pair,
        metavar="KEY=VALUE",
        help=help_,
    )
    parser.add_argument(
        "--kafka-options",
        dest=dest,
        action="extend",
        type=option_pairs,
        help=argparse.SUPPRESS,
    )
