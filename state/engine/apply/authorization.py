"""A row check of ``apply_batch`` for tenants: Kafka's ACLs over whole columns.

A batch read from a tenant's ingest topic comes with that tenant's ``Authorizer``
(``state.coordinator.acls``); each request is checked as Kafka's ``KafkaApis`` checks it before
its coordinator sees it:

1. the group: OffsetCommit and GroupMetadata need READ on it, OffsetDelete and DeleteGroups
   DELETE. Refused: GROUP_AUTHORIZATION_FAILED (30) — on every partition of a commit (Kafka's
   ``OffsetCommitRequest.getErrorResponse``), request-level for the other APIs — and nothing of
   the request is applied;
2. then each partition's topic: READ for OffsetCommit and OffsetDelete. Refused:
   TOPIC_AUTHORIZATION_FAILED (29) on those partitions only; the request's other partitions go
   on as Kafka hands them to its coordinator.

Rows without a group id or a topic are left to the checks that answer them (INVALID_GROUP_ID,
UNKNOWN_TOPIC_OR_PARTITION). Every distinct group and topic of a batch is decided once.
"""

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
    Batch,
)

#: The group operation each API (by its index in ``batch.APIS``) asks for.
_GROUP_OPERATION = {
    OFFSET_COMMIT: AclOperation.READ,
    OFFSET_DELETE: AclOperation.DELETE,
    DELETE_GROUPS: AclOperation.DELETE,
    GROUP_METADATA: AclOperation.READ,
}


def _allowed(
    authorizer: Authorizer,
    resource_type: ResourceType,
    names: pa.Array,
    operation: AclOperation,
) -> np.ndarray:
    """Per value of ``names`` (null: True, left to other checks), whether ``operation`` on it is
    allowed."""
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
    """Answer the rows of ``commit`` (OffsetCommit partitions) and ``other`` (rows of the other
    APIs' requests) that ``authorizer`` refuses (module docstring); return both masks without
    them. ``first`` marks each request's first row."""
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
