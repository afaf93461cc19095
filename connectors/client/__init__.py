"""The client side of the offset manager, what committers and operators import: the commit
client, the transactional committer, the reader and the errors. The Spark helpers, which import
pyspark, are in ``spark``.
"""

from __future__ import annotations

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
from connectors.client.transactional import (
    GroupMetadata,
    PendingTxnCommit,
    TransactionalCommitter,
)

__all__ = [
    "AppliedPosition",
    "ClientClosedError",
    "CommitCallback",
    "CommitFailedError",
    "CommitResult",
    "CommitTimeoutError",
    "CoordinatorLoadInProgressError",
    "DeleteGroupFailedError",
    "DeleteResult",
    "GroupMetadata",
    "OffsetCommitClient",
    "OffsetDeleteFailedError",
    "OffsetsError",
    "OffsetsReader",
    "OffsetsRequestError",
    "PendingTxnCommit",
    "SinkNotCurrentError",
    "TransactionalCommitter",
    "describe_error",
    "error_code_of",
    "wait_until_applied",
]
