"""The server as the live tests run it: the app under uvicorn on a free port, in a thread."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from connectors.kafka.local import free_port_block
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from tests.streaming.helpers import wait_for


def get(url: str) -> str | None:
    """The body of ``url``, or None while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()
    except OSError:
        return None


@contextmanager
def serving(settings: ServeSettings) -> Iterator[str]:
    """``settings``' app on a free port, plain HTTP; yields its URL once it answers."""
    port = free_port_block(1)
    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(f"{url}/burrow/admin"), lambda body: body == "GOOD", 30)
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
