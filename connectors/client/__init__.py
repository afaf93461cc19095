"""The client side of the offset manager, what committers and operators import: the commit
client, the reader, the errors, and the Spark helpers (``spark``), loaded on first use so that
importing this package does not import pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connectors.client.answers import CommitCallback, CommitResult, DeleteResult
from connectors.client.commit_client import OffsetCommitClient
from connectors.client.errors import (
    ClientClosedError,
    CommitFailedError,
    CommitTimeoutError,
    CoordinatorLoadInProgressError,
    DeleteGroupFailedError,
    OffsetDeleteFailedError,
    OffsetsError,
    OffsetsRequestError,
    describe_error,
    error_code_of,
)
from connectors.client.offsets_reader import OffsetsReader
from connectors.client.sink_currency import (
    AppliedPosition,
    SinkNotCurrentError,
    wait_until_applied,
)

if TYPE_CHECKING:
    from connectors.client.spark import (
        CheckpointExistsError,
        CommitProgressListener,
        ResumedQuery,
        start_from_group,
    )

#: Names loaded on first use (they import pyspark).
_LAZY = frozenset(
    {"CommitProgressListener", "CheckpointExistsError", "ResumedQuery", "start_from_group"}
)

__all__ = [
    "AppliedPosition",
    "CheckpointExistsError",
    "ClientClosedError",
    "CommitCallback",
    "CommitFailedError",
    "CommitProgressListener",
    "CommitResult",
    "CommitTimeoutError",
    "CoordinatorLoadInProgressError",
    "DeleteGroupFailedError",
    "DeleteResult",
    "OffsetCommitClient",
    "OffsetDeleteFailedError",
    "OffsetsError",
    "OffsetsReader",
    "OffsetsRequestError",
    "ResumedQuery",
    "SinkNotCurrentError",
    "describe_error",
    "error_code_of",
    "start_from_group",
    "wait_until_applied",
]


def __getattr__(name: str) -> Any:
    """Import the Spark helpers (and with them pyspark) only when one is asked for."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module("connectors.client.spark"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
