"""The sink backends every contract test runs against, as fixtures (used via ``conftest.py``).

SQLite in the test's temporary directory; PostgreSQL with its default COPY threshold (small
batches go through ``executemany``); PostgreSQL with ``copy_threshold=0`` (every batch goes
through COPY). PostgreSQL tables get a per-test prefix, dropped after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from connectors.sinks import Sink, open_sink


@dataclass
class Backend:
    name: str
    url: str
    options: dict[str, Any]
    #: Server URL for side connections (PostgreSQL only).
    admin_url: str | None = None
    #: The per-test table prefix: tests choosing their own prefix extend it, so that the
    #: fixture's teardown still finds (and drops) their tables.
    table_prefix: str = ""


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("postgres-copy", marks=pytest.mark.postgres),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", f"sqlite:///{tmp_path / 'offsets.db'}", {})
    url = request.getfixturevalue("postgres_sink_url")
    admin = request.getfixturevalue("postgres_url")
    options = {"copy_threshold": 0} if request.param == "postgres-copy" else {}
    prefix = dict(parse_qsl(urlsplit(url).query))["table_prefix"]
    return Backend("postgres", url, options, admin, prefix)


@pytest.fixture
def make_sink(backend: Backend) -> Iterator[Callable[..., Sink]]:
    """Open sinks on the test's backend (same tables each time); all closed at teardown."""
    opened: list[Sink] = []

    def make(**options: Any) -> Sink:
        sink = open_sink(backend.url, **{**backend.options, **options})
        opened.append(sink)
        return sink

    yield make
    for sink in opened:
        sink.close()


@pytest.fixture
def sink(make_sink: Callable[..., Sink]) -> Sink:
    return make_sink()
