"""The client side of the offset manager: what committers and operators import.

``from connectors.client import OffsetCommitClient`` commits, deletes offsets and deletes groups
through the job (``commit_client``); :class:`OffsetsReader` reads committed offsets and lag
(``offsets_reader``); every failure is one of the errors of ``errors``.
:class:`CommitProgressListener` (``spark_progress``) commits a Spark query's progress; it is
loaded on first use, so importing this package does not import pyspark.
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

if TYPE_CHECKING:
    from connectors.client.spark_progress import CommitProgressListener

__all__ = [
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
    "describe_error",
    "error_code_of",
]


def __getattr__(name: str) -> Any:
    """Import ``CommitProgressListener`` (and with it pyspark) only when it is asked for."""
    if name == "CommitProgressListener":
        from connectors.client.spark_progress import CommitProgressListener

        return CommitProgressListener
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
