"""Checks of single settings as the systems that take them parse them (Spark's trigger, master
and startingOffsets, Kafka's topic names, bootstrap servers and compression), so that a bad value
is refused naming its field before the lease is taken and anything starts, never by Spark or Kafka
later with a message naming no field.

Each check accepts a well-understood subset of what the system accepts, and raises
``ValueError`` starting with the field's name otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Final

from state.coordinator.rules import is_valid_topic

#: Microseconds per unit of Spark's interval strings (``SparkIntervalUtils.stringToInterval``),
#: without years and months, which a processing-time trigger refuses.
_MICROS: Final = {
    "week": 7 * 86_400_000_000,
    "day": 86_400_000_000,
    "hour": 3_600_000_000,
    "minute": 60_000_000,
    "second": 1_000_000,
    "millisecond": 1_000,
    "microsecond": 1,
}
#: One term: a non-negative number and a unit, singular or plural; only seconds take a
#: fraction (up to nanoseconds), as in Spark. Spark lower-cases the input first.
_TERM: Final = re.compile(
    r"(?:(\d+)\s+(week|day|hour|minute|millisecond|microsecond)s?"
    r"|(\d+(?:\.\d{1,9})?|\.\d{1,9})\s+seconds?)"
)
_LONG_MAX: Final = 2**63 - 1
INTERVAL_FORMS: Final = (
    'one or more "<number> <unit>" terms, the unit week, day, hour, minute, second, '
    'millisecond or microsecond (or their plurals), e.g. "100 milliseconds", "1 second", '
    '"1 minute 30 seconds"; only seconds take a fraction ("1.5 seconds")'
)


def interval_ms(field: str, text: str) -> int:
    """The milliseconds of a processing-time trigger interval as Spark 4's
    ``trigger(processingTime=...)`` reads it (``Triggers.convert``: microseconds floored to
    milliseconds); ValueError naming ``field`` for a string outside :data:`INTERVAL_FORMS`."""
    words = text.strip().lower()
    terms = words.split()
    if terms[:1] == ["interval"]:  # Spark's optional SQL-style prefix
        terms = terms[1:]
    total, at = 0, 0
    # Terms are "<number> <unit>" pairs separated by spaces (Spark's whitespace-separated state
    # machine); matching pairs of words keeps "1 secondsx" or "500 ms" out.
    pairs = [" ".join(terms[i : i + 2]) for i in range(0, len(terms), 2)]
    for pair in pairs:
        match = _TERM.fullmatch(pair)
        if match is None:
            raise ValueError(
                f"{field}: cannot read {text!r} as an interval ({pair!r} is not a term):"
                f" expected {INTERVAL_FORMS}"
            )
        whole, unit, seconds = match.groups()
        if unit is not None:
            total += int(whole) * _MICROS[unit]
        else:
            integer, _, fraction = seconds.partition(".")
            total += int(integer or 0) * 1_000_000 + int((fraction + "000000000")[:6])
        at += 1
    if not at:
        raise ValueError(f"{field}: an interval is needed, got {text!r}: expected {INTERVAL_FORMS}")
    if total > _LONG_MAX:
        raise ValueError(f"{field}: {text!r} is longer than Spark can count in microseconds")
    return total // 1_000


def check_topic(field: str, name: str) -> None:
    """ValueError naming ``field`` unless ``name`` is a topic name Kafka accepts."""
    if not is_valid_topic(name):
        raise ValueError(
            f"{field}: {name!r} is not a valid Kafka topic name (1-249 of ASCII letters, digits,"
            " '.', '_' and '-'; not '.' or '..')"
        )


#: One bootstrap address: host:port, the host a name, an IPv4 or a bracketed IPv6 address,
#: optionally after a listener name (``SASL_SSL://``), as Kafka's clients parse them.
_ADDRESS: Final = re.compile(
    r"(?:[A-Za-z0-9_]+://)?(?:\[[0-9A-Fa-f:.%a-z]+\]|[A-Za-z0-9._-]+):(\d+)"
)


def check_bootstrap_servers(field: str, servers: str) -> None:
    """ValueError naming ``field`` unless ``servers`` is a comma-separated list of host:port."""
    addresses = [a.strip() for a in servers.split(",") if a.strip()]
    if not addresses:
        raise ValueError(f"{field}: at least one host:port is needed, got {servers!r}")
    for address in addresses:
        match = _ADDRESS.fullmatch(address)
        if match is None or not 0 < int(match.group(1)) < 65_536:
            raise ValueError(f"{field}: {address!r} is not host:port (port 1-65535)")


#: Compression codecs both a topic's ``compression.type`` and librdkafka's producer take.
COMPRESSIONS: Final = ("lz4", "zstd", "snappy", "gzip")


def check_compression(field: str, codec: str) -> None:
    if codec not in COMPRESSIONS:
        raise ValueError(f"{field} must be one of {', '.join(COMPRESSIONS)}, got {codec!r}")


def check_starting_offsets(field: str, value: str) -> None:
    """Spark's ``startingOffsets``: "earliest", "latest", or JSON of topic -> partition ->
    offset (-2 earliest, -1 latest)."""
    if value in ("earliest", "latest"):
        return
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    well_formed = isinstance(parsed, dict) and all(
        isinstance(partitions, dict)
        and all(
            p.lstrip("-").isdigit() and type(o) is int and o >= -2 for p, o in partitions.items()
        )
        for partitions in parsed.values()
    )
    if not well_formed:
        raise ValueError(
            f'{field} must be "earliest", "latest" or JSON such as {{"topic": {{"0": 42}}}}'
            f" (offsets, -2 earliest, -1 latest), got {value!r}"
        )


#: Spark's master URLs (``SparkContext.createTaskScheduler`` and the cluster managers Spark 4
#: ships: standalone, YARN, Kubernetes).
_MASTER: Final = re.compile(
    r"local(?:\[(?:\d+|\*)(?:\s*,\s*\d+)?\])?"
    r"|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]"
    r"|spark://.+|yarn|k8s://.+"
)


def check_spark_master(field: str, master: str) -> None:
    if not _MASTER.fullmatch(master):
        raise ValueError(
            f"{field}: {master!r} is not a Spark master URL: expected local, local[N], local[*],"
            " local[N,F], spark://host:port, yarn or k8s://host:port"
        )


def check_not_empty(field: str, value: str) -> None:
    if not value.strip():
        raise ValueError(f"{field} must not be empty")
