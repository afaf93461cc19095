"""The server as it runs for real: uvicorn on a port, log-end offsets from the test broker, a
real Prometheus server (Debian's ``prometheus``) scraping ``/metrics`` and answering PromQL,
and the dashboard rendered by headless Chromium (Debian's ``chromium``), screenshot kept."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from connectors.runtime import runtime_dir
from connectors.sinks import BatchProgress, open_sink
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from tests.connectors.sinks.record_frames import commit, frame, group_metadata
from tests.fixtures.kafka import TopicFactory
from tests.streaming.helpers import produce_raw, wait_for
from tests.streaming.serve.support import get as _get
from tests.streaming.serve.support import prometheus, serving

GROUP = "payments"
MESSAGES = 30
#: Where the dashboard's screenshot is kept for people to look at (CI keeps the folder).
SCREENSHOT = runtime_dir() / "test-output" / "dashboard.png"


@dataclass(frozen=True)
class Served:
    url: str
    topic: str


def _commit_history(sink_url: str, topic: str) -> None:
    """A group that read 30 messages' partition 0 up to 10, in four commits a few seconds apart;
    partition 1 caught up."""
    now = int(time.time() * 1000)
    with open_sink(sink_url, keep_history=True) as sink:
        sink.reset("ACTIVE", "test")
        for batch, offset in enumerate((2, 5, 8, 10)):
            at = now - (4 - batch) * 3_000
            records = [commit(GROUP, topic, 0, offset, commit_timestamp_ms=at)]
            if batch == 3:
                records += [
                    commit(GROUP, topic, 1, MESSAGES // 2, commit_timestamp_ms=at),
                    group_metadata(GROUP, generation=4, members=1),
                ]
            sink.write_batch(batch, frame(*records), BatchProgress(batch_id=batch, input_rows=1))


@pytest.fixture()
def served(kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path) -> Iterator[Served]:
    topic = topic_factory(partitions=2)
    produce_raw(kafka_bootstrap, topic, ((i % 2, f"m{i}".encode()) for i in range(MESSAGES)))
    sink_url = f"sqlite:///{tmp_path / 'offsets.db'}"
    _commit_history(sink_url, topic)
    settings = ServeSettings(sink_url, kafka_bootstrap, log_end_interval_s=1.0)
    with serving(create_app(settings)) as url:
        # Lag from the broker's log-end offsets (ListOffsets), not from anything stored.
        wait_for(lambda: _get(f"{url}/metrics"), lambda text: "kafka_consumergroup_lag{" in text)
        yield Served(url, topic)


def test_a_real_prometheus_scrapes_the_lag(served: Served, tmp_path: Path) -> None:
    with prometheus(tmp_path, served.url.removeprefix("http://")) as api:

        def query(promql: str) -> list[dict] | None:
            body = _get(f"{api}/api/v1/query?query=" + urllib.parse.quote(promql))
            return None if body is None else json.loads(body)["data"]["result"]

        lag = f'kafka_consumergroup_lag{{consumergroup="{GROUP}",topic="{served.topic}"}}'
        result = wait_for(lambda: query(lag), lambda r: r is not None and len(r) == 2, 90)
        by_partition = {r["metric"]["partition"]: float(r["value"][1]) for r in result}
        # 15 messages per partition: partition 0 committed at 10, partition 1 at 15.
        assert by_partition == {"0": 5.0, "1": 0.0}
        assert result[0]["metric"]["job"] == "consumer-offsets"
        total = query(f'kafka_consumergroup_lag_sum{{consumergroup="{GROUP}"}}')
        assert total is not None and [float(r["value"][1]) for r in total] == [5.0]
        members = query(f'kafka_consumergroup_members{{consumergroup="{GROUP}"}}')
        assert members is not None and float(members[0]["value"][1]) == 1.0
        # No job keeps this sink's heartbeat: its ACTIVE row is not believed.
        status = query('consumer_offsets_status{status="NOT_RESPONDING"}')
        assert status is not None and float(status[0]["value"][1]) == 1.0


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is not installed: bash deploy/setup.sh --test-tools")
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_dashboard_in_a_headless_browser(served: Served, tmp_path: Path) -> None:
    page = f"{served.url}/group/{GROUP}"
    # A few of the server's log-end readings (one a second) drawn as points of the lag chart.
    wait_for(lambda: (_get(page) or "").count("<circle"), lambda n: n >= 8, 30)
    # The DOM as the browser built it: the group, its partitions' lag and the chart.
    dom = _chromium("--dump-dom", page).stdout
    assert f"<h1>{GROUP} " in dom
    # Two lag charts (in messages, in seconds) and the committed offsets' history, one series
    # per partition in each.
    assert dom.count('class="lag-chart"') == 2 and dom.count('class="history-chart"') == 1
    assert dom.count('class="series"') == 6
    assert '<td class="num">5</td>' in dom  # partition 0's lag
    index = _chromium("--dump-dom", f"{served.url}/").stdout
    assert f'href="/group/{GROUP}"' in index
    # The screenshot, kept for people (and the README).
    shot = tmp_path / "dashboard.png"
    _chromium(f"--screenshot={shot}", "--window-size=900,760", page)
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, SCREENSHOT)
