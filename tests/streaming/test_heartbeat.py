"""The outage log: one line per change, reminders rate-limited, library chatter folded in
(pure logging, a fake clock; the heartbeat itself against a real SQLite sink)."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from connectors.client.liveness import liveness
from connectors.sinks import open_sink
from streaming.spark.heartbeat import REMINDER_S, Heartbeat, OutageLog, kafka_reachable


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def handler() -> logging.Handler:
    """A root handler collecting what the process would print."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    collect = Collect(level=logging.DEBUG)
    collect.records = records  # type: ignore[attr-defined]
    root = logging.getLogger()
    root.addHandler(collect)
    # Levels that other tests in the same process may have set (the CLI's logging setup turns
    # libraries down) must not decide what reaches the outage log here.
    loggers = [root, *(logging.getLogger(n) for n in ("librdkafka", "kafka", "kafka.client"))]
    previous = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.INFO if logger is root else logging.NOTSET)
    yield collect
    root.removeHandler(collect)
    for logger, level in zip(loggers, previous, strict=True):
        logger.setLevel(level)


def lines(handler: logging.Handler) -> list[str]:
    return [r.getMessage() for r in handler.records]  # type: ignore[attr-defined]


def test_an_outage_is_one_line_down_one_line_back_and_folds_library_chatter(
    handler: logging.Handler,
) -> None:
    clock = Clock()
    quiet: list[bool] = []
    outages = OutageLog("job", quiet.append, clock)
    outages.install()
    try:
        library = logging.getLogger("librdkafka")
        library.error("before the outage: printed")
        outages.observe("Kafka at b:9092", "Connection refused")
        for _ in range(131):
            library.error("FAIL Connect to ipv4#b:9092 failed: Connection refused")
        logging.getLogger("kafka.client").warning("Unable to connect")
        clock.now += 5
        outages.observe("Kafka at b:9092", "Connection refused")  # no new line
        clock.now += REMINDER_S
        outages.observe("Kafka at b:9092", "Connection refused")  # the reminder
        clock.now += 2
        outages.observe("Kafka at b:9092", None)
        library.error("after the outage: printed")
    finally:
        outages.uninstall()
    assert lines(handler) == [
        "before the outage: printed",
        "job: Kafka at b:9092 unreachable (Connection refused); waiting for it, nothing "
        "acknowledged is lost",
        "job: Kafka at b:9092 still unreachable after 65 s (Connection refused); 132 library "
        "message(s) about it folded into this line",
        "job: Kafka at b:9092 reachable again after 67 s; 132 library message(s) about it "
        "folded into this line",
        "after the outage: printed",
    ]
    assert quiet == [True, False]


def test_two_outages_at_once_quiet_the_jvm_once(handler: logging.Handler) -> None:
    quiet: list[bool] = []
    outages = OutageLog("mirror", quiet.append, Clock())
    outages.observe("Kafka at b:9092", "Connection refused")
    outages.observe("the sink s", "could not connect")
    outages.observe("Kafka at b:9092", None)
    assert quiet == [True]
    outages.observe("the sink s", None)
    assert quiet == [True, False]
    assert len(lines(handler)) == 4


def test_kafka_reachable_tells_a_listening_port_from_a_closed_one() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert kafka_reachable(f"127.0.0.1:1,127.0.0.1:{port}") is None
    assert kafka_reachable(f"127.0.0.1:{port}") is not None


def test_the_heartbeat_keeps_a_sink_active_and_reports_an_unreachable_kafka(
    tmp_path: Path, handler: logging.Handler
) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    with open_sink(url) as sink:
        sink.reset("ACTIVE", "test")
        assert liveness(sink.status()).status == "NOT RESPONDING"
        heartbeat = Heartbeat(sink, "127.0.0.1:1", "job")
        heartbeat.beat()
        assert liveness(sink.status()).status == "ACTIVE"
    assert any("Kafka at 127.0.0.1:1 unreachable" in line for line in lines(handler))


def test_repeated_library_lines_are_printed_once_a_minute_and_counted(
    handler: logging.Handler,
) -> None:
    clock = Clock()
    outages = OutageLog("job", None, clock)
    outages.install()
    try:
        librdkafka = logging.getLogger("librdkafka")
        # What librdkafka queued during an outage, handed over at the producer's next poll.
        for broker in range(205):
            librdkafka.error("%s [%s] %s", "FAIL", "rdkafka#producer-1", f"b{broker}: refused")
        librdkafka.warning("%s [%s] %s", "GETPID", "rdkafka#producer-1", "load in progress")
        logging.getLogger("streaming.spark.job").info("the job's own lines always pass")
        clock.now += REMINDER_S
        librdkafka.error("%s [%s] %s", "FAIL", "rdkafka#producer-1", "b0: refused")
    finally:
        outages.uninstall()
    assert lines(handler) == [
        "FAIL [rdkafka#producer-1] b0: refused",
        "GETPID [rdkafka#producer-1] load in progress",
        "the job's own lines always pass",
        "FAIL [rdkafka#producer-1] b0: refused (204 more like it folded)",
    ]
