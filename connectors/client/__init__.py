"""The client side of the offset manager: what committers and operators import.

``from connectors.client import OffsetCommitClient`` commits, deletes offsets and deletes groups
through the job (``commit_client``); :class:`OffsetsReader` reads committed offsets and lag
(``offsets_reader``); every failure is one of the errors of ``errors``.
:class:`CommitProgressListener` (``spark_progress``) commits a Spark query's progress and
:func:`start_from_group` (``spark_resume``) starts a query from a group's offsets; both are
loaded on first use, so importing this package does not import pyspark.
:func:`wait_until_applied` (``sink_currency``) waits until the sink holds a group's last commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from connectors.client.results import CommitCallback, CommitResult, DeleteResult
from connectors.client.sink_currency import (
    AppliedPosition,
    SinkNotCurrentError,
    wait_until_applied,
)

if TYPE_CHECKING:
    from connectors.client.spark_progress import CommitProgressListener
    from connectors.client.spark_resume import (
        CheckpointExistsError,
        ResumedQuery,
        start_from_group,
    )

#: Names loaded on first use (they import pyspark), and their modules.
_LAZY = {
    "CommitProgressListener": "connectors.client.spark_progress",
    "CheckpointExistsError": "connectors.client.spark_resume",
    "ResumedQuery": "connectors.client.spark_resume",
    "start_from_group": "connectors.client.spark_resume",
}

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

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
