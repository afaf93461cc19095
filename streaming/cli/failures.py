"""Every way a command can fail, as one line and an exit status (:func:`report_failure`; a
traceback only with ``--log-level debug``)."""

from __future__ import annotations

import traceback
from typing import TextIO

from connectors.client.errors import OffsetsError
from connectors.kafka.admin import TopicConfigurationError
from connectors.sinks import SinkError
from streaming.cli.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandFailed,
    UsageError,
)
from streaming.cli.output import print_failure, print_offsets_error

PROG = "consumer-offsets"


def one_line(text: str) -> str:
    """``text`` on one line (libpq adds a hint line)."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def kafka_unreachable(servers: str, exc: BaseException) -> str:
    """The line for a Kafka cluster that does not answer."""
    return f"cannot reach Kafka at {servers or '(no bootstrap servers)'} ({type(exc).__name__})"


def _kafka_line(exc: BaseException, servers: str) -> str | None:
    """The line for an error of a Kafka client (kafka-python, librdkafka), None for others."""
    from confluent_kafka import KafkaException
    from kafka.errors import KafkaConnectionError, KafkaError, NoBrokersAvailable

    if isinstance(exc, NoBrokersAvailable | KafkaConnectionError):
        return kafka_unreachable(servers, exc) + ": is the broker running, and this its address?"
    if isinstance(exc, KafkaError | KafkaException):
        detail = str(exc).strip()
        name = type(exc).__name__
        text = name if not detail or detail == name else f"{name}: {detail}"
        return f"Kafka at {servers}: {text}" if servers else f"Kafka: {text}"
    return None


def _spark_line(exc: BaseException) -> str | None:
    """The first line of a Spark or JVM error (the query's or the session's), None for others."""
    module = type(exc).__module__ or ""
    if not module.startswith(("pyspark", "py4j")):
        return None
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return f"Spark: {first.strip()}"


def report_failure(
    exc: BaseException,
    out: TextIO,
    err: TextIO,
    *,
    json_mode: bool = False,
    debug: bool = False,
    kafka_servers: str = "",
) -> int:
    """Print ``exc`` as one line and return the exit status: 2 usage, 130 Ctrl-C, else 1."""
    if debug and not isinstance(exc, UsageError | CommandFailed):
        traceback.print_exception(exc, file=err)
    if isinstance(exc, UsageError):
        err.write(f"{PROG}: error: {exc}\n")
        return EXIT_USAGE
    if isinstance(exc, CommandFailed):
        return EXIT_FAILURE
    if isinstance(exc, KeyboardInterrupt):
        err.write("interrupted\n")
        return EXIT_INTERRUPTED
    if isinstance(exc, OffsetsError):
        print_offsets_error(out, err, json_mode, exc)
        return EXIT_FAILURE
    if isinstance(exc, SinkError):
        print_failure(out, err, json_mode, "SinkError", one_line(str(exc)))
        return EXIT_FAILURE
    line = _kafka_line(exc, kafka_servers)
    if line is not None:
        print_failure(out, err, json_mode, type(exc).__name__, line)
        return EXIT_FAILURE
    line = _spark_line(exc)
    if line is None:
        text = one_line(str(exc))
        if isinstance(exc, OSError | ValueError | TimeoutError | TopicConfigurationError):
            line = text or type(exc).__name__
        else:
            line = f"unexpected {type(exc).__name__}" + (f": {text}" if text else "")
            if not debug:
                line += " (--log-level debug shows where)"
    print_failure(out, err, json_mode, type(exc).__name__, one_line(line))
    return EXIT_FAILURE
