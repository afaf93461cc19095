"""The queryable sinks: the compacted offsets state in SQLite or PostgreSQL.

The public API, re-exported from its modules: :class:`Sink` (``base``), :func:`open_sink`
(``open``), :func:`redact_url` and :func:`absolute_sink_url` (``url``), the errors and the
values (``values``). Modules of this package never import the package itself.
"""

from connectors.sinks.base import Sink
from connectors.sinks.open import open_sink
from connectors.sinks.url import absolute_sink_url, redact_url
from connectors.sinks.values import (
    NO_OFFSET,
    BatchProgress,
    CommitHistoryEntry,
    CommittedOffset,
    CoordinatorState,
    CoordinatorStatus,
    GroupListing,
    LogEndOffset,
    SinkError,
    SinkWriteError,
    SourceCluster,
)

__all__ = [
    "NO_OFFSET",
    "BatchProgress",
    "CommitHistoryEntry",
    "CommittedOffset",
    "CoordinatorState",
    "CoordinatorStatus",
    "GroupListing",
    "LogEndOffset",
    "Sink",
    "SinkError",
    "SinkWriteError",
    "SourceCluster",
    "absolute_sink_url",
    "open_sink",
    "redact_url",
]
