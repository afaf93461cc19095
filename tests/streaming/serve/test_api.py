"""The server's routes over a real sink (SQLite and PostgreSQL): Burrow's v3 API field by field
against Burrow's documented shapes, each evaluation status reached through a crafted commit
history, the Prometheus exposition with kafka_exporter's names, and the dashboard's pages."""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from connectors.sinks import BatchProgress, open_sink
from state.coordinator.model import TopicPartition
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from tests.connectors.sinks.record_frames import commit, frame, group_metadata, tombstone

#: Group -> ten commits of its topic's partition 0 as (offset, log-end offset at the time), 10 s
#: apart with the last 5 s ago; the log-end offset now; the status Burrow's rules give.
HISTORIES: dict[str, tuple[list[tuple[int, int]], int, str]] = {
    "caught-up": ([(100 + i, 100 + i) for i in range(10)], 109, "OK"),
    "slow": ([(100 + i, 110 + 2 * i) for i in range(10)], 130, "WARN"),
    "stalled": ([(100, 110 + i) for i in range(10)], 120, "STALL"),
    "rewound": (
        [(200 + i, 214) for i in range(5)] + [(50 + i, 214) for i in range(5)],
        214,
        "REWIND",
    ),
}
#: A group whose last commit is 5 minutes old, its ten commits 1 s apart: STOP.
STOPPED = "stopped"


def _topic(group: str) -> str:
    return f"topic-{group}"


def _write(sink: Any, batch: int, records: list[dict[str, Any]], **progress: Any) -> int:
    sink.write_batch(batch, frame(*records), BatchProgress(batch_id=batch, **progress))
    return batch + 1


@pytest.fixture(params=["sqlite", "postgres"])
def sink_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The server reads either sink the job writes."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_sink_url"))
    return f"sqlite:///{tmp_path / 'offsets.db'}"


@pytest.fixture()
def client(sink_url: str) -> Iterator[TestClient]:
    url = sink_url
    now = int(time.time() * 1000)
    observed: list[tuple[TopicPartition, int, int]] = []
    sink = open_sink(url, keep_history=True)
    sink.reset("ACTIVE", "test")
    batch = 0
    for i in range(10):
        at = now - 95_000 + i * 10_000
        records = []
        for group, (points, _, _) in HISTORIES.items():
            offset, log_end = points[i]
            records.append(commit(group, _topic(group), 0, offset, commit_timestamp_ms=at))
            observed.append((TopicPartition(_topic(group), 0), at, log_end))
        batch = _write(sink, batch, records, input_rows=len(records))
    for i in range(10):
        at = now - 309_000 + i * 1000
        records = [commit(STOPPED, _topic(STOPPED), 0, 10 + i, commit_timestamp_ms=at)]
        observed.append((TopicPartition(_topic(STOPPED), 0), at, 100))
        batch = _write(sink, batch, records, input_rows=1, group_commits={STOPPED: 1})
    batch = _write(
        sink,
        batch,
        [group_metadata(STOPPED, generation=3, members=2)],
        input_rows=7,
        commits_applied=6,
        rejected=1,
        state_keys=5,
        duration_ms=250,
    )
    sink.heartbeat()  # a live job: the status metric says ACTIVE only while this is fresh
    sink.close()
    app = create_app(ServeSettings(sink_url=url, cluster_name="local", log_end_interval_s=3600))
    with TestClient(app) as test_client:
        # The evaluator's own first pass, at start, must not overwrite the one below.
        deadline = time.monotonic() + 60
        while not app.state.evaluator.last_pass_s and time.monotonic() < deadline:
            time.sleep(0.05)
        log_ends = app.state.view.log_ends
        # The log-end offsets the server would have seen over time, then now.
        for tp, at, log_end in observed:
            log_ends.observe({tp: log_end}, at)
        for group, (_, log_end_now, _) in HISTORIES.items():
            log_ends.observe({TopicPartition(_topic(group), 0): log_end_now}, now)
        log_ends.observe({TopicPartition(_topic(STOPPED), 0): 100}, now)
        app.state.evaluator.evaluate()  # the index's statuses: the evaluator's last pass
        yield test_client


def _envelope(response: Any, url: str) -> dict[str, Any]:
    body = response.json()
    assert body["request"]["url"] == url
    assert isinstance(body["request"]["host"], str) and body["request"]["host"]
    return body


def test_burrow_cluster_routes(client: TestClient) -> None:
    assert client.get("/burrow/admin").text == "GOOD"
    body = _envelope(client.get("/v3/kafka"), "/v3/kafka")
    assert body["error"] is False
    assert body["message"] == "cluster list returned"
    assert body["clusters"] == ["local"]
    module = client.get("/v3/kafka/local").json()["module"]
    assert module["class-name"] == "kafka"
    assert set(module) == {
        "class-name", "servers", "client-profile", "topic-refresh", "offset-refresh",
    }  # fmt: skip
    assert set(module["client-profile"]) == {"name", "client-id", "kafka-version", "tls", "sasl"}
    missing = client.get("/v3/kafka/elsewhere")
    assert missing.status_code == 404
    assert missing.json()["error"] is True and missing.json()["message"] == "cluster not found"


def test_burrow_consumer_list_and_detail(client: TestClient) -> None:
    body = _envelope(client.get("/v3/kafka/local/consumer"), "/v3/kafka/local/consumer")
    assert body["message"] == "consumer list returned"
    assert sorted(body["consumers"]) == sorted([*HISTORIES, STOPPED])
    detail = client.get("/v3/kafka/local/consumer/slow").json()
    assert detail["message"] == "consumer detail returned"
    (partition,) = detail["topics"][_topic("slow")]
    assert set(partition) == {"offsets", "owner", "client_id", "current-lag"}
    assert partition["current-lag"] == 130 - 109
    assert len(partition["offsets"]) == 10
    first, last = partition["offsets"][0], partition["offsets"][-1]
    assert set(first) == {"offset", "timestamp", "observedAt", "lag"}
    assert (first["offset"], first["lag"]) == (100, 10)
    assert (last["offset"], last["lag"]) == (109, 19)
    gone = client.get("/v3/kafka/local/consumer/nobody")
    assert gone.status_code == 404
    assert gone.json()["message"] == "cluster or consumer not found"


def test_offsets_as_of_a_time_from_the_history(client: TestClient) -> None:
    detail = client.get("/v3/kafka/local/consumer/slow").json()
    (partition,) = detail["topics"][_topic("slow")]
    fifth = partition["offsets"][4]  # offset 104
    url = "/v3/kafka/local/consumer/slow/offsets"
    for as_of, offset in ((fifth["timestamp"], 104), (fifth["timestamp"] - 5000, 103)):
        body = _envelope(client.get(url, params={"as_of": str(as_of)}), url)
        assert body["message"] == "consumer offsets as of returned" and body["as_of"] == as_of
        (answer,) = body["offsets"]
        assert (answer["topic"], answer["partition"], answer["offset"]) == (
            _topic("slow"),
            0,
            offset,
        )
        assert answer["exact"] is True and answer["timestamp"] <= as_of
    before = client.get(url, params={"as_of": "2001-01-01T00:00:00"}).json()
    assert before["offsets"] == []
    bad = client.get(url, params={"as_of": "noon"})
    assert bad.status_code == 400 and bad.json()["message"].startswith("as_of: expected")
    assert client.get("/v3/kafka/local/consumer/nobody/offsets?as_of=1").status_code == 404


def test_offsets_as_of_a_time_of_a_group_deleted_since(client: TestClient, sink_url: str) -> None:
    """ "Put the group back" is asked most after its offsets are gone: its history finds it."""
    (partition,) = client.get("/v3/kafka/local/consumer/slow").json()["topics"][_topic("slow")]
    fifth = partition["offsets"][4]  # offset 104
    sink = open_sink(sink_url, keep_history=True)
    try:
        _write(sink, sink.status().last_batch_id + 1, [tombstone("slow", _topic("slow"), 0)])
    finally:
        sink.close()
    assert client.get("/v3/kafka/local/consumer/slow").status_code == 404
    url = "/v3/kafka/local/consumer/slow/offsets"
    (answer,) = client.get(url, params={"as_of": str(fifth["timestamp"])}).json()["offsets"]
    assert answer["offset"] == 104


@pytest.mark.parametrize("group", [*HISTORIES, STOPPED])
def test_each_status_of_burrows_rules_from_a_crafted_history(
    client: TestClient, group: str
) -> None:
    expected = HISTORIES[group][2] if group in HISTORIES else "STOP"
    lag = client.get(f"/v3/kafka/local/consumer/{group}/lag").json()
    assert lag["message"] == "consumer status returned"
    status = lag["status"]
    assert set(status) == {
        "cluster", "group", "status", "complete", "partitions", "partition_count", "maxlag",
        "totallag", "reason",
    }  # fmt: skip
    (partition,) = status["partitions"]
    assert partition["status"] == expected
    assert set(partition) == {
        "topic", "partition", "owner", "client_id", "status", "start", "end", "current_lag",
        "complete", "reason",
    }  # fmt: skip
    assert partition["complete"] == 1.0
    # Burrow's fields, and ours: which rule gave the status (Burrow's clients ignore it).
    assert partition["reason"].startswith(f"{expected}: ")
    assert status["reason"].startswith(f"{status['status']}: ")
    assert status["group"] == group and status["cluster"] == "local"
    # The group: the partition's status, STOP, STALL and REWIND counted as ERR.
    assert status["status"] == (expected if expected in ("OK", "WARN") else "ERR")
    assert status["totallag"] == partition["current_lag"]
    assert status["maxlag"]["partition"] == 0
    # /status lists only the partitions not OK.
    problems = client.get(f"/v3/kafka/local/consumer/{group}/status").json()["status"]
    assert len(problems["partitions"]) == (0 if expected == "OK" else 1)
    assert problems["partition_count"] == 1


def test_metrics_carry_kafka_exporters_names_and_the_progress(client: TestClient) -> None:
    response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    slow = {"consumergroup": "slow", "topic": _topic("slow"), "partition": "0"}
    assert value("kafka_consumergroup_current_offset", **slow) == 109
    assert value("kafka_consumergroup_lag", **slow) == 21
    assert value("kafka_consumergroup_lag_sum", consumergroup="slow", topic=_topic("slow")) == 21
    assert value("kafka_topic_partition_current_offset", topic=_topic("slow"), partition="0") == 130
    assert value("kafka_consumergroup_members", consumergroup=STOPPED) == 2
    assert value("consumer_offsets_status", status="ACTIVE") == 1
    assert value("consumer_offsets_status", status="LOADING") == 0
    assert value("consumer_offsets_status", status="NOT_RESPONDING") == 0
    assert abs(value("consumer_offsets_heartbeat_timestamp_seconds") - time.time()) < 60
    assert value("consumer_offsets_batches") == 21
    assert value("consumer_offsets_last_batch_input_rows") == 7
    assert value("consumer_offsets_last_batch_commits_applied") == 6
    assert value("consumer_offsets_last_batch_rejected") == 1
    assert value("consumer_offsets_state_keys") == 5
    assert value("consumer_offsets_last_batch_duration_seconds") == 0.25
    # The sink's commits counter: ten batches of one commit each.
    assert value("kafka_consumergroup_commits_total", cluster_name="local", group=STOPPED) == 10


def test_dashboard_pages(client: TestClient) -> None:
    index = client.get("/")
    assert index.status_code == 200
    for group in [*HISTORIES, STOPPED]:
        assert f'href="/group/{group}"' in index.text
    assert 'class="status WARN"' in index.text
    page = client.get("/group/slow")
    assert page.status_code == 200
    assert "<svg" in page.text and 'class="series"' in page.text
    assert '<td class="num">21</td>' in page.text  # the partition's lag
    assert "<script" not in page.text and "http://" not in page.text.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    assert client.get("/group/nobody").status_code == 404


def test_a_stale_heartbeat_is_not_responding_in_the_metrics_and_the_header(
    sink_url: str,
) -> None:
    ago = 3_600_000
    with open_sink(sink_url, clock=lambda: int(time.time() * 1000) - ago) as sink:
        sink.reset("ACTIVE", "a job that was SIGKILLed an hour ago")
        sink.heartbeat()
    app = create_app(
        ServeSettings(sink_url=sink_url, cluster_name="local", log_end_interval_s=3600)
    )
    with TestClient(app) as client:
        metrics = client.get("/metrics").text
        header = client.get("/").text
    assert 'consumer_offsets_status{status="NOT_RESPONDING"} 1.0' in metrics
    assert 'consumer_offsets_status{status="ACTIVE"} 0.0' in metrics
    assert "NOT RESPONDING (last seen" in header and "1h00m ago)" in header


def test_the_pass_over_every_group_gives_each_groups_own_status(client: TestClient) -> None:
    view = client.app.state.view  # type: ignore[attr-defined]
    chunks: list[float] = []
    every = dict(view.statuses(chunk=2, between=lambda took: chunks.append(took) or True))
    assert set(every) == {*HISTORIES, STOPPED} and len(chunks) == 3
    for group, status in every.items():
        alone = view.status_of(group, view.partitions(group))  # its own page's reading
        assert status.status == alone.status, group
        # The reasons' durations are read at two moments: equal but for the seconds.
        assert [_without_durations(p.as_burrow()) for p in status.partitions] == [
            _without_durations(p.as_burrow()) for p in alone.partitions
        ]
    assert len(dict(view.statuses(chunk=2, between=lambda took: False))) == 2  # stopped


def _without_durations(partition: dict[str, Any]) -> dict[str, Any]:
    return {**partition, "reason": re.sub(r"\d+[smhd]\d*[smh]?", "…", partition["reason"])}


def test_a_stopped_group_says_why_in_burrows_routes_and_on_the_dashboard(
    client: TestClient,
) -> None:
    # Ten commits 1 s apart, the last 5 min ago, 81 behind: Burrow's STOP rule.
    why = r"STOP: no commit for 5m0\ds while 81 behind \(longer than the 9s its last 10 commits"
    status = client.get(f"/v3/kafka/local/consumer/{STOPPED}/status").json()["status"]
    (partition,) = status["partitions"]
    assert re.match(why, partition["reason"]), partition["reason"]
    assert re.match(f"ERR: {_topic(STOPPED)}-0 {why}", status["reason"]), status["reason"]
    page = client.get(f"/group/{STOPPED}").text
    assert re.search(f'<p id="reason">ERR: {_topic(STOPPED)}-0 {why}', page)
    assert re.search(f'<td class="muted">{why}', page)  # the partition's row
    index = client.get("/").text
    assert re.search(f'class="status ERR" title="ERR: {_topic(STOPPED)}-0 {why}', index)
    assert re.search(f'<td class="muted">ERR: {_topic(STOPPED)}-0 {why}', index)
    healthy = client.get("/v3/kafka/local/consumer/caught-up/lag").json()["status"]
    assert healthy["reason"] == "OK: all 1 partition(s) consuming or caught up"


def test_gzip_and_plain_scrapes_carry_the_same_text(client: TestClient) -> None:
    plain = client.get("/metrics", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert 'kafka_consumergroup_lag{consumergroup="slow"' in plain.text
    # The registry's families (progress, the commits counter) come after the lag text.
    last = plain.text.rstrip().splitlines()[-1]
    assert last.startswith(("consumer_offsets_", "kafka_consumergroup_commits_total")), last
    with client.stream("GET", "/metrics", headers={"Accept-Encoding": "gzip"}) as zipped:
        assert zipped.headers["content-encoding"] == "gzip"
        raw = b"".join(zipped.iter_raw())
    # One gzip stream, whole: clients that read a single member (httpx, curl) get every line.
    stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
    assert stream.decompress(raw) == plain.content
    assert stream.eof and not stream.unused_data
