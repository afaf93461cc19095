"""The group page's point in time over a real SQLite sink (no Kafka, no Spark): the committed
offsets over the kept history with the thinned ranges marked, bounded per view; the offsets as
of a time, as the ``offsets?as_of=`` route answers them, with the command that resets the
group there (which the CLI's own parser reads back to the same time)."""

from __future__ import annotations

import html
import re
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from starlette.testclient import TestClient

from connectors.sinks import BatchProgress, open_sink
from state.commit_history import DAY, HOUR, MINUTE
from streaming.cli.commands.reset import parse_time
from streaming.cli.main import build_parser
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from streaming.serve.dashboard import LEFT, RIGHT, WIDTH
from streaming.serve.point_in_time import group_history, iso_utc
from streaming.serve.tenant_views import Viewer
from tests.connectors.sinks.record_frames import commit, frame, tombstone


class Timeline(NamedTuple):
    """Group g's commits of topic orders, placed relative to when the module's sink is made (not
    to when the module is imported: a long session runs it minutes later, and the page thins by
    the age it sees)."""

    now: int
    #: A minute bucket half an hour ago: thinned one a minute, but not thinned yet in this sink.
    bucket: int
    #: (time, partition, offset), in log order.
    commits: tuple[tuple[int, int, int], ...]


def _timeline(now: int) -> Timeline:
    bucket = now - 30 * MINUTE - (now - 30 * MINUTE) % MINUTE
    return Timeline(now, bucket, (
        (now - 3 * DAY, 0, 10),
        (now - 5 * HOUR, 0, 20),
        (bucket - 20_000, 0, 30),
        (bucket + 50_000, 0, 31),  # a commit before it in its bucket would not be kept
        (now - 2 * MINUTE, 0, 40),
        (now - 1 * MINUTE, 1, 7),  # partition 1 had no commit half an hour ago
    ))  # fmt: skip


@pytest.fixture(scope="module")
def timeline() -> Timeline:
    return _timeline(int(time.time() * 1000))


@pytest.fixture(scope="module")
def sink_url(tmp_path_factory: pytest.TempPathFactory, timeline: Timeline) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('history') / 'offsets.db'}"
    with open_sink(url, keep_history=True) as sink:
        sink.reset("ACTIVE", "test")
        for batch, (at, partition, offset) in enumerate(timeline.commits):
            records = frame(commit("g", "orders", partition, offset, commit_timestamp_ms=at))
            sink.write_batch(batch, records, BatchProgress(batch_id=batch, input_rows=1))
    return url


@pytest.fixture(scope="module")
def client(sink_url: str) -> Iterator[TestClient]:
    app = create_app(
        ServeSettings(sink_url=sink_url, cluster_name="local", log_end_interval_s=3600)
    )
    with TestClient(app) as test_client:
        yield test_client


def _history_chart(page: str) -> str:
    found = re.search(r'<svg[^>]*class="history-chart".*?</svg>', page, re.S)
    assert found, page[-3000:]
    return found.group(0)


def _cells(page: str, table: str) -> list[list[str]]:
    found = re.search(f'<table id="{table}">(.*?)</table>', page, re.S)
    assert found, page[-3000:]
    rows = re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S)[1:]  # not the header
    return [
        [html.unescape(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in rows
    ]


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms // 1000))


def test_the_group_page_draws_the_kept_history_with_its_thinned_ranges(
    client: TestClient, timeline: Timeline
) -> None:
    now, commits = timeline.now, timeline.commits
    page = client.get("/group/g")
    assert page.status_code == 200
    chart = _history_chart(page.text)
    # Every range of the 3 days kept, oldest first, each marked with how it is kept.
    kept = re.findall(r'class="kept"[^>]*>kept ([^<]+)<', chart)
    assert kept == ["1/h", "1/10 min", "1/min", "1/s"]
    assert re.findall(r'data-series="([^"]+)"', chart) == ["orders-0", "orders-1"]
    # Each commit a point in its own range (each range a quarter of the axis), linked to the
    # page as of its time.
    quarter = (WIDTH - LEFT - RIGHT) / 4
    for at, partition, offset in commits:
        point = re.search(
            rf'<a href="\?as_of={re.escape(iso_utc(at))}#as-of"><circle cx="([\d.]+)"[^>]*>'
            rf"<title>orders-{partition} {_utc(at)}: offset {offset}</title>",
            chart,
        )
        assert point, (at, offset)
        age = now - at
        expected = 0 if age > DAY else 1 if age > 2 * HOUR else 2 if age > 10 * MINUTE else 3
        assert int((float(point.group(1)) - LEFT) // quarter) == expected, (at, offset)
    assert f"{len(commits)} kept commit(s) from {_utc(now - 3 * DAY)} UTC" in page.text


def test_a_page_view_reads_at_most_its_cap_of_history_rows(
    sink_url: str, timeline: Timeline
) -> None:
    now, bucket, commits = timeline
    with open_sink(sink_url, read_only=True) as sink:
        whole = group_history(sink, Viewer(), "g", now)
        capped = group_history(sink, Viewer(), "g", now, limit=3)
    assert (whole.rows_read, whole.capped) == (len(commits), False)
    # The newest applied three: a view stops there, and says the range it drew.
    assert (capped.rows_read, capped.capped) == (3, True)
    assert capped.series == {"orders-0": [(bucket + 50_000, 31), (now - 2 * MINUTE, 40)],
                             "orders-1": [(now - MINUTE, 7)]}  # fmt: skip
    assert [r.label for r in capped.ranges] == ["1/min", "1/s"]


def _as_of(client: TestClient, at: Any) -> tuple[Any, list[dict[str, Any]]]:
    page = client.get("/group/g", params={"as_of": str(at)})
    route = client.get("/v3/kafka/local/consumer/g/offsets", params={"as_of": str(at)})
    return page, route.json()["offsets"]


def test_the_group_page_as_of_a_time_answers_as_the_route_and_says_how_to_go_back(
    client: TestClient, timeline: Timeline
) -> None:
    bucket = timeline.bucket
    # Before the one commit kept of a thinned bucket: the one before the bucket, exact as of
    # the bucket's start only (a commit of the bucket before the time would have been thinned).
    at = bucket + 30_000
    page, route = _as_of(client, at)
    assert page.status_code == 200
    assert route == [
        {"topic": "orders", "partition": 0, "offset": 30, "metadata": "",
         "timestamp": bucket - 20_000, "exact": False, "exact_as_of": bucket - 1}
    ]  # fmt: skip
    assert _cells(page.text, "as-of-offsets") == [
        ["orders", "0", "30", _utc(bucket - 20_000), f"exact as of {_utc(bucket - 1)}"],
        ["orders", "1", "", "", "no commit then"],
    ]
    command = html.unescape(re.search(r'<pre id="reset-command">(.*?)</pre>', page.text).group(1))  # type: ignore[union-attr]
    assert command == (
        f"consumer-offsets reset-offsets --group g --all-topics --to-committed-at {iso_utc(at)}"
        " --execute"
    )
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert (args.group, args.all_topics, args.execute) == ("g", True, True)
    assert parse_time(args.to_committed_at, "--to-committed-at") == at
    assert 'class="as-of"' in _history_chart(page.text)  # the time marked on the chart

    # The time input's own form (ISO 8601, no zone: UTC), at a commit: that one, exact.
    typed = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((bucket + 50_000) // 1000))
    page, route = _as_of(client, typed)
    assert [(o["offset"], o["exact"]) for o in route] == [(31, True)]
    assert _cells(page.text, "as-of-offsets")[0][2:] == ["31", _utc(bucket + 50_000), "exact"]
    assert f'name="as_of" step="1" value="{typed}"' in page.text

    before = client.get("/group/g", params={"as_of": "2001-01-01T00:00:00"})
    assert "No commit of the group at or before 2001-01-01 00:00:00 UTC" in before.text
    assert "reset-command" not in before.text
    bad = client.get("/group/g", params={"as_of": "noon"})
    assert bad.status_code == 400
    assert "as_of: expected epoch ms or ISO 8601 time, got 'noon'" in html.unescape(bad.text)


def test_over_a_mirrors_sink_the_page_gives_kafkas_own_reset(
    tmp_path: Path, timeline: Timeline
) -> None:
    """A mirror's sink has no job to send a reset to: the page gives the plan as Kafka's
    ``--from-file`` reads it and Kafka's command."""
    url = f"sqlite:///{tmp_path / 'mirror.db'}"
    with open_sink(url, keep_history=True) as sink:
        sink.bind_source_cluster("cluster-id", "prod")
        sink.reset("ACTIVE", "test")
        for batch, (at, partition, offset) in enumerate(timeline.commits):
            records = frame(commit("g", "orders", partition, offset, commit_timestamp_ms=at))
            sink.write_batch(batch, records, BatchProgress(batch_id=batch, input_rows=1))
    app = create_app(ServeSettings(sink_url=url, cluster_name="prod", log_end_interval_s=3600))
    with TestClient(app) as mirror:
        page = mirror.get("/group/g", params={"as_of": str(timeline.bucket + 30_000)})
    assert page.status_code == 200
    assert "This sink mirrors cluster prod" in page.text
    plan = re.search(r'<pre id="reset-plan">(.*?)</pre>', page.text, re.DOTALL)
    assert plan is not None and html.unescape(plan.group(1)) == "orders,0,30\n"
    command = re.search(r'<pre id="reset-command">(.*?)</pre>', page.text)
    assert command is not None
    assert shlex.split(html.unescape(command.group(1))) == [
        "kafka-consumer-groups.sh", "--bootstrap-server", "BROKERS", "--group", "g",
        "--reset-offsets", "--from-file", "offsets.csv", "--execute",
    ]  # fmt: skip


def test_the_page_of_a_group_deleted_since_shows_it_as_of_a_time_before(tmp_path: Path) -> None:
    """ "Put the group back" is asked most after its offsets are gone: the page finds the group by
    its history, as the ``offsets?as_of=`` route does, and only as of a time it had commits."""
    now = int(time.time() * 1000)
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    with open_sink(url, keep_history=True) as sink:
        sink.reset("ACTIVE", "test")
        records = frame(commit("gone", "orders", 0, 42, commit_timestamp_ms=now - HOUR))
        sink.write_batch(0, records, BatchProgress(batch_id=0, input_rows=1))
        gone = frame(tombstone("gone", "orders", 0))
        sink.write_batch(1, gone, BatchProgress(batch_id=1, input_rows=1))
    app = create_app(ServeSettings(sink_url=url, cluster_name="local", log_end_interval_s=3600))
    with TestClient(app) as client:
        assert client.get("/group/gone").status_code == 404
        page = client.get("/group/gone", params={"as_of": str(now - HOUR + 1)})
        assert page.status_code == 200
        assert _cells(page.text, "as-of-offsets") == [
            ["orders", "0", "42", _utc(now - HOUR), "exact"]
        ]
        assert "--group gone" in html.unescape(page.text)
        before = client.get("/group/gone", params={"as_of": str(now - 2 * HOUR)})
        assert before.status_code == 404
        assert client.get("/group/nobody", params={"as_of": str(now)}).status_code == 404
