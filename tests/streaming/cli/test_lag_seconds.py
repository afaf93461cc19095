"""``list`` shows each group's largest lag in seconds as ``describe`` figures it: from the
sink's log-end samples (kept by ``serve`` or the mirror), else from the committed records'
timestamps; unknown when neither says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from connectors.sinks import open_sink
from tests.fixtures.kafka import TopicFactory
from tests.streaming.cli.support import run
from tests.streaming.cli.test_sink_commands import write_offsets


def test_list_shows_the_largest_lag_in_seconds(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(
        url, "ACTIVE", ("behind", "t", 0, 150), ("caught-up", "t", 1, 40), ("new", "u", 0, 1)
    )
    now = int(time.time() * 1000)
    with open_sink(url) as sink:
        sink.heartbeat()
        # Partition 0 stood at 100 until 60 s ago and was 200 from 40 s ago: offset 150 was
        # produced 50 s ago. Partition 1's log end is 40 (caught up). Topic u: never sampled.
        sink.record_log_end_samples({("t", 0): 100, ("t", 1): 40}, now - 60_000)
        sink.record_log_end_samples({("t", 0): 200, ("t", 1): 40}, now - 40_000)
    listed = run("list", "--sink-url", url, "--json")
    assert listed.code == 0, listed
    lags = {g["group"]: g["max_lag_seconds"] for g in listed.json()}
    assert lags["caught-up"] == 0.0
    assert lags["new"] is None
    assert 50 <= lags["behind"] <= 55  # the seconds this test took since `now`
    table = run("list", "--sink-url", url)
    rows = {line.split()[0]: line.split() for line in table.out.splitlines()[1:]}
    assert rows["caught-up"][-1] == "0.0"
    assert float(rows["behind"][-1]) >= 50


def test_describe_reads_the_age_of_the_committed_record_where_nothing_was_sampled(
    tmp_path: Path, kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """No log-end sample in the sink (no serve, no mirror): ``describe`` takes a lagging
    partition's lag in seconds from the timestamp of the record at its committed offset, exact;
    a caught-up partition is 0 without reading anything."""
    topic = topic_factory(partitions=2)
    produced = int(time.time() * 1000) - 70_000
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(10):
        producer.send(topic, b"x", partition=0, timestamp_ms=produced + i * 1000)
    producer.send(topic, b"x", partition=1, timestamp_ms=produced)
    producer.flush()
    producer.close()
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "ACTIVE", ("g", topic, 0, 4), ("g", topic, 1, 1))
    described = run(
        "describe",
        "--group",
        "g",
        "--sink-url",
        url,
        "--bootstrap-server",
        kafka_bootstrap,
        "--json",
    )
    assert described.code == 0, described
    [group] = described.json()
    rows = {p["partition"]: p for p in group["partitions"]}
    now = int(time.time() * 1000)
    # Offset 4's record was stamped produced + 4 s.
    expected = (now - (produced + 4_000)) / 1000
    assert expected - 2 <= rows[0]["lag_seconds"] <= expected + 0.5, rows[0]
    assert rows[0]["lag_seconds_bounded"] is False
    assert rows[1]["lag"] == 0 and rows[1]["lag_seconds"] == 0.0


def test_list_shows_the_lag_in_seconds_describe_shows_where_nothing_was_sampled(
    tmp_path: Path, kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """No serve, no mirror (the quickstart): ``list``'s LAG-SECONDS is the largest of the
    figures ``describe`` shows for the group, from the committed records' timestamps."""
    topic = topic_factory(partitions=2)
    produced = int(time.time() * 1000) - 70_000
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(10):
        producer.send(topic, b"x", partition=0, timestamp_ms=produced + i * 1000)
    producer.flush()
    producer.close()
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    # Two groups behind on the same partition at different offsets, one caught up.
    write_offsets(url, "ACTIVE", ("g", topic, 0, 4), ("h", topic, 0, 8), ("done", topic, 0, 10))
    flags = ["--sink-url", url, "--bootstrap-server", kafka_bootstrap]
    listed = run("list", *flags, "--json")
    assert listed.code == 0, listed
    lags = {g["group"]: g["max_lag_seconds"] for g in listed.json()}
    described = run("describe", "--group", "g", *flags, "--json")
    [group] = described.json()
    [partition] = group["partitions"]
    now = int(time.time() * 1000)
    assert abs(lags["g"] - partition["lag_seconds"]) < 2, (lags, partition)
    assert (now - (produced + 4_000)) / 1000 - 4 <= lags["g"] <= (now - produced - 4_000) / 1000
    assert lags["g"] - lags["h"] == pytest.approx(4, abs=1)  # offset 8: stamped 4 s later
    assert lags["done"] == 0.0
    table = run("list", *flags)
    rows = {line.split()[0]: line.split() for line in table.out.splitlines()[1:]}
    assert float(rows["g"][-1]) >= 70 - 4 - 1, table.out
