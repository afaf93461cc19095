"""A row check of ``apply_batch`` for tenants: Kafka's ACLs over whole columns, as ``KafkaApis``
checks them before the coordinator sees a request.

0. a TxnOffsetCommit's transactional id: WRITE (``handleTxnOffsetCommitRequest`` asks it first);
   refused: TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition, nothing applied;
1. the group: READ for OffsetCommit, TxnOffsetCommit and GroupMetadata, DELETE for OffsetDelete
   and DeleteGroups; refused: GROUP_AUTHORIZATION_FAILED on every partition of a commit
   (``OffsetCommitRequest.getErrorResponse``, ``TxnOffsetCommitRequest``'s alike), request-level
   otherwise, nothing applied;
2. then each partition's topic: READ for both commits and OffsetDelete; refused:
   TOPIC_AUTHORIZATION_FAILED on those partitions only, the others go on.

Rows without a group id, topic or transactional id are left to the checks that answer them. The
transactional id is the one the request names: the job does not see a record's producer id, so
it cannot tell that the record was written in that transaction (the cluster's own WRITE on the
TransactionalId, which its producer needed, is what binds the two)."""

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
    all_rows = np.arange(batch.n)
    txn = commit & (batch.api == TXN_OFFSET_COMMIT)
    if txn.any():
        idx = np.flatnonzero(txn)
        txn_ok = np.ones(batch.n, dtype=bool)
        txn_ok[idx] = _allowed(
            authorizer,
            ResourceType.TRANSACTIONAL_ID,
            batch.col("transactional_id").take(pa.array(idx)),
            AclOperation.WRITE,
        )
        refused = txn & ~txn_ok
        answers.add(all_rows[refused], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, False)
        commit = commit & txn_ok
    groups = batch.col("group_id")
    group_ok = np.ones(batch.n, dtype=bool)
    for api, operation in _GROUP_OPERATION.items():
        rows = (commit | other) & (batch.api == api)
        if rows.any():
            idx = np.flatnonzero(rows)
            group_ok[idx] = _allowed(
                authorizer, ResourceType.GROUP, groups.take(pa.array(idx)), operation
            )
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
