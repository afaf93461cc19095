"""Applying a request frame to a shard: ``apply_batch``, in four steps decided before the state
changes: ``row_checks`` (what needs no state), ``routing`` (group ids, NOT_COORDINATOR),
``fast_path`` (groups without members whose rows are all commits, over columns) and
``exact_path`` (every other group, request by request through Kafka's handlers). Steps read a
``batch.Batch`` and add to ``accumulators.Answers``/``Writes``; expiry runs first.
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd
import pyarrow as pa

from state.coordinator.acls import Authorizer
from state.coordinator.config import CoordinatorConfig
from state.engine.apply.accumulators import Answers, Writes
from state.engine.apply.batch import Batch
from state.engine.apply.exact_path import exact_path
from state.engine.apply.fast_path import fast_commits
from state.engine.apply.routing import route, split_groups
from state.engine.apply.row_checks import check_rows
from state.engine.shard_state import ShardState, expire, next_expiry_ms, replay_records
from state.formats.frames import RESPONSE_FRAME_SCHEMA

__all__ = ["ApplyResult", "apply_batch", "cleanup_group_metadata"]


class ApplyResult(NamedTuple):
    """The shard after the batch, its records (``RECORD_FRAME_SCHEMA``, expiry tombstones
    first), its responses (``RESPONSE_FRAME_SCHEMA``, log order) and the next expiry time."""

    state: ShardState
    records: pa.Table
    responses: pa.Table
    next_expiry_ms: int | None


def apply_batch(
    state: ShardState,
    frame: pa.Table | pd.DataFrame,
    now_ms: int,
    config: CoordinatorConfig,
    *,
    expire_due: bool = True,
    authorizer: Authorizer | None = None,
) -> ApplyResult:
    """Expire what is due at ``now_ms`` (if ``expire_due``), then answer every row of ``frame``
    (``REQUEST_FRAME_SCHEMA`` rows in any order, applied in log order; optional extra fields of
    ``state.formats.frames``), checking a tenant's ACLs when ``authorizer`` is given.

    ``now_ms`` is the batch's time (replayed batches decide deadlines alike); ``state`` is not
    modified. Equivalent to the reference coordinator expiring at ``now_ms`` and then handling
    the requests one by one.
    """
    expired_records = None
    if expire_due:
        expired = expire(state, now_ms, config)
        state, expired_records = expired.state, expired.records
    batch = Batch.of(frame)
    answers = Answers()
    writes = Writes()
    if batch.n:
        checked = check_rows(batch, answers, now_ms, config, authorizer)
        routing = route(batch, checked, answers, state, config)
        fast, slow = split_groups(routing, state)
        fast_commits(batch, routing, fast, state, config, answers, writes)
        exact_path(batch, routing, slow, state, config, answers, writes)
    request_records = writes.table()
    if request_records.num_rows:
        state = replay_records(state, request_records)
    records = (
        pa.concat_tables([expired_records, request_records])
        if expired_records is not None and expired_records.num_rows
        else request_records
    )
    return ApplyResult(state, records, answers.table(batch), next_expiry_ms(state))


def cleanup_group_metadata(
    state: ShardState, now_ms: int, config: CoordinatorConfig
) -> ApplyResult:
    """The shard's timer task (``GroupCoordinatorShard.cleanupGroupMetadata``): ``apply_batch``
    of an empty frame."""
    expired = expire(state, now_ms, config)
    return ApplyResult(
        expired.state, expired.records, RESPONSE_FRAME_SCHEMA.empty_table(), expired.next_expiry_ms
    )
