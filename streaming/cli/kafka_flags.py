"""The Kafka connection flags every command takes, spelled as Kafka's own tools spell them.

``--bootstrap-server HOST:PORT[,...]`` and a repeated ``--kafka-option KEY=VALUE`` (the Java
client's option names), as ``kafka-consumer-groups.sh`` takes ``--bootstrap-server`` and
``--command-config``. The spellings of earlier releases stay as hidden aliases:
``--bootstrap-servers``, and ``--kafka-options KEY=VALUE[,KEY=VALUE]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

__all__ = [
    "add_bootstrap_server",
    "add_kafka_options",
    "option_pair",
    "option_pairs",
]


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
    aliases: Sequence[str] = (),
    **kwargs: object,
) -> None:
    """``--bootstrap-server`` into ``dest``; ``--bootstrap-servers`` and ``aliases`` spell it
    too."""
    names = ["--bootstrap-server", "--bootstrap-servers", *aliases]
    parser.add_argument(*names, dest=dest, metavar="HOST:PORT[,...]", help=help_, **kwargs)  # type: ignore[arg-type]


def add_kafka_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    help_: str = "a Kafka client option, the Java client's name (repeatable)",
    *,
    dest: str = "kafka_option",
    aliases: Sequence[str] = (),
) -> None:
    """A repeated ``--kafka-option KEY=VALUE`` (and ``aliases``) into ``dest``, a list of
    pairs (empty when none is given); the hidden ``--kafka-options K=V,K=V`` adds to it."""
    parser.add_argument(
        "--kafka-option",
        *aliases,
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
