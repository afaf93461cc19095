"""``serve --web-config-file``: TLS and users as Prometheus exporters take them, checked for real —
uvicorn on a port with certificates made by openssl, httpx2 as the client, a real Prometheus
scraping with ``basic_auth`` and ``tls_config``."""

from __future__ import annotations

import functools
import json
import logging
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
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
from streaming.serve.server import is_loopback
from streaming.serve.web_config import WatchedWebConfig, WebConfig, load_web_config
from streaming.tenants import Tenant
from tests.connectors.sinks.record_frames import commit, frame
from tests.fixtures.kafka_secured import LEAF_EXTENSIONS, make_certificates
from tests.streaming.helpers import wait_for
from tests.streaming.serve.support import get, serving

PASSWORD = "correct horse battery staple"


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    folder = tmp_path_factory.mktemp("tls")
    ca, _ = make_certificates(folder, "unused-store-password")
    _openssl(folder, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key",
             "-out", "client.csr", "-subj", "/CN=prometheus")  # fmt: skip
    (folder / "client.ext").write_text(LEAF_EXTENSIONS + "extendedKeyUsage=clientAuth\n")
    _openssl(folder, "x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "client.pem", "-days", "2",
             "-extfile", "client.ext")  # fmt: skip
    return Certificates(
        ca,
        folder / "broker.pem",
        folder / "broker.key",
        folder / "client.pem",
        folder / "client.key",
    )


@functools.cache
def _hash(password: str, cost: int = 10) -> str:
    """A bcrypt hash of ``password``, made once (cost 10, the least the server takes: ~60 ms)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=cost)).decode()


def _write_config(
    folder: Path, certs: Certificates, client_auth: str = "NoClientCert", extra: str = ""
) -> Path:
    """A web config over ``certs`` with users ops (an operator) and alice, and ``extra`` lines."""
    path = folder / f"web-{client_auth}.yml"
    client_ca = f"  client_ca_file: {certs.ca}\n" if client_auth != "NoClientCert" else ""
    path.write_text(
        "tls_server_config:\n"
        f"  cert_file: {certs.server_cert}\n"
        f"  key_file: {certs.server_key}\n"
        f"{client_ca}"
        f"  client_auth_type: {client_auth}\n"
        "basic_auth_users:\n"
        f"  ops: '{_hash(PASSWORD)}'\n"
        f"  alice: '{_hash('alice-secret')}'\n"
        "operators: [ops]\n"
        f"{extra}",
        encoding="utf-8",
    )
    return path


def _sink_with_a_group(folder: Path) -> str:
    url = f"sqlite:///{folder / 'offsets.db'}"
    with open_sink(url) as sink:
        sink.reset("ACTIVE", "test")
        sink.write_batch(0, frame(commit("payments", "orders", 0, 42)), BatchProgress(batch_id=0))
    return url


def _serving(
    folder: Path, web: WebConfig, sink_url: str | None = None, tenants: tuple[Tenant, ...] = ()
) -> AbstractContextManager[str]:
    """The app (over ``sink_url``, by default a sink of one group) on a free port with
    ``web``'s TLS and users; yields its https URL."""
    settings = ServeSettings(sink_url=sink_url or _sink_with_a_group(folder))
    return serving(create_app(settings, tenants), web)


# --- the file ----------------------------------------------------------------------------------


def test_a_config_file_is_read_with_relative_paths(
    tmp_path: Path, certificates: Certificates
) -> None:
    shutil.copy(certificates.server_cert, tmp_path / "server.crt")
    shutil.copy(certificates.server_key, tmp_path / "server.key")
    path = tmp_path / "web.yml"
    path.write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        "  min_version: TLS13\n"
        f"basic_auth_users:\n  ops: '{_hash(PASSWORD)}'\n"
    )
    web = load_web_config(path)
    assert web.tls is not None
    assert (web.tls.cert_file, web.tls.min_version) == (tmp_path / "server.crt", "TLS13")
    assert web.tls.verify_mode == ssl.CERT_NONE
    assert set(web.basic_auth_users) == {"ops"}
    assert "$2b$" not in repr(web)  # hashes are never printed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tls_server_config:\n  key_file: x\n", "tls_server_config.cert_file is required"),
        ("tls_server_config:\n  cert_file: nowhere.pem\n  key_file: x\n", "cert_file: no file"),
        ("basic_auth_users:\n  ops: plain-password\n", "basic_auth_users.ops must be a bcrypt"),
        ("basic_auth_users:\n  ops: $2b$10$truncated\n", "ops must be a bcrypt hash that bcrypt"),
        # The salt's last character carries 2 bits: a typo there bcrypt cannot read.
        (f"basic_auth_users:\n  ops: '{_hash(PASSWORD)[:28]}z{_hash(PASSWORD)[29:]}'\n", "bcrypt"),
        (f"basic_auth_users:\n  ops: '{_hash(PASSWORD, 5)}'\n", "ops: bcrypt cost 5 is below 10"),
        (
            f"basic_auth_users:\n  ops: '{_hash(PASSWORD)}'\noperators: [ops, root]\n",
            "operators: root not in basic_auth_users",
        ),
        ("http_server_config: 42\n", "http_server_config must be a mapping"),
        ("http_server_config:\n  compress: true\n", "http_server_config: unknown fields"),
        ("http_server_config:\n  http2: maybe\n", "http2 must be true or false"),
        ("http_server_config:\n  headers:\n    Server: x\n", "Server: can not be configured"),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "not one of deny"),
        ("basic_users:\n  ops: x\n", "unknown fields basic_users"),
        ("tls_server_config: [1]\n", "tls_server_config must be a mapping"),
        ("[1, 2\n", "not YAML"),
    ],
)
def test_a_bad_file_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_web_config(path)


def test_client_auth_types_python_cannot_honour_are_refused(
    tmp_path: Path, certificates: Certificates
) -> None:
    with pytest.raises(ValueError, match="RequireAnyClientCert' is not supported"):
        load_web_config(_write_config(tmp_path, certificates, "RequireAnyClientCert"))
    path = tmp_path / "no-ca.yml"
    path.write_text(
        f"tls_server_config:\n  cert_file: {certificates.server_cert}\n"
        f"  key_file: {certificates.server_key}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
    )
    with pytest.raises(ValueError, match="client_ca_file is required"):
        load_web_config(path)
    # exporter-toolkit: "client CA's have been configured without a Client Auth Policy".
    path.write_text(
        f"tls_server_config:\n  cert_file: {certificates.server_cert}\n"
        f"  key_file: {certificates.server_key}\n  client_ca_file: {certificates.ca}\n"
    )
    with pytest.raises(ValueError, match="client_ca_file is set but client_auth_type is NoClient"):
        load_web_config(path)


def test_loopback_addresses() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "10.0.0.5", "::", "example.com"]))


@pytest.mark.parametrize(
    ("hashed", "message"),
    [
        ("$2b$10$truncated", "basic_auth_users.ops must be a bcrypt hash that bcrypt reads; make"),
        (_hash(PASSWORD, 5), "basic_auth_users.ops: bcrypt cost 5 is below 10"),
    ],
)
def test_the_cli_refuses_a_bad_hash_in_one_line(tmp_path: Path, hashed: str, message: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  ops: '{hashed}'\n")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "consumer-offsets"), "serve", "--sink-url",
         f"sqlite:///{tmp_path / 'x.db'}", "--web-config-file", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], lines
    assert "htpasswd -nBC 10" in lines[0]  # and how to make a good one


def test_the_cli_refuses_bad_tenants_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(
        '[[tenants]]\nname = "a"\ningest_topic = "a.in"\nresponses_topic = "a.out"\n'
        '[[tenants.acls]]\nresource_type = "GROUP"\npattern_type = "PREFIX"\n'
        'resource_name = "a."\noperation = "READ"\npermission_type = "ALLOW"\n'
    )
    result = subprocess.run(
        [str(Path(sys.executable).parent / "consumer-offsets"), "serve", "--sink-url",
         f"sqlite:///{tmp_path / 'x.db'}", "--tenants", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "tenants[0]: acls[0]: pattern_type: 'PREFIX' is not one of LITERAL, PREFIXED" in lines[0]


# --- served --------------------------------------------------------------------------------------


def test_tls_and_users(tmp_path: Path, certificates: Certificates) -> None:
    web = load_web_config(_write_config(tmp_path, certificates))
    with _serving(tmp_path, web) as url:
        with httpx2.Client(
            verify=ssl.create_default_context(cafile=certificates.ca), timeout=30
        ) as client:
            anonymous = client.get(f"{url}/metrics")
            assert anonymous.status_code == 401
            assert anonymous.headers["www-authenticate"].startswith('Basic realm="')
            assert client.get(f"{url}/metrics", auth=("ops", "wrong")).status_code == 401
            assert client.get(f"{url}/metrics", auth=("nobody", PASSWORD)).status_code == 401
            assert client.get(f"{url}/", auth=("ops", "wrong")).status_code == 401
            for _ in range(2):  # the second answer comes from the remembered digest
                metrics = client.get(f"{url}/metrics", auth=("ops", PASSWORD))
                assert metrics.status_code == 200
                assert 'kafka_consumergroup_current_offset{consumergroup="payments"' in metrics.text
            burrow = client.get(f"{url}/v3/kafka/local/consumer", auth=("ops", PASSWORD))
            assert burrow.status_code == 200 and "payments" in burrow.json()["consumers"]
            # alice is no operator and, without tenants, no tenant: it sees nothing.
            refused = client.get(f"{url}/v3/kafka/local/consumer", auth=("alice", "alice-secret"))
            assert refused.status_code == 403
        # Plain HTTP on the TLS port gets no answer, and an unknown CA is refused.
        plain = url.replace("https://", "http://")
        with pytest.raises(httpx2.HTTPError), httpx2.Client(timeout=10) as client:
            client.get(f"{plain}/metrics", auth=("ops", PASSWORD)).raise_for_status()
        with pytest.raises(httpx2.ConnectError), httpx2.Client(timeout=10) as client:
            client.get(f"{url}/metrics", auth=("ops", PASSWORD))


def test_client_certificates_when_required(tmp_path: Path, certificates: Certificates) -> None:
    web = load_web_config(_write_config(tmp_path, certificates, "RequireAndVerifyClientCert"))
    with _serving(tmp_path, web) as url:
        with (
            pytest.raises(httpx2.HTTPError),
            httpx2.Client(verify=ssl.create_default_context(cafile=certificates.ca)) as client,
        ):
            client.get(f"{url}/metrics", auth=("ops", PASSWORD)).raise_for_status()
        context = ssl.create_default_context(cafile=str(certificates.ca))
        context.load_cert_chain(str(certificates.client_cert), str(certificates.client_key))
        with httpx2.Client(verify=context, timeout=30) as client:
            assert client.get(f"{url}/metrics", auth=("ops", PASSWORD)).status_code == 200


def test_a_real_prometheus_scrapes_over_tls_with_a_user(
    tmp_path: Path, certificates: Certificates
) -> None:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.fail("prometheus is not installed: bash deploy/setup.sh --test-tools")
    web = load_web_config(_write_config(tmp_path, certificates))
    with _serving(tmp_path, web, _sink_of_two_teams(tmp_path), (ALICE,)) as url:
        target = url.removeprefix("https://")
        config = tmp_path / "prometheus.yml"
        jobs = {
            "with-user": ("ops", PASSWORD),
            "wrong-password": ("ops", "wrong"),
            "as-tenant": ("alice", "alice-secret"),  # sees alice.* only
        }
        config.write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n"
            + "".join(
                f"  - job_name: {job}\n    scheme: https\n"
                f"    tls_config:\n      ca_file: {certificates.ca}\n"
                f"    basic_auth:\n      username: {user}\n      password: '{password}'\n"
                f"    static_configs:\n      - targets: ['{target}']\n"
                for job, (user, password) in jobs.items()
            )
        )
        port = free_port_block(1)
        process = subprocess.Popen(
            [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        api = f"http://127.0.0.1:{port}/api/v1/query?query="

        def query(promql: str) -> list[dict] | None:
            body = get(api + urllib.parse.quote(promql))
            return None if body is None else json.loads(body)["data"]["result"]

        try:
            up = wait_for(lambda: query("up"), lambda r: r is not None and len(r) == 3, 60)
            assert {r["metric"]["job"]: float(r["value"][1]) for r in up} == {
                "with-user": 1.0,
                "wrong-password": 0.0,
                "as-tenant": 1.0,
            }
            offsets = "kafka_consumergroup_current_offset"
            found = wait_for(
                lambda: query(offsets),
                lambda r: r is not None
                and {x["metric"]["job"] for x in r} >= {"as-tenant", "with-user"},
                90,
            )
            seen = {
                (r["metric"]["job"], r["metric"]["consumergroup"], float(r["value"][1]))
                for r in found
            }
            assert {(g, v) for job, g, v in seen if job == "as-tenant"} == {("alice.reader", 42.0)}
            assert {(g, v) for job, g, v in seen if job == "with-user"} == {
                ("alice.reader", 42.0),
                ("bob.reader", 7.0),
                ("payments", 9.0),
            }
        finally:
            process.terminate()
            _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err.decode(errors="replace")[-2000:]


# --- tenants' views ----------------------------------------------------------------------------

#: alice is a tenant: its groups are alice.*, its topic orders; ops is no tenant (an operator).
ALICE = Tenant(
    "alice",
    "alice.commits",
    "alice.responses",
    (
        AclBinding.parse(
            {"resource_type": "GROUP", "pattern_type": "PREFIXED", "resource_name": "alice.",
             "operation": "READ", "permission_type": "ALLOW"}
        ),
        AclBinding.parse(
            {"resource_type": "TOPIC", "pattern_type": "LITERAL", "resource_name": "orders",
             "operation": "DESCRIBE", "permission_type": "ALLOW"}
        ),
    ),
)  # fmt: skip


def _sink_of_two_teams(folder: Path) -> str:
    url = f"sqlite:///{folder / 'teams.db'}"
    with open_sink(url) as sink:
        sink.reset("ACTIVE", "test")
        records = [
            commit("alice.reader", "orders", 0, 42),
            commit("bob.reader", "payments", 0, 7),
            commit("payments", "orders", 1, 9),
        ]
        sink.write_batch(0, frame(*records), BatchProgress(batch_id=0))
        sink.write_log_end_offsets({("orders", 0): 50, ("orders", 1): 10, ("payments", 0): 8})
    return url


def test_a_user_named_like_a_tenant_sees_only_its_groups(
    tmp_path: Path, certificates: Certificates
) -> None:
    web = load_web_config(_write_config(tmp_path, certificates))
    context = ssl.create_default_context(cafile=certificates.ca)
    with _serving(tmp_path, web, _sink_of_two_teams(tmp_path), (ALICE,)) as url:
        alice = httpx2.Client(verify=context, timeout=30, auth=("alice", "alice-secret"))
        ops = httpx2.Client(verify=context, timeout=30, auth=("ops", PASSWORD))
        with alice, ops:
            assert httpx2.get(f"{url}/metrics", verify=context).status_code == 401
            wrong = httpx2.get(f"{url}/metrics", verify=context, auth=("alice", "nope"))
            assert wrong.status_code == 401

            def wait_for_groups(client: httpx2.Client) -> str:
                return wait_for(
                    lambda: client.get(f"{url}/metrics").text,
                    lambda text: 'consumergroup="alice.reader"' in text,
                    timeout_s=60,
                )

            theirs = wait_for_groups(alice)
            assert "bob.reader" not in theirs and 'consumergroup="payments"' not in theirs
            assert 'topic="payments"' not in theirs  # a topic it may not DESCRIBE
            everything = wait_for_groups(ops)
            assert "bob.reader" in everything and 'consumergroup="payments"' in everything
            gzipped = alice.get(f"{url}/metrics", headers={"Accept-Encoding": "gzip"})
            assert gzipped.headers["content-encoding"] == "gzip"
            assert "bob.reader" not in gzipped.text and "alice.reader" in gzipped.text

            burrow = f"{url}/v3/kafka/local/consumer"
            assert alice.get(burrow).json()["consumers"] == ["alice.reader"]
            assert sorted(ops.get(burrow).json()["consumers"]) == [
                "alice.reader",
                "bob.reader",
                "payments",
            ]
            assert alice.get(f"{burrow}/alice.reader/lag").status_code == 200
            for group in ("bob.reader", "payments"):
                hidden = alice.get(f"{burrow}/{group}/lag")
                assert hidden.status_code == 404 and hidden.json()["error"] is True
                assert ops.get(f"{burrow}/{group}/lag").status_code == 200
            assert alice.get(f"{url}/v3/kafka/local/topic").json()["topics"] == ["orders"]
            assert alice.get(f"{url}/v3/kafka/local/topic/payments").status_code == 404

            index = wait_for(
                lambda: alice.get(f"{url}/").text,
                lambda text: "alice.reader" in text,
                timeout_s=60,
            )
            assert "bob.reader" not in index and ">payments<" not in index
            assert alice.get(f"{url}/group/alice.reader").status_code == 200
            assert alice.get(f"{url}/group/bob.reader").status_code == 404
            assert ops.get(f"{url}/group/bob.reader").status_code == 200


# --- basic auth as exporter-toolkit does it; the file read again; the start line ---------------


def _client(certificates: Certificates, **options: Any) -> httpx2.Client:
    context = ssl.create_default_context(cafile=certificates.ca)
    return httpx2.Client(verify=context, timeout=30, **options)


#: 60 logins with wrong passwords at once, from another process (as an attacker would be: not
#: sharing the server's interpreter); prints their statuses.
_FLOOD = """
import ssl, sys, httpx2
from concurrent.futures import ThreadPoolExecutor
url, ca = sys.argv[1:]
def wrong(attempt):
    user = "ops" if attempt % 2 else "nobody"  # a known and an unknown user alike
    verify = ssl.create_default_context(cafile=ca)
    with httpx2.Client(verify=verify, timeout=60, auth=(user, f"guess {attempt}")) as client:
        return client.get(url + "/metrics").status_code
with ThreadPoolExecutor(60) as pool:
    print(sorted(set(pool.map(wrong, range(60)))))
"""


def test_a_flood_of_wrong_passwords_does_not_delay_a_remembered_login(
    tmp_path: Path, certificates: Certificates
) -> None:
    web = load_web_config(_write_config(tmp_path, certificates))
    with _serving(tmp_path, web) as url, _client(certificates, auth=("ops", PASSWORD)) as ops:
        assert ops.get(f"{url}/metrics").status_code == 200  # its verdict is remembered now
        flood = subprocess.Popen(
            [sys.executable, "-c", _FLOOD, url, str(certificates.ca)],
            stdout=subprocess.PIPE,
            text=True,
        )
        scrapes: list[float] = []
        while flood.poll() is None:
            started = time.monotonic()
            assert ops.get(f"{url}/metrics").status_code == 200
            scrapes.append(time.monotonic() - started)
            time.sleep(max(0.0, 0.5 - scrapes[-1]))
        assert flood.communicate(timeout=60)[0] == "[401]\n"
        # 60 bcrypts one at a time take seconds (~75 ms each at cost 10): the scrapes ran while
        # they did. A login queued behind them would wait seconds; the bound leaves room for a
        # busy machine's scheduling, not for a queue.
        assert len(scrapes) >= 5, scrapes
        assert max(scrapes) < 1.5, scrapes
        assert sorted(scrapes)[len(scrapes) // 2] < 0.5, scrapes


def test_headers_and_passwords_bcrypt_cannot_take(
    tmp_path: Path, certificates: Certificates
) -> None:
    headers = {
        "Strict-Transport-Security": "max-age=31536000; includeSubDomains",
        "X-Frame-Options": "deny",
        "X-Content-Type-Options": "nosniff",
    }
    extra = "http_server_config:\n  http2: true\n  headers:\n" + "".join(
        f"    {name}: {value}\n" for name, value in headers.items()
    )
    web = load_web_config(_write_config(tmp_path, certificates, extra=extra))
    assert web.http2 and web.headers == headers
    with _serving(tmp_path, web) as url, _client(certificates) as client:
        answers = [
            client.get(f"{url}/metrics", auth=("ops", PASSWORD)),
            client.get(f"{url}/metrics"),
            # Over bcrypt's 72 bytes: refused as a wrong password, never a 500.
            client.get(f"{url}/metrics", auth=("ops", "x" * 100)),
            client.get(f"{url}/metrics", auth=("nobody", "x" * 100)),
        ]
        assert [answer.status_code for answer in answers] == [200, 401, 401, 401]
        for answer in answers:
            assert {name: answer.headers.get(name) for name in headers} == headers


def _server_certificate(ca: Path, folder: Path, name: str) -> tuple[Path, Path]:
    """Another certificate for 127.0.0.1 signed by ``ca`` (its key beside it): ``name``.pem/key."""
    _openssl(folder, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", "/CN=127.0.0.1")  # fmt: skip
    (folder / f"{name}.ext").write_text(
        "subjectAltName=IP:127.0.0.1\n" + LEAF_EXTENSIONS + "extendedKeyUsage=serverAuth\n"
    )
    _openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", str(ca),
             "-CAkey", str(ca.parent / "ca.key"), "-set_serial", str(time.time_ns()),
             "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")  # fmt: skip
    return folder / f"{name}.pem", folder / f"{name}.key"


def _served_certificate(url: str, ca: Path) -> bytes:
    """The certificate a new TLS handshake with ``url`` gets (DER)."""
    host, port = url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        certificate = tls.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


def test_the_file_is_read_again_when_it_changes(
    tmp_path: Path, certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    shutil.copy(certificates.server_cert, cert)
    shutil.copy(certificates.server_key, key)
    served = replace(certificates, server_cert=cert, server_key=key)
    path = _write_config(tmp_path, served)
    good = path.read_text()
    with _serving(tmp_path, load_web_config(path)) as url, _client(certificates) as client:

        def status(user: str, password: str) -> int:
            return client.get(f"{url}/metrics", auth=(user, password)).status_code

        assert status("alice", "alice-secret") != 401  # remembered as right
        path.write_text(good.replace(f"  alice: '{_hash('alice-secret')}'\n", ""))
        wait_for(lambda: status("alice", "alice-secret"), lambda answer: answer == 401, 10)
        assert status("ops", PASSWORD) == 200

        # A file that became invalid: the last good one goes on, and one ERROR says so.
        caplog.set_level(logging.ERROR, logger="streaming.serve.web_config")
        path.write_text(good.replace("basic_auth_users:", "basic_auth_users: [oops"))
        wait_for(lambda: len(caplog.records), lambda count: count > 0, 10)
        time.sleep(2.5)  # looked at twice more: no second ERROR for the same file
        assert [r.levelname for r in caplog.records] == ["ERROR"]
        assert "not YAML" in caplog.records[0].getMessage()
        assert status("ops", PASSWORD) == 200 and status("alice", "alice-secret") == 401

        # A rotated certificate (and the file made good again): new handshakes get it.
        before = _served_certificate(url, certificates.ca)
        rotated_cert, rotated_key = _server_certificate(certificates.ca, tmp_path, "rotated")
        shutil.copy(rotated_key, key)
        shutil.copy(rotated_cert, cert)
        path.write_text(good)
        expected = ssl.PEM_cert_to_DER_cert(rotated_cert.read_text())
        assert expected != before
        wait_for(lambda: _served_certificate(url, certificates.ca), lambda c: c == expected, 10)
        assert status("alice", "alice-secret") != 401  # back in the file


def test_a_reload_keeps_what_a_running_server_cannot_take(
    tmp_path: Path, certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    """A file caught while being written (empty), or one that drops TLS, would open a running
    server (no users) or leave its certificate unreloadable: kept out, one ERROR each."""
    path = _write_config(tmp_path, certificates)
    good = path.read_text()
    now = [0.0]
    watched = WatchedWebConfig(load_web_config(path), interval_s=1.0, clock=lambda: now[0])
    first = watched.current
    caplog.set_level(logging.ERROR, logger="streaming.serve.web_config")

    def look(text: str) -> WebConfig | None:
        path.write_text(text)
        now[0] += 1.0
        return watched.refresh()

    assert look("") is None and watched.current is first
    assert look(f"basic_auth_users:\n  ops: '{_hash(PASSWORD)}'\n") is None
    assert watched.current is first and watched.current.basic_auth_users
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "empty" in said[0] and "removes tls_server_config" in said[1]
    # Made good again (without alice): read.
    changed = look(good.replace("  alice: '", "  carol: '"))
    assert changed is not None and watched.current is changed
    assert set(changed.basic_auth_users) == {"ops", "carol"} and changed.tls == first.tls


def _consumer_offsets() -> str:
    return str(Path(sys.executable).parent / "consumer-offsets")


def test_serve_says_where_it_listens_and_refuses_a_busy_port(tmp_path: Path) -> None:
    sink = _sink_with_a_group(tmp_path)
    port = free_port_block(1)
    command = [_consumer_offsets(), "serve", "--sink-url", sink, "--port", str(port)]
    first = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(120, first.kill)
    timer.start()
    try:
        assert first.stderr is not None
        assert first.stderr.readline() == (
            f"serving on http://127.0.0.1:{port}/ (dashboard /, metrics /metrics, "
            "Burrow /v3/kafka)\n"
        )
        second = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert second.returncode == 1, second.stderr
        assert second.stderr.splitlines() == [
            f"error: cannot listen on 127.0.0.1:{port}: port {port} is in use"
        ]
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0  # a stop asked for is a clean stop
    finally:
        timer.cancel()
        first.kill()
        first.wait()


def test_a_reload_that_drops_every_user_or_everyone_who_sees_a_group_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file read mid-write (cut just after ``basic_auth_users:``, or inside it) would open
    the server to every client, or leave nobody who sees a group: refused, one ERROR each, the
    config before kept. A config that never had them may go on without them."""
    hashed = _hash(PASSWORD)

    def config(*users: str, operators: tuple[str, ...] = ()) -> str:
        lines = ["basic_auth_users:", *(f"  {user}: '{hashed}'" for user in users)]
        return "\n".join([*lines, f"operators: {list(operators)}"]) + "\n"

    path = tmp_path / "web.yml"
    path.write_text(config("ops", "tenant-a", "viewer", operators=("ops",)))
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    watched = WatchedWebConfig(load_web_config(path), clock=clock, tenants=("tenant-a", "b"))
    first = watched.current
    caplog.set_level(logging.ERROR, logger="streaming.serve.web_config")

    def look(text: str, on: WatchedWebConfig = watched) -> WebConfig | None:
        path.write_text(text)
        now[0] += 1.0
        return on.refresh()

    assert look("basic_auth_users:\n") is None and watched.current is first
    assert look(config("viewer")) is None and watched.current is first
    assert look(config("viewer", "other")) is None and watched.current is first
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3 and all(r.levelno == logging.ERROR for r in caplog.records)
    assert "no basic_auth_users, where there were 3" in said[0]
    assert "no operator nor tenant among basic_auth_users ['viewer']" in said[1]
    assert "['ops', 'tenant-a']" in said[1] and "serving with the web config read before" in said[1]
    # One who still sees a group: a tenant's user, or an operator.
    tenant_only = look(config("tenant-a", "viewer"))
    assert tenant_only is not None and watched.current is tenant_only
    operator_only = look(config("viewer", operators=("viewer",)))
    assert operator_only is not None and watched.current is operator_only
    # Started without users, or without anyone who sees a group: it may stay so.
    caplog.clear()
    path.write_text("http_server_config: {headers: {X-Frame-Options: deny}}\n")
    open_one = WatchedWebConfig(load_web_config(path), clock=clock)
    assert look("basic_auth_users:\n", open_one) is open_one.current is not None
    path.write_text(config("viewer"))
    blind = WatchedWebConfig(load_web_config(path), clock=clock, tenants=("b",))
    assert look(config("other"), blind) is blind.current is not None
    assert caplog.records == []
