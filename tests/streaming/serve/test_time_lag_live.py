"""Lag in seconds against the real broker: a producer writes at a known rate, a group commits
then stops; records written with known timestamps, read by a server started with no samples;
served by uvicorn, read from ``/metrics``.

The group's commits are written to the sink as the job writes them (as the other serve tests
do); the log-end offsets are the broker's, sampled by the server into the sink's table. The
tolerance of every figure is :data:`TOLERANCE_S`: the sampling interval (the time of an offset
is known to within one interval), plus a second for the producer's batching and the scrape.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
import urllib.request
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPartition
from prometheus_client.parser import text_string_to_metric_families

from connectors.sinks import BatchProgress, open_sink
from connectors.sinks.log_end_samples import RecordTime
from streaming.serve import ServeSettings, log_end_cache
from streaming.serve.app import create_app
from tests.connectors.sinks.record_frames import commit, frame
from tests.fixtures.kafka import TopicFactory
from tests.streaming.helpers import wait_for
from tests.streaming.serve.support import get as _get
from tests.streaming.serve.support import prometheus, serving

pytestmark = pytest.mark.kafka

GROUP = "billing"
REPLAYER = "replayer"
#: Messages per second the producer writes.
RATE = 20
INTERVAL_S = 0.5
TOLERANCE_S = INTERVAL_S + 1.0
ALERTS = Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "alerts.yml"


class Producer:
    """Writes ``RATE`` messages a second to partition 0 until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._producer.send(self._topic, value=b"x", partition=0)
            self._producer.flush()
            self._stop.wait(1 / RATE)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._producer.close()


def _log_end(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = KafkaPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def _commit(sink_url: str, batch: int, group: str, topic: str, offset: int) -> None:
    with open_sink(sink_url) as sink:
        now = int(time.time() * 1000)
        records = frame(commit(group, topic, 0, offset, commit_timestamp_ms=now))
        sink.write_batch(batch, records, BatchProgress(batch_id=batch, input_rows=1))


def _serve(sink_url: str, bootstrap: str) -> AbstractContextManager[str]:
    return serving(create_app(ServeSettings(sink_url, bootstrap, log_end_interval_s=INTERVAL_S)))


def _samples(url: str, name: str, group: str) -> float | None:
    text = _get(f"{url}/metrics") or ""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("group") == group:
                return float(sample.value)
    return None


def _lag_seconds(url: str, group: str) -> float | None:
    return _samples(url, "kafka_consumergroup_group_lag_seconds", group)


def test_lag_seconds_grows_survives_a_restart_and_falls_to_zero(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(partitions=1)
    sink_url = f"sqlite:///{tmp_path / 'offsets.db'}"
    open_sink(sink_url).close()
    first_produced = time.time()
    producer = Producer(kafka_bootstrap, topic)
    try:
        wait_for(lambda: _log_end(kafka_bootstrap, topic), lambda end: end >= RATE, 30)
        with _serve(sink_url, kafka_bootstrap) as url:
            # A replay from offset 0: the topic has a committed offset, so the server samples
            # it from now on (it samples the committed topics).
            _commit(sink_url, 0, REPLAYER, topic, 0)
            time.sleep(2)  # a few points in the table before the group's commit
            committed = _log_end(kafka_bootstrap, topic)
            committed_at = time.time()  # the log end passed `committed` about now
            _commit(sink_url, 1, GROUP, topic, committed)
            first = wait_for(
                lambda: _lag_seconds(url, GROUP), lambda s: s is not None and s >= 3, 30
            )
            first_at = time.time()
            assert abs(first - (first_at - committed_at)) <= TOLERANCE_S
            time.sleep(4)
            later = _lag_seconds(url, GROUP)
            later_at = time.time()
            assert later is not None
            # Grows with the wall clock, one second a second.
            assert abs((later - first) - (later_at - first_at)) <= TOLERANCE_S
            assert abs(later - (later_at - committed_at)) <= TOLERANCE_S
            assert _samples(url, "consumer_offsets_group_lag_seconds_bounded", GROUP) is None

            # Offset 0 is older than the table: timed by its record, produced before sampling
            # began (the test below tells it from the bound by a minute).
            replay = _lag_seconds(url, REPLAYER)
            replay_at = time.time()
            assert replay is not None
            assert abs(replay - (replay_at - first_produced)) <= TOLERANCE_S
            assert _samples(url, "consumer_offsets_group_lag_seconds_bounded", REPLAYER) is None

            # The dashboard: both lags per partition, lag in seconds charted, the index's max.
            page = _get(f"{url}/group/{GROUP}") or ""
            assert "Lag in seconds over time" in page and "<th>lag (s)</th>" in page
            assert "&gt;=" not in (_get(f"{url}/group/{REPLAYER}") or "")  # not a bound
            # The index: the evaluator's rows, made again at every log-end interval.
            index = wait_for(lambda: _get(f"{url}/") or "", lambda page: GROUP in page, 30)
            assert "<th>max lag (s)</th>" in index

        # A new server over the same sink: the same figure, from the persisted table (its own
        # samples alone would put the committed offset before its oldest point: a bound of
        # about 0 s, flagged).
        with _serve(sink_url, kafka_bootstrap) as url:
            again = wait_for(lambda: _lag_seconds(url, GROUP), lambda s: s is not None, 30)
            again_at = time.time()
            assert abs(again - (again_at - committed_at)) <= TOLERANCE_S
            assert _samples(url, "consumer_offsets_group_lag_seconds_bounded", GROUP) is None

            # The group catches up: 0.
            producer.stop()
            caught_up = _log_end(kafka_bootstrap, topic)
            _commit(sink_url, 2, GROUP, topic, caught_up)
            wait_for(lambda: _lag_seconds(url, GROUP), lambda s: s == 0.0, 30)
            assert _samples(url, "kafka_consumergroup_group_max_lag_seconds", GROUP) == 0.0
    finally:
        producer.stop()


def _produce(bootstrap: str, topic: str, timestamps_ms: list[int]) -> float:
    """One record per timestamp (CreateTime) to partition 0; when they were sent."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        sent = time.time()
        for at in timestamps_ms:
            producer.send(topic, value=b"x", partition=0, timestamp_ms=at)
        producer.flush()
        return sent
    finally:
        producer.close()


def test_lag_seconds_is_the_age_of_the_committed_record_from_the_first_sample(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    """A server started with no samples: each committed offset is older than its table, yet its
    lag in seconds is now minus its record's timestamp, CreateTime or LogAppendTime as the topic
    says; a bound, flagged, only where the record was deleted."""
    created = topic_factory(partitions=1)
    appended = topic_factory(partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    deleted = topic_factory(partitions=1)
    now_ms = int(time.time() * 1000)
    seventy_ago, forty_ago = now_ms - 70_000, now_ms - 40_000
    _produce(kafka_bootstrap, created, [seventy_ago] * 5)
    appended_at = _produce(kafka_bootstrap, appended, [seventy_ago] * 5)  # the broker's time wins
    _produce(kafka_bootstrap, deleted, [seventy_ago] * 5 + [forty_ago] * 5)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:  # retention's effect, at once: offsets 0-4 are gone
        admin.delete_records({KafkaPartition(deleted, 0): 5})
    finally:
        admin.close()
    sink_url = f"sqlite:///{tmp_path / 'offsets.db'}"
    open_sink(sink_url).close()
    _commit(sink_url, 0, "created", created, 0)
    _commit(sink_url, 1, "appended", appended, 0)
    _commit(sink_url, 2, "deleted", deleted, 2)
    with _serve(sink_url, kafka_bootstrap) as url:
        sampling_began = time.time()
        exact = wait_for(lambda: _lag_seconds(url, "created"), lambda s: s is not None and s > 30)
        exact_at = time.time()
        # The record's age, to the scrape's second; the bound would be about 0 s.
        assert abs(exact - (exact_at - seventy_ago / 1000)) <= 2.0
        assert _samples(url, "consumer_offsets_group_lag_seconds_bounded", "created") is None
        page = _get(f"{url}/group/created") or ""
        assert "&gt;=" not in page and "record deleted" not in page

        # LogAppendTime: when the broker appended the record, not the producer's 70 s ago.
        appended_lag = wait_for(
            lambda: _lag_seconds(url, "appended"),
            lambda s: s is not None and s >= time.time() - appended_at - 2.0,
        )
        assert appended_lag <= time.time() - appended_at + 2.0
        assert _samples(url, "consumer_offsets_group_lag_seconds_bounded", "appended") is None

        # Offset 2 was deleted: the first record kept (offset 5, 40 s old) bounds it, flagged;
        # still far above the time since sampling began.
        gone = wait_for(lambda: _lag_seconds(url, "deleted"), lambda s: s is not None and s > 30)
        gone_at = time.time()
        assert abs(gone - (gone_at - forty_ago / 1000)) <= 2.0
        assert gone_at - sampling_began < 30
        assert _samples(url, "consumer_offsets_group_lag_seconds_bounded", "deleted") == 1.0
        page = _get(f"{url}/group/deleted") or ""
        assert "&gt;=" in page and "(record deleted)" in page
        assert "the record at offset 2 is gone (deleted by retention" in page


def _chart_lags(page: str, title: str) -> list[int]:
    """The lags the chart ``title`` draws, oldest first (each point's tooltip)."""
    chart = page.split(f'aria-label="{title}', 1)[1].split("</svg>", 1)[0]
    return [int(lag.replace(",", "")) for lag in re.findall(r": lag ([\d,]+)</title>", chart)]


def _chart_span(page: str, title: str) -> list[str]:
    """The first and last time on the chart ``title``'s x axis."""
    chart = page.split(f'aria-label="{title}', 1)[1].split("</svg>", 1)[0]
    return re.findall(r'font-size="11">(\d\d:\d\d:\d\d)(?: UTC)?</text>', chart)


def test_the_seconds_chart_is_exact_from_its_first_point_after_a_restart(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    """Commits made before the server started are older than its sampled table: each is charted
    at its lag in seconds then (commit time minus its record's timestamp, as ``describe`` times
    the committed offset), never a bound of 0 s; the charts in messages and in seconds span the
    same time."""
    topic = topic_factory(partitions=1)
    now_ms = int(time.time() * 1000)
    # Offset i produced 400 s ago plus 20 s an offset.
    _produce(kafka_bootstrap, topic, [now_ms - 400_000 + 20_000 * i for i in range(10)])
    sink_url = f"sqlite:///{tmp_path / 'offsets.db'}"
    # (offset, seconds ago): its lag then is 60, 80, 140 s; now 240 s (offset 8 is 240 s old).
    commits = [(2, 300), (6, 200), (8, 100)]
    with open_sink(sink_url, keep_history=True) as sink:
        for batch, (offset, ago) in enumerate(commits):
            at = now_ms - ago * 1000
            records = frame(commit(GROUP, topic, 0, offset, commit_timestamp_ms=at))
            sink.write_batch(batch, records, BatchProgress(batch_id=batch, input_rows=1))
    seconds_chart = f"lag in seconds of {GROUP} over time"
    with _serve(sink_url, kafka_bootstrap) as url:
        page = wait_for(
            lambda: _get(f"{url}/group/{GROUP}") or "",
            lambda page: seconds_chart in page and len(_chart_lags(page, seconds_chart)) == 4,
            30,
        )
        *then, current = _chart_lags(page, seconds_chart)
        assert then == [60, 80, 140]
        assert abs(current - (time.time() * 1000 - (now_ms - 240_000)) / 1000) <= 3
        # The lag in messages starts at the server's first reading; drawn over the same span.
        assert _chart_span(page, f"lag of {GROUP} over time") == _chart_span(page, seconds_chart)


def test_record_reads_keep_to_their_budget_and_the_cache_to_the_offsets_wanted(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, monkeypatch: Any
) -> None:
    topic = topic_factory(partitions=5)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for partition in range(5):
        for offset in range(20):
            producer.send(topic, value=b"x", partition=partition, timestamp_ms=1000 + offset)
    producer.flush()
    producer.close()
    # 100 committed offsets, 20 per partition: 20 rounds of 5 (a partition reads one offset a
    # round); a budget that a few rounds exhaust.
    monkeypatch.setattr(log_end_cache, "RECORD_READ_ROUND", 5)
    monkeypatch.setattr(log_end_cache, "RECORD_READ_BUDGET_S", 0.01)
    keys = [(topic, partition, offset) for partition in range(5) for offset in range(20)]
    with open_sink(f"sqlite:///{tmp_path / 'offsets.db'}") as sink:
        cache = log_end_cache.LogEndCache(sink, {"bootstrap_servers": kafka_bootstrap})
        try:
            assert cache.record_times(keys, every=True) == {}  # none read yet
            started = time.monotonic()
            first = cache.read_record_times()
            assert 5 <= first < len(keys)  # at least a round, never all of them
            # The budget, then the last round's end at most.
            assert time.monotonic() - started < 0.01 + log_end_cache.RECORD_READ_TIMEOUT_S
            while len(cache.record_times(keys)) < len(keys):  # the rest, refresh by refresh
                assert cache.read_record_times() > 0
            found = cache.record_times(keys)
            assert found[(topic, 3, 7)] == RecordTime(1007)  # each offset's own record
            # The offsets move on: the cache forgets the old ones (one entry per offset wanted).
            cache.record_times(keys[:10], every=True)
            assert set(cache.record_times(keys)) == set(keys[:10])
        finally:
            cache.stop()


def test_a_real_prometheus_fires_the_lag_seconds_alert(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(partitions=1)
    sink_url = f"sqlite:///{tmp_path / 'offsets.db'}"
    open_sink(sink_url).close()
    producer = Producer(kafka_bootstrap, topic)
    # alerts.yml as shipped, with its lag threshold and wait shortened to fit a test.
    rules = ALERTS.read_text()
    assert "group_max_lag_seconds) > 300\n        for: 2m" in rules
    (tmp_path / "alerts.yml").write_text(
        rules.replace(
            "group_max_lag_seconds) > 300\n        for: 2m",
            "group_max_lag_seconds) > 3\n        for: 2s",
        )
    )
    try:
        wait_for(lambda: _log_end(kafka_bootstrap, topic), lambda end: end >= RATE, 30)
        with _serve(sink_url, kafka_bootstrap) as url:
            _commit(sink_url, 0, REPLAYER, topic, 0)  # the topic is sampled from now on
            time.sleep(1)
            _commit(sink_url, 1, GROUP, topic, _log_end(kafka_bootstrap, topic))
            with prometheus(tmp_path, url.removeprefix("http://"), "alerts.yml") as api:

                def lagging() -> list[dict[str, object]]:
                    body = _get(f"{api}/api/v1/alerts")
                    alerts = [] if body is None else json.loads(body)["data"]["alerts"]
                    return [a for a in alerts if a["labels"]["alertname"] == "ConsumerGroupLagging"]

                firing = wait_for(
                    lagging,
                    lambda found: any(
                        a["state"] == "firing" and a["labels"]["group"] == GROUP for a in found
                    ),
                    90,
                )
                alert = next(a for a in firing if a["labels"]["group"] == GROUP)
                assert alert["state"] == "firing"
                assert alert["labels"]["cluster_name"] == "local"
                assert float(alert["value"]) > 3
                rules_body = _get(
                    f"{api}/api/v1/rules?" + urllib.parse.urlencode({"type": "alert"})
                )
                assert rules_body is not None and "ConsumerGroupNotConsuming" in rules_body
    finally:
        producer.stop()
