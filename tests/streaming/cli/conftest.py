"""Every CLI test starts from a clean environment: no ``CONSUMER_OFFSETS_*`` setting and no
``KAFKA_BOOTSTRAP_SERVERS`` leaks into the configuration the commands load."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_config_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CONSUMER_OFFSETS_") or name == "KAFKA_BOOTSTRAP_SERVERS":
            monkeypatch.delenv(name)
