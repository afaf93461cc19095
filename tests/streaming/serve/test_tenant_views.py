"""What each ``serve`` user sees, over a real sink and the real server (uvicorn, the web
config's users and operators): Kafka's OffsetFetch answer to its principal and nothing more.

Every route of the app is walked (the router's own list, so a route added later is walked too)
as the tenant ``team-a``, as an operator and as a user who is neither; the sink holds two
tenants' groups, a ``payroll.`` topic inside team-a's group that team-a may not DESCRIBE, a
group named with a literal backslash and ``n`` that a LITERAL DENY hides from it, and a commit
at partition 2^31-1.
"""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import httpx2
import pytest

from connectors.kafka.local import free_port_block
from connectors.sinks import BatchProgress, open_sink
from state.coordinator.acls import AclBinding
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from streaming.serve.point_in_time import iso_utc
from streaming.serve.web_config import load_web_config
from streaming.tenants import Tenant
from tests.connectors.sinks.record_frames import commit, frame
from tests.streaming.cli.support import run
from tests.streaming.helpers import wait_for
from tests.streaming.serve.support import serving

GIANT = 2**31 - 1
#: team-a's group that team-a may not see: a literal backslash then ``n``, not a newline.
BACKSLASH_N = "team-a.bs\\n"
#: What no page shown to team-a may contain: the other tenant, its topic, the hidden topic of
#: its own group and the group its DENY hides.
FORBIDDEN = ("team-b", "billing", "payroll", "team-a.bs")
#: Path parameters the walk fills in: the tenant's own, another tenant's, hidden, absent.
VALUES = {
    "cluster": ["local"],
    "group": ["team-a.orders", "team-b.billing", BACKSLASH_N, "no-such-group"],
    "topic": ["orders.a", "payroll.salaries", "billing.b", "no-such-topic"],
}
PASSWORDS = {"team-a": "a-secret", "team-b": "b-secret", "ops": "ops-secret", "stranger": "s"}


def _acl(kind: str, pattern: str, name: str, operation: str, permission: str = "ALLOW") -> Any:
    return AclBinding.parse(
        {"resource_type": kind, "pattern_type": pattern, "resource_name": name,
         "operation": operation, "permission_type": permission}
    )  # fmt: skip


TEAM_A = Tenant(
    "team-a",
    "team-a.offset-commits",
    "team-a.offset-commit-responses",
    (
        _acl("GROUP", "PREFIXED", "team-a.", "READ"),
        _acl("GROUP", "LITERAL", BACKSLASH_N, "ALL", "DENY"),
        _acl("TOPIC", "PREFIXED", "orders.", "READ"),
    ),
)
TEAM_B = Tenant(
    "team-b",
    "team-b.offset-commits",
    "team-b.offset-commit-responses",
    (_acl("GROUP", "PREFIXED", "team-b.", "READ"), _acl("TOPIC", "PREFIXED", "billing.", "READ")),
)


def _sink(folder: Path) -> str:
    url = f"sqlite:///{folder / 'offsets.db'}"
    now = int(time.time() * 1000)
    with open_sink(url, keep_history=True) as sink:
        sink.reset("ACTIVE", "test")
        records = [
            commit("team-a.orders", "orders.a", 0, 5, commit_timestamp_ms=now),
            commit("team-a.orders", "orders.a", 1, 7, commit_timestamp_ms=now),
            commit("team-a.orders", "payroll.salaries", 0, 3, commit_timestamp_ms=now),
            # A partition no topic has: Burrow's list must not grow to it.
            commit("team-a.orders", "orders.a", GIANT, 1, commit_timestamp_ms=now),
            commit("team-a.orders", "orders.unknown", GIANT, 1, commit_timestamp_ms=now),
            commit(BACKSLASH_N, "orders.a", 0, 2, commit_timestamp_ms=now),
            commit("team-b.billing", "billing.b", 0, 11, commit_timestamp_ms=now),
            commit("team-b.billing", "orders.a", 0, 13, commit_timestamp_ms=now),
        ]
        sink.write_batch(
            0,
            frame(*records),
            BatchProgress(batch_id=0, group_commits={"team-a.orders": 5, "team-b.billing": 2}),
        )
        sink.write_log_end_offsets(
            {("orders.a", 0): 100, ("orders.a", 1): 100, ("payroll.salaries", 0): 1000,
             ("billing.b", 0): 500}
        )  # fmt: skip
    return url


def _web_config(folder: Path) -> Path:
    path = folder / "web.yml"
    users = "".join(
        f"  {name}: '{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()}'\n"
        for name, password in PASSWORDS.items()
    )
    path.write_text(f"basic_auth_users:\n{users}operators: [ops]\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """The real server over the sink: its URL and the application (for its router)."""
    folder = tmp_path_factory.mktemp("views")
    app = create_app(
        ServeSettings(sink_url=_sink(folder), log_end_interval_s=3600), (TEAM_A, TEAM_B)
    )
    with serving(app, load_web_config(_web_config(folder))) as url:
        # The evaluator's first pass: every group's status and its reason (the index shows it).
        wait_for(lambda: app.state.evaluator.last_pass_s, bool, 60)
        yield url, app


def _client(user: str) -> httpx2.Client:
    return httpx2.Client(timeout=30, auth=(user, PASSWORDS[user]))


def _paths(app: Any) -> list[tuple[str, dict[str, str]]]:
    """Every route of the app's router, its path parameters filled in every way of
    :data:`VALUES` (quoted: the backslash travels as ``%5C``)."""
    found = []
    for route in app.routes:
        names = re.findall(r"\{(\w+)(?::\w+)?\}", route.path)
        for values in itertools.product(*(VALUES[n] for n in names)):
            params = dict(zip(names, values, strict=True))
            path = re.sub(
                r"\{(\w+)(?::\w+)?\}",
                lambda m, p=params: urllib.parse.quote(p[m.group(1)], safe=""),  # type: ignore[misc]
                route.path,
            )
            found.append((path, params))
    assert len(found) > 20 and any(p == "/metrics" for p, _ in found)
    return found


def _shown(response: httpx2.Response) -> str:
    """The body as a reader sees it (gzip undone by httpx2), without Burrow's echo of the
    request's own path (which names what was asked, not what exists)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
        body.pop("request", None)
        return json.dumps(body, ensure_ascii=False)
    return response.text


def test_every_route_shows_a_tenant_only_what_kafka_would(served: tuple[str, Any]) -> None:
    url, app = served
    with _client("team-a") as team_a:
        statuses: dict[tuple[str, str, str], int] = {}
        for path, params in _paths(app):
            for encoding in ("identity", "gzip"):
                response = team_a.get(url + path, headers={"Accept-Encoding": encoding})
                assert response.status_code < 500, (path, response.text)
                if encoding == "gzip" and path == "/metrics":
                    assert response.headers["content-encoding"] == "gzip"
                shown = _shown(response)
                leaked = [word for word in FORBIDDEN if word in shown]
                assert not leaked, (path, encoding, leaked, shown[:2000])
                for name in ("group", "topic"):
                    if name in params:
                        route = re.sub(re.escape(urllib.parse.quote(params[name], safe="")),
                                       "*", path)  # fmt: skip
                        statuses[(route, params[name], encoding)] = response.status_code
        # Another tenant's group or topic answers exactly as an absent one.
        for (route, value, encoding), status in statuses.items():
            absent = "no-such-group" if value in VALUES["group"] else "no-such-topic"
            if value not in ("team-a.orders", "orders.a"):
                assert status == statuses[(route, absent, encoding)], (route, value)

        # Its own group, over its visible topics only.
        consumer = team_a.get(f"{url}/v3/kafka/local/consumer/team-a.orders").json()
        assert sorted(consumer["topics"]) == ["orders.a"]
        assert len(consumer["topics"]["orders.a"]) == 2  # the topic's partitions, no more
        lag = team_a.get(f"{url}/v3/kafka/local/consumer/team-a.orders/lag").json()["status"]
        assert {p["topic"] for p in lag["partitions"]} == {"orders.a", "orders.unknown"}
        assert (lag["partition_count"], lag["totallag"]) == (4, (100 - 5) + (100 - 7))
        assert team_a.get(f"{url}/v3/kafka/local/consumer").json()["consumers"] == ["team-a.orders"]
        metrics = team_a.get(f"{url}/metrics").text
        assert 'group="team-a.orders",topic="orders.a",partition="0"} 95' in metrics
        sums = 'kafka_consumergroup_group_sum_lag{cluster_name="local",group="team-a.orders"} 188'
        assert sums in metrics
        assert 'kafka_consumergroup_commits_total{cluster_name="local",group="team-a.orders"}' in (
            metrics
        )
        index = team_a.get(f"{url}/").text
        assert "team-a.orders" in index and ">188<" in index


def test_an_operator_sees_every_group_and_topic(served: tuple[str, Any]) -> None:
    url, _ = served
    with _client("ops") as ops:
        metrics = ops.get(f"{url}/metrics").text
        for word in ("team-b.billing", "payroll.salaries", 'group="team-a.bs\\\\n"'):
            assert word in metrics
        lag = ops.get(f"{url}/v3/kafka/local/consumer/team-a.orders/lag").json()["status"]
        assert lag["totallag"] == 95 + 93 + 997
        assert ops.get(f"{url}/v3/kafka/local/consumer/team-a.bs%5Cn").status_code == 200
        assert ">1,185<" in ops.get(f"{url}/").text


def test_a_user_neither_tenant_nor_operator_is_refused_everywhere(
    served: tuple[str, Any],
) -> None:
    url, app = served
    with _client("stranger") as stranger:
        for path, _ in [*_paths(app), ("/no/such/route", {})]:
            for encoding in ("identity", "gzip"):
                response = stranger.get(url + path, headers={"Accept-Encoding": encoding})
                assert response.status_code == 403, (path, response.status_code)
                assert not any(word in response.text for word in ("team-", "orders", "payroll"))


def test_a_group_named_with_a_backslash_n_stays_hidden_by_its_deny(
    served: tuple[str, Any],
) -> None:
    """The text format escapes the backslash (``bs\\\\n``): a filter that unescaped ``\\n``
    first read it as a newline and let the DENY miss it."""
    url, _ = served
    with _client("team-a") as team_a, _client("ops") as ops:
        for client, seen in ((team_a, False), (ops, True)):
            metrics = client.get(f"{url}/metrics").text
            assert ('"team-a.bs\\\\n"' in metrics) is seen
            lag = client.get(f"{url}/v3/kafka/local/consumer/team-a.bs%5Cn/lag")
            assert lag.status_code == (200 if seen else 404)
            page = client.get(f"{url}/group/team-a.bs%5Cn")
            assert page.status_code == (200 if seen else 404)


def test_a_group_pages_history_and_as_of_show_a_tenant_only_what_it_may_describe(
    served: tuple[str, Any],
) -> None:
    url, _ = served
    at = int(time.time() * 1000)
    with _client("team-a") as team_a, _client("ops") as ops:
        own = team_a.get(f"{url}/group/team-a.orders", params={"as_of": str(at)}).text
        history = re.search(r'<svg[^>]*class="history-chart".*?</svg>', own, re.S)
        assert history and 'data-series="orders.a-0"' in history.group(0), own[-3000:]
        assert "orders.a" in re.findall(r'<table id="as-of-offsets">(.*?)</table>', own, re.S)[0]
        assert not [word for word in FORBIDDEN if word in own]
        # Its reset names its topics: --all-topics would take in the one it may not see.
        command = re.search(r'<pre id="reset-command">(.*?)</pre>', own)
        assert command and command.group(1) == (
            "consumer-offsets reset-offsets --group team-a.orders --topic orders.a --topic"
            f" orders.unknown --to-committed-at {iso_utc(at)} --execute"
        )
        for other in ("team-b.billing", BACKSLASH_N):
            page = f"{url}/group/{urllib.parse.quote(other, safe='')}"
            refused = team_a.get(page, params={"as_of": str(at)})
            assert refused.status_code == 404 and "history-chart" not in refused.text
            assert not [word for word in FORBIDDEN if word in refused.text]
            seen = ops.get(page, params={"as_of": str(at)}).text
            assert "history-chart" in seen and "--all-topics" in seen
        assert "payroll.salaries" in ops.get(f"{url}/group/team-a.orders").text


def test_a_commit_at_partition_2_31_does_not_grow_burrows_answer(
    served: tuple[str, Any],
) -> None:
    url, _ = served
    with _client("ops") as ops:
        ops.get(f"{url}/burrow/admin")  # the password checked once, before the clock starts
        started = time.monotonic()
        response = ops.get(f"{url}/v3/kafka/local/consumer/team-a.orders")
        took = time.monotonic() - started
        assert response.status_code == 200
        assert took < 1.0 and len(response.content) < 100_000, (took, len(response.content))
        topics = response.json()["topics"]
        # Known count (log-end offsets): the topic's two partitions; a topic of unknown count
        # whose one commit is past the partitions committed: left out, as Burrow drops it.
        assert len(topics["orders.a"]) == 2 and "orders.unknown" not in topics


def _tenants_file(folder: Path, *names: str) -> Path:
    path = folder / "tenants.toml"
    path.write_text(
        "".join(
            f'[[tenants]]\nname = "{n}"\ningest_topic = "{n}.in"\nresponses_topic = "{n}.out"\n'
            for n in names
        ),
        encoding="utf-8",
    )
    return path


def test_serve_refuses_a_tenant_who_is_an_operator(tmp_path: Path) -> None:
    web = _web_config(tmp_path)
    result = run(
        "serve", "--sink-url", f"sqlite:///{tmp_path / 'x.db'}", "--port", "1",
        "--tenants", str(_tenants_file(tmp_path, "team-a", "ops")), "--web-config-file", str(web),
    )  # fmt: skip
    assert result.code == 2, result
    assert "operators ops are tenants too" in result.err


def test_serve_names_in_one_warning_who_sees_nothing(tmp_path: Path) -> None:
    """stranger and team-b (no tenant of that name) are refused; team-c has no user."""
    port = free_port_block(1)
    process = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "serve", "--port", str(port),
         "--sink-url", _sink(tmp_path), "--web-config-file", str(_web_config(tmp_path)),
         "--tenants", str(_tenants_file(tmp_path, "team-a", "team-c"))],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        lines = []
        for line in process.stderr:
            lines.append(line)
            if "serving on" in line:
                break
        assert any("serving on" in line for line in lines), lines
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    warnings = [line for line in lines if "WARNING" in line]
    assert len(warnings) == 1, lines
    assert "users stranger, team-b are neither tenants nor operators" in warnings[0]
    assert "tenants team-c have no user" in warnings[0]
