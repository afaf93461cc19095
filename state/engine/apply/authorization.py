"""A row check of ``apply_batch`` for tenants: Kafka's ACLs over whole columns, as ``KafkaApis``
checks them before the coordinator sees a request.

1. the group: READ for OffsetCommit, TxnOffsetCommit and GroupMetadata, DELETE for OffsetDelete
   and DeleteGroups; refused: GROUP_AUTHORIZATION_FAILED on every partition of a commit
   (``OffsetCommitRequest.getErrorResponse``, ``TxnOffsetCommitRequest``'s alike), request-level
   otherwise, nothing applied;
2. then each partition's topic: READ for both commits and OffsetDelete; refused:
   TOPIC_AUTHORIZATION_FAILED on those partitions only, the others go on.

Rows without a group id or topic are left to the checks that answer them. Kafka checks a
TxnOffsetCommit's WRITE on its transactional id first; here the ingest cluster checks it, when
the producer joins the ingest topic to its transaction."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.acls import AclOperation, Authorizer, ResourceType
from state.coordinator.errors import ErrorCode
from state.engine.apply.accumulators import Answers
from state.engine.apply.batch import (
    DELETE_GROUPS,
    GROUP_METADATA,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    TXN_OFFSET_COMMIT,
    Batch,
)

#: The group operation each API asks for.
_GROUP_OPERATION = {
    OFFSET_COMMIT: AclOperation.READ,
    OFFSET_DELETE: AclOperation.DELETE,
    DELETE_GROUPS: AclOperation.DELETE,
    GROUP_METADATA: AclOperation.READ,
    TXN_OFFSET_COMMIT: AclOperation.READ,
}


def _allowed(
    authorizer: Authorizer,
    resource_type: ResourceType,
    names: pa.Array,
    operation: AclOperation,
) -> np.ndarray:
    """Per value of ``names``: ``operation`` allowed (null: True, left to other checks)."""
    unique = pc.unique(names.drop_null())
    decided = np.array(
        [authorizer.authorize(resource_type, name, operation) for name in unique.to_pylist()]
        + [True],
        dtype=bool,
    )
    at = np.asarray(pc.fill_null(pc.index_in(names, value_set=unique), len(unique)))
    return decided[at]


def authorize_rows(
    batch: Batch,
    authorizer: Authorizer,
    commit: np.ndarray,
    other: np.ndarray,
    first: np.ndarray,
    answers: Answers,
) -> tuple[np.ndarray, np.ndarray]:
    """Answer the rows of ``commit`` and ``other`` that ``authorizer`` refuses; return both masks
    without them. ``first`` marks each request's first row."""
    groups = batch.col("group_id")
    group_ok = np.ones(batch.n, dtype=bool)
    for api, operation in _GROUP_OPERATION.items():
        rows = (commit | other) & (batch.api == api)
        if rows.any():
            idx = np.flatnonzero(rows)
            group_ok[idx] = _allowed(
                authorizer, ResourceType.GROUP, groups.take(pa.array(idx)), operation
            )
    all_rows = np.arange(batch.n)
    refused = commit & ~group_ok
    answers.add(all_rows[refused], ErrorCode.GROUP_AUTHORIZATION_FAILED, False)
    commit = commit & group_ok
    # A request's rows share its group: the first row answers for the request.
    refused = other & ~group_ok
    answers.add(all_rows[refused & first], ErrorCode.GROUP_AUTHORIZATION_FAILED, True)
    other = other & group_ok

    with_topics = (commit | (other & (batch.api == OFFSET_DELETE))) & ~batch.topic_null
    if with_topics.any():
        idx = np.flatnonzero(with_topics)
        topic_ok = np.ones(batch.n, dtype=bool)
        topic_ok[idx] = _allowed(
            authorizer, ResourceType.TOPIC, batch.col("topic").take(pa.array(idx)),
            AclOperation.READ,
        )  # fmt: skip
        refused = with_topics & ~topic_ok
        answers.add(all_rows[refused], ErrorCode.TOPIC_AUTHORIZATION_FAILED, False)
        commit = commit & topic_ok
        other = other & topic_ok
    return commit, other
