"""The image's health check (deploy/container/healthcheck.py): its reading of ``status --json``
(a standby of its own host is healthy while the sink lists it, another host's is not), and
``serve`` answering over TLS on the port its configuration file sets."""

from __future__ import annotations

import http.server
import importlib.util
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.fixtures.kafka_secured import make_certificates

_FILE = Path(__file__).resolve().parents[2] / "deploy" / "container" / "healthcheck.py"


def _healthcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("healthcheck", _FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _leases(*holders: str) -> list[dict[str, object]]:
    standbys = [{"holder": h, "state": "READY"} for h in holders]
    return [{"name": "job", "holder": "other:1/a", "standbys": standbys}]


def test_a_standby_of_this_host_stands_by_and_one_of_another_does_not() -> None:
    check = _healthcheck()
    host = socket.gethostname()
    assert check.standing_by(_leases(f"{host}:4242/0a1b2c3d"))
    assert not check.standing_by(_leases(f"{host}x:4242/0a1b2c3d", f"x{host}:1/a"))
    assert not check.standing_by([])


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A port answering HTTPS with 401, as serve with TLS and users does to a request without
    a password; its certificate is signed by a CA the health check does not know."""
    folder = tmp_path_factory.mktemp("tls")
    make_certificates(folder, "unused-store-password")

    class Unauthorized(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Unauthorized)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "broker.pem", folder / "broker.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()


def test_serve_with_tls_on_the_port_its_config_file_sets_is_healthy(
    tls_server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = _healthcheck()
    config = tmp_path / "serve.toml"
    config.write_text(f'[serve]\nport = {tls_server}\nweb_config_file = "web.yml"\n')
    monkeypatch.delenv("CONSUMER_OFFSETS_SERVE_PORT", raising=False)
    assert check.serve_answers(["serve", "--config", str(config)]) is None
    # The file named by the environment, as deploy/kubernetes/serve.yaml names it.
    monkeypatch.setenv("CONSUMER_OFFSETS_SERVE_CONFIG", str(config))
    assert check.serve_answers(["serve"]) is None
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert f"port {port}" in str(check.serve_answers(["serve", "--port", str(port)]))
