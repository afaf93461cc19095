"""Which process of a deployment writes and which stand by, as serve shows them: /metrics
(SQLite and PostgreSQL sinks), the dashboard's header, and a real Prometheus evaluating
ConsumerOffsetsNoStandbyReady over them."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from connectors.sinks import StandbyState, open_sink
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from streaming.serve.scrape import registry_for
from tests.streaming.helpers import wait_for
from tests.streaming.serve.support import get, prometheus, serving

ACTIVE = "host-a:101/aaaa"
MIRROR = "host-m:303/cccc"
RULES = Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "alerts.yml"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sink_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_sink_url"))
    return f"sqlite:///{tmp_path / 'offsets.db'}"


class Standbys:
    """The job's standbys, each beating every second as a waiting process does."""

    def __init__(self, sink_url: str) -> None:
        self.states: dict[str, StandbyState] = {}
        self._sink = open_sink(sink_url)
        self._lock = threading.Lock()  # a beat never brings back a row just dropped
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def set(self, holder: str, state: StandbyState | None) -> None:
        """``holder`` in ``state`` from now on (None: it stops, its row dropped)."""
        with self._lock:
            if state is None:
                del self.states[holder]
                self._sink.drop_standby("job", holder)
            else:
                self.states[holder] = state
                self._sink.register_standby("job", holder, state)
        if not self._thread.is_alive():
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                for holder, state in self.states.items():
                    self._sink.register_standby("job", holder, state)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._sink.close()


@pytest.fixture()
def standbys(sink_url: str) -> Iterator[Standbys]:
    """The job's lease held (10 min), one standby READY and one WARMING; the mirror's lease
    released, no standby."""
    with open_sink(sink_url) as active, open_sink(sink_url) as mirror:
        assert active.acquire_lease("job", ACTIVE, 600_000) is not None
        assert mirror.acquire_lease("mirror", MIRROR, 10_000) is not None
        mirror.release_lease()
        beating = Standbys(sink_url)
        beating.set("host-b:202/bbbb", "READY")
        beating.set("host-c:203/dddd", "WARMING")
        yield beating
        beating.close()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if "lease" in s.name or "standbys" in s.name
    }


def test_the_metrics_and_the_header_say_who_writes_and_who_stands_by(
    standbys: Standbys, sink_url: str
) -> None:
    app = create_app(ServeSettings(sink_url=sink_url, log_end_interval_s=3600))
    with TestClient(app) as client:
        samples = _samples(client.get("/metrics").text)
        header = client.get("/").text
        # A tenant's scrape: its groups' counters, nothing of the deployment's processes.
        tenant = generate_latest(registry_for(app.state.view, lambda group: True)).decode()
    assert "consumer_offsets_status" in tenant and _samples(tenant) == {}
    expires = samples.pop(("consumer_offsets_lease_expires_in_seconds", (("deployment", "job"),)))
    assert 590 < expires <= 600
    released = ("consumer_offsets_lease_expires_in_seconds", (("deployment", "mirror"),))
    assert samples.pop(released) <= 0
    assert samples == {
        ("consumer_offsets_lease_epoch", (("deployment", "job"),)): 1,
        ("consumer_offsets_lease_epoch", (("deployment", "mirror"),)): 1,
        ("consumer_offsets_lease_holder_info", (("deployment", "job"), ("holder", ACTIVE))): 1,
        ("consumer_offsets_standbys", (("deployment", "job"), ("state", "READY"))): 1,
        ("consumer_offsets_standbys", (("deployment", "job"), ("state", "WARMING"))): 1,
        ("consumer_offsets_standbys", (("deployment", "mirror"), ("state", "READY"))): 0,
        ("consumer_offsets_standbys", (("deployment", "mirror"), ("state", "WARMING"))): 0,
    }
    lines = re.findall(r'<p class="muted failover">([^<]*)</p>', header)
    assert lines == [
        f"job: active {ACTIVE} (epoch 1); standbys: host-b:202/bbbb READY, host-c:203/dddd WARMING",
        "mirror: no active process (lease free); standbys: none",
    ]


def test_a_sink_without_leases_shows_none(sink_url: str) -> None:
    open_sink(sink_url).close()
    app = create_app(ServeSettings(sink_url=sink_url, log_end_interval_s=3600))
    with TestClient(app) as client:
        assert _samples(client.get("/metrics").text) == {}
        assert "failover" not in client.get("/").text


def test_prometheus_alerts_when_no_standby_is_ready(
    standbys: Standbys, sink_url: str, tmp_path: Path
) -> None:
    # alerts.yml as shipped, but firing at once rather than after 2 minutes.
    rules = RULES.read_text()
    alert = rules.index("alert: ConsumerOffsetsNoStandbyReady")
    pending = rules.index("for: 2m", alert)
    (tmp_path / "alerts.yml").write_text(rules[:pending] + "for: 0s" + rules[pending + 7 :])
    app = create_app(ServeSettings(sink_url=sink_url, log_end_interval_s=3600))
    with (
        serving(app) as url,
        prometheus(tmp_path, url.removeprefix("http://"), "alerts.yml") as api,
    ):

        def firing() -> list[str] | None:
            query = 'ALERTS{alertname="ConsumerOffsetsNoStandbyReady",alertstate="firing"}'
            body = get(f"{api}/api/v1/query?query=" + urllib.parse.quote(query))
            if body is None:
                return None
            return [r["metric"]["deployment"] for r in json.loads(body)["data"]["result"]]

        # The job has a READY standby and the mirror is stopped (its lease released): quiet.
        time.sleep(4)
        assert firing() == []
        standbys.set("host-b:202/bbbb", None)  # only a WARMING one left
        assert wait_for(firing, lambda found: found == ["job"], 30) == ["job"]
        standbys.set("host-c:203/dddd", "READY")
        wait_for(firing, lambda found: found == [], 30)
