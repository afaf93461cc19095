"""Step 1 of ``apply_batch``: the checks that need no state, over whole columns.

In order of precedence: the decoder's rejections (their own code and reason), rows without a
request id (dead letters), unknown APIs, a TxnOffsetCommit naming no transactional id
(INVALID_REQUEST: it is no transaction's, and must not get a transaction's rules), requests past
their deadline (REQUEST_TIMED_OUT: ``state.coordinator.deadlines``), commits listing no
partitions (NONE, as Kafka answers them without the coordinator), a tenant's ACLs
(``authorization``), null offsets (INVALID_REQUEST), invalid topics or partitions
(UNKNOWN_TOPIC_OR_PARTITION)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from state.coordinator.acls import Authorizer
from state.coordinator.config import CoordinatorConfig
from state.coordinator.deadlines import request_deadline_ms, timed_out_reason
from state.coordinator.errors import ErrorCode
from state.coordinator.rules import MAX_PARTITIONS_PER_TOPIC, is_valid_topic
from state.engine.apply.accumulators import Answers
from state.engine.apply.authorization import authorize_rows
from state.engine.apply.batch import APIS, TXN_OFFSET_COMMIT, Batch


@dataclass(frozen=True)
class CheckedRows:
    """Boolean masks over the batch rows of what the row checks left unanswered."""

    commit: np.ndarray  # OffsetCommit and TxnOffsetCommit partitions that passed every row check
    other: np.ndarray  # rows of requests of the other APIs
    first: np.ndarray  # the first row of each request still to answer (for request-level answers)


def check_rows(
    batch: Batch,
    answers: Answers,
    now_ms: int,
    config: CoordinatorConfig,
    authorizer: Authorizer | None = None,
) -> CheckedRows:
    """Answer the rows of ``batch`` (not empty) that fail a row check at time ``now_ms``; return
    the rest (every row is answered here or in ``commit | other``)."""
    n = batch.n
    all_rows = np.arange(n)
    rejected = batch.error_code != 0
    if rejected.any():
        idx = all_rows[rejected]
        reasons = batch.strings("error_reason", idx)
        answers.add(
            idx,
            batch.error_code[idx],
            False,
            [r or "rejected by the request decoder" for r in reasons],
        )
    alive = ~rejected
    request_ids = batch.col("request_id")
    no_id = np.zeros(n, dtype=bool)
    if request_ids.null_count:
        no_id = alive & np.asarray(request_ids.is_null())
    # Nothing to answer to: a dead letter, whose reason says why.
    answers.add(
        all_rows[no_id],
        ErrorCode.INVALID_REQUEST,
        False,
        ["request has no request_id"] * int(no_id.sum()),
    )
    alive &= ~no_id
    first, rows_in_request = _requests_of(batch, all_rows[alive])

    unknown_api = alive & (batch.api < 0)
    if unknown_api.any():
        idx = all_rows[unknown_api & first]
        apis = batch.strings("api", idx)
        answers.add(
            idx,
            ErrorCode.INVALID_REQUEST,
            True,
            [f"unknown api {a!r} (known: {', '.join(APIS)})" for a in apis],
        )
    alive &= ~unknown_api

    no_transaction = alive & (batch.api == TXN_OFFSET_COMMIT) & _no_transactional_id(batch)
    if no_transaction.any():
        # On every partition, as Kafka answers a commit it refuses whole.
        idx = all_rows[no_transaction]
        reason = "transactionalId: missing: a TxnOffsetCommit names the transaction it is in"
        answers.add(idx, ErrorCode.INVALID_REQUEST, False, [reason] * idx.size)
        alive &= ~no_transaction

    # A request's rows share its message's timestamp and timeout: all of them are refused.
    timed_out = alive & _timed_out(batch, now_ms, config)
    if timed_out.any():
        idx = all_rows[timed_out & first]
        timeouts = [None] * idx.size if batch.timeout is None else batch.timeout[idx].tolist()
        reasons = [
            timed_out_reason(request_deadline_ms(ts, timeout, config), now_ms)
            for ts, timeout in zip(batch.timestamp[idx].tolist(), timeouts, strict=True)
        ]
        answers.add(idx, ErrorCode.REQUEST_TIMED_OUT, True, reasons)
        alive &= ~timed_out

    commit = alive & batch.commit
    # A commit listing no partitions is one row with null topic and partition: Kafka answers it
    # without consulting the coordinator.
    marker = commit & batch.topic_null & batch.partition_null & (rows_in_request == 1)
    answers.add(all_rows[marker], ErrorCode.NONE, True)
    commit &= ~marker
    other = alive & ~batch.commit
    if authorizer is not None:
        commit, other = authorize_rows(batch, authorizer, commit, other, first, answers)
    null_offset = commit & batch.offset_null
    answers.add(
        all_rows[null_offset],
        ErrorCode.INVALID_REQUEST,
        False,
        ["committed offset is null"] * int(null_offset.sum()),
    )
    commit &= ~null_offset
    bad_topic = commit & ~_valid_partitions(batch)
    answers.add(all_rows[bad_topic], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False)
    commit &= ~bad_topic
    return CheckedRows(commit, other, first)


def _no_transactional_id(batch: Batch) -> np.ndarray:
    """Per row: its ``transactional_id`` is null or empty."""
    ids = batch.col("transactional_id")
    return np.asarray(pc.fill_null(pc.equal(ids, ""), True), dtype=bool)


def _timed_out(batch: Batch, now_ms: int, config: CoordinatorConfig) -> np.ndarray:
    """Per row: ``deadlines.is_timed_out`` of its request (age against timeout, no overflow).
    Never a TxnOffsetCommit's: read once its transaction committed, it is applied however late."""
    age = now_ms - batch.timestamp
    if batch.timeout is None:  # no request of the batch has its own
        late = age >= config.request_timeout_ms
    else:
        late = age >= np.where(batch.timeout < 0, config.request_timeout_ms, batch.timeout)
    return late & (batch.api != TXN_OFFSET_COMMIT)


def _requests_of(batch: Batch, alive_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: first of its request's ``alive_idx`` rows?, and its request's count of them."""
    n = batch.n
    first = np.zeros(n, dtype=bool)
    rows_in_request = np.zeros(n, dtype=np.int64)
    if alive_idx.size:
        ingest = batch.ingest_offset[alive_idx]
        first_alive = np.ones(alive_idx.size, dtype=bool)
        first_alive[1:] = ingest[1:] != ingest[:-1]
        starts = np.flatnonzero(first_alive)
        first[alive_idx[starts]] = True
        # The batch is in log order: a request's rows are one run.
        counts = np.diff(starts, append=alive_idx.size)
        rows_in_request[alive_idx] = np.repeat(counts, counts)
    return first, rows_in_request


def _valid_partitions(batch: Batch) -> np.ndarray:
    """Per row: a valid topic name (each distinct name checked once) and partition index."""
    topic = batch.col("topic")
    # A batch names few distinct topics: check each once, with the rule the handlers use.
    encoded = topic.dictionary_encode(null_encoding="encode")
    names = encoded.dictionary.to_numpy(zero_copy_only=False).tolist()
    valid = np.array([is_valid_topic(t) for t in names], dtype=bool)
    at = encoded.indices.to_numpy()
    partition = batch.partition
    in_range = (partition >= 0) & (partition < MAX_PARTITIONS_PER_TOPIC)
    return valid[at] & ~batch.partition_null & in_range
