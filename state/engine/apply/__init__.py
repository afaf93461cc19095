"""Applying a request frame to a shard: ``apply_batch``.

A batch is answered in four steps, all decided before the state changes, each a module:

1. ``row_checks``: checks over columns that need no state: rows the decoder rejected, dead
   letters, unknown APIs, requests past their deadline (``request_deadlines``), commits listing
   no partitions, a tenant's ACLs (``authorization``), null offsets, invalid topics/partitions.
2. ``routing``: invalid group ids and groups of other shards (NOT_COORDINATOR); the groups left
   are split between the two paths.
3. ``fast_path``, over columns: groups whose rows in this batch are all OffsetCommits and that
   have no members. Their only state dependence is whether the group exists, which within the
   batch changes only when a commit writes.
4. ``exact_path``: every other group, request by request through ``state.coordinator.handlers``
   (Kafka's handlers, shared with the reference coordinator), over a view of the group's state
   that sees the batch's earlier records (``group_view``).

Steps read the frame through ``batch.Batch`` and add to ``accumulators.Answers``/``Writes``. The
records of steps 3 and 4 are reduced to the last record per key (as compaction would) and
replayed; expiry at ``now_ms`` runs first and its tombstones lead the records.
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
    """The shard after the batch, the records to append (``RECORD_FRAME_SCHEMA``, in the order to
    apply them: expiry tombstones first), one response row per partition or request
    (``RESPONSE_FRAME_SCHEMA``, in log order), and the earliest time anything can expire next."""

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
    """Expire what is due at ``now_ms`` (unless not ``expire_due``), then validate and apply the
    requests of ``frame``; when they come from a tenant's ingest topic, ``authorizer`` holds the
    tenant's ACLs, which every request must pass as in Kafka (``authorization``; None: no
    authorizer, as Kafka without one).

    ``frame`` holds ``REQUEST_FRAME_SCHEMA`` rows of this shard's groups in any order (rows are
    applied in log order: ``ingest_offset``, ``partition_index``), optionally with the
    ``GROUP_METADATA_FIELDS`` and the request timeout (``state.formats.frames``). Every row is
    answered: rows the decoder rejected with their own code, requests reached at or after their
    deadline (the message timestamp plus its timeout, ``state.coordinator.deadlines``) with
    REQUEST_TIMED_OUT, requests for another shard's group with NOT_COORDINATOR, and the rest by
    Kafka's rules. ``now_ms`` is the batch's time: the job passes the micro-batch timestamp Spark
    keeps in its offset log, so a replayed batch decides every deadline as it did the first
    time. ``state`` is not modified: the new state is ``state`` with the returned records
    replayed. Equivalent to the reference coordinator expiring at ``now_ms`` and then handling
    the requests one by one, each reached at ``now_ms``.

    The job expires only at Kafka's cadence, when an expiry tick (every
    ``offsets.retention.check.interval.ms``) is among the shard's input, as Kafka's coordinator
    expires only in its periodic check: a commit that expires at once (a retention of 0) stays
    fetchable until then in both.
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
    """The shard's timer task (Kafka's ``GroupCoordinatorShard.cleanupGroupMetadata``): expire
    what is due at ``now_ms``, as an ``ApplyResult`` without responses. The same as
    ``apply_batch`` with an empty frame."""
    expired = expire(state, now_ms, config)
    return ApplyResult(
        expired.state, expired.records, RESPONSE_FRAME_SCHEMA.empty_table(), expired.next_expiry_ms
    )
