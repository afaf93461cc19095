"""The server as the live tests run it: the app under serve's own server on a free port, in a
thread; and a real Prometheus scraping it."""

from __future__ import annotations

import shutil
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from connectors.kafka.local import free_port_block
from streaming.serve.server import WebServer
from streaming.serve.web_config import WebConfig
from tests.streaming.helpers import wait_for


def get(url: str) -> str | None:
    """The body of ``url``, or None while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()
    except OSError:
        return None


@contextmanager
def serving(app: Any, web: WebConfig | None = None) -> Iterator[str]:
    """``app`` on a free port with ``web``'s TLS and users (none: plain HTTP); yields its URL
    once it listens."""
    web = web or WebConfig()
    port = free_port_block(1)
    server = WebServer(app, "127.0.0.1", port, web)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, bool, 30)
        yield f"{'https' if web.tls else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@contextmanager
def prometheus(folder: Path, target: str, rule_file: str = "") -> Iterator[str]:
    """A real Prometheus scraping ``target`` (host:port) every second, its files in ``folder``
    (``rule_file``: one there, evaluated every second); yields its URL, and fails unless it
    stops cleanly."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed: bash deploy/setup.sh --test-tools")
    port = free_port_block(1)
    config = folder / "prometheus.yml"
    rules = f"  evaluation_interval: 1s\nrule_files: ['{rule_file}']\n" if rule_file else ""
    config.write_text(
        f"global:\n  scrape_interval: 1s\n{rules}"
        "scrape_configs:\n  - job_name: consumer-offsets\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]
