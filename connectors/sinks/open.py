"""Opening the sink a URL names: the one module that knows every backend.

The backends import ``connectors.sinks.base``, never this module, so the package has no import
cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connectors.sinks.base import Sink
from connectors.sinks.url import parse_sink_url
from connectors.sinks.values import now_ms


def open_sink(
    url: str,
    *,
    table_prefix: str | None = None,
    keep_history: bool | None = None,
    read_only: bool | None = None,
    clock: Callable[[], int] = now_ms,
    **options: Any,
) -> Sink:
    """Open the sink a URL names, creating its tables unless ``read_only``.

    * ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` → :class:`SqliteSink`
    * ``postgresql://user:pass@host:port/db`` (or ``postgres://``) → :class:`PostgresSink`;
      libpq query parameters (``sslmode`` …) are passed on.

    ``table_prefix``, ``keep_history``, ``read_only`` and (PostgreSQL) ``schema`` may also be
    URL query parameters; keyword arguments that are not None win. Further ``options`` go to the
    sink's constructor. Raises ValueError for an unsupported scheme or malformed URL.
    """
    target = parse_sink_url(
        url, table_prefix=table_prefix, keep_history=keep_history, read_only=read_only
    )
    common: dict[str, Any] = {
        "table_prefix": target.table_prefix,
        "keep_history": target.keep_history,
        "read_only": target.read_only,
        "clock": clock,
    }
    # Backends are imported on use: a SQLite user needs no PostgreSQL driver loaded.
    if target.backend == "sqlite":
        from connectors.sinks.sqlite import SqliteSink

        return SqliteSink(target.address, **common, **options)
    from connectors.sinks.postgres import PostgresSink

    return PostgresSink(target.address, schema=target.schema, **common, **options)
