"""The client side of the offset manager, what committers and operators import: the commit
client, the transactional committer, the reader and the errors. The Spark helpers, which import
pyspark, are in ``spark``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from connectors.client.answers import CommitCallback, CommitResult, DeleteResult
    from connectors.client.commit_client import OffsetCommitClient
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

#: Names whose modules import the Kafka clients, SQLAlchemy or pyarrow, loaded on first use:
#: a command's ``--help`` starts without them.
_LAZY = {
    **dict.fromkeys(("CommitCallback", "CommitResult", "DeleteResult"), "answers"),
    "OffsetCommitClient": "commit_client",
    "OffsetsReader": "offsets_reader",
    **dict.fromkeys(
        ("AppliedPosition", "SinkNotCurrentError", "wait_until_applied"), "sink_currency"
    ),
    **dict.fromkeys(
        ("GroupMetadata", "PendingTxnCommit", "TransactionalCommitter"), "transactional"
    ),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
