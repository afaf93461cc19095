"""The image's health check's reading of ``status --json``: a standby of its own host is
healthy while the sink lists it, another host's is not (deploy/container/healthcheck.py)."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path
from types import ModuleType

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
