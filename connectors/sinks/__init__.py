"""The queryable sinks: the compacted offsets state in SQLite or PostgreSQL, opened from a URL.
Modules of this package never import the package itself."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from connectors.sinks.url import absolute_sink_url, parse_sink_url, redact_url
from connectors.sinks.values import (
    NO_OFFSET,
    BatchProgress,
    CommitHistoryEntry,
    CommittedOffset,
    CoordinatorState,
    CoordinatorStatus,
    GroupListing,
    Lease,
    LeaseLost,
    LogEndOffset,
    SinkError,
    SinkWriteError,
    SourceCluster,
    Standby,
    StandbyState,
    now_ms,
)

if TYPE_CHECKING:
    from connectors.sinks.base import Sink
    from connectors.sinks.lease import lease_holder

#: Names whose modules import SQLAlchemy and pyarrow, loaded on first use: a command that
#: only parses a sink URL or catches SinkError starts without them.
_LAZY = {"Sink": "connectors.sinks.base", "lease_holder": "connectors.sinks.lease"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NO_OFFSET",
    "BatchProgress",
    "CommitHistoryEntry",
    "CommittedOffset",
    "CoordinatorState",
    "CoordinatorStatus",
    "GroupListing",
    "Lease",
    "LeaseLost",
    "LogEndOffset",
    "Sink",
    "SinkError",
    "SinkWriteError",
    "SourceCluster",
    "Standby",
    "StandbyState",
    "absolute_sink_url",
    "lease_holder",
    "open_sink",
    "redact_url",
]


def open_sink(
    url: str,
    *,
    table_prefix: str | None = None,
    keep_history: bool | None = None,
    read_only: bool | None = None,
    clock: Callable[[], int] = now_ms,
    **options: Any,
) -> Sink:
    """Open the sink ``url`` names (``url.parse_sink_url``: keyword arguments that are not None
    win over the URL's options), creating or migrating its tables unless ``read_only``; further
    ``options`` go to the backend's constructor. ValueError for a URL it cannot take."""
    target = parse_sink_url(
        url, table_prefix=table_prefix, keep_history=keep_history, read_only=read_only
    )
    common: dict[str, Any] = {
        "table_prefix": target.table_prefix,
        "keep_history": target.keep_history,
        "read_only": target.read_only,
        "clock": clock,
    }
    # Imported on use: a SQLite user needs no PostgreSQL driver loaded.
    if target.backend == "sqlite":
        from connectors.sinks.sqlite import SqliteSink

        return SqliteSink(target.address, **common, **options)
    from connectors.sinks.postgres import PostgresSink

    return PostgresSink(target.address, schema=target.schema, **common, **options)
