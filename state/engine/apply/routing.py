"""Step 2 of ``apply_batch``: INVALID_GROUP_ID and NOT_COORDINATOR, then the groups left,
numbered within the batch ("local" indexes) and split between the fast and the exact path."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.rules import MAX_RECORD_STRING_BYTES
from state.engine.apply.accumulators import Answers
from state.engine.apply.batch import DELETE_GROUPS, OFFSET_COMMIT, Batch
from state.engine.apply.row_checks import CheckedRows
from state.engine.hashing import string_hash
from state.engine.shard_state import ShardState


@dataclass(frozen=True)
class Routing:
    """The rows still to answer after routing (sorted row indexes), and their groups."""

    commit: np.ndarray  # int64, valid commit partitions of routed groups
    other: np.ndarray  # int64, rows of other APIs' requests of routed groups
    group_of_row: np.ndarray  # int64, per batch row
    group_names: list[str]  # local group index -> group id
    group_codes: np.ndarray  # int64, local group index -> state code, -1 if absent


def route(
    batch: Batch,
    checked: CheckedRows,
    answers: Answers,
    state: ShardState,
    config: CoordinatorConfig,
) -> Routing:
    """Answer the ``checked`` rows whose group id is invalid or another shard's; return the rest."""
    n = batch.n
    all_rows = np.arange(n)
    commit, other, first = checked.commit, checked.other, checked.first
    group_col = batch.col("group_id")
    group_bytes = np.asarray(pc.fill_null(pc.binary_length(group_col), 0))
    # As ``rules.is_valid_group_id``: OffsetCommit and DeleteGroups take the empty group id,
    # TxnOffsetCommit does not.
    empty_allowed = (batch.api == OFFSET_COMMIT) | (batch.api == DELETE_GROUPS)
    valid_group = (
        ((group_bytes > 0) | empty_allowed)
        & (group_bytes <= MAX_RECORD_STRING_BYTES)
        & group_col.is_valid().to_numpy(zero_copy_only=False)
    )
    candidates = (commit | other) & valid_group
    cand_idx = all_rows[candidates]
    names = group_col.take(pa.array(cand_idx))
    encoded = names.dictionary_encode(null_encoding="encode")
    unique, local = encoded.dictionary, encoded.indices.to_numpy().astype(np.int64)
    unique_names = unique.to_pylist()
    unique_large = unique.cast(pa.large_string())
    unique_codes = state.groups.names.lookup(unique_large, string_hash(unique_large))
    # Groups in the shard's dictionary were routed here when they were added.
    routed_unique = unique_codes >= 0
    for i in np.flatnonzero(~routed_unique).tolist():
        routed_unique[i] = config.state_shard_for(unique_names[i]) == state.shard_id
    routed = np.zeros(n, dtype=bool)
    routed[cand_idx] = routed_unique[local] if cand_idx.size else False
    # An invalid group id is never routed: it gets INVALID_GROUP_ID, not NOT_COORDINATOR.
    code = np.where(~valid_group, ErrorCode.INVALID_GROUP_ID, ErrorCode.NOT_COORDINATOR)
    failed = (commit | other) & ~routed
    answers.add(all_rows[failed & commit], code[failed & commit], False)
    answers.add(all_rows[failed & other & first], code[failed & other & first], True)
    commit = commit & routed
    other = other & routed

    group_of_row = np.full(n, -1, dtype=np.int64)
    group_of_row[cand_idx] = local
    # Keep only routed groups, renumbered; find their codes in the state.
    keep = np.flatnonzero(routed_unique)
    renumber = np.full(len(unique_names), -1, dtype=np.int64)
    renumber[keep] = np.arange(keep.size)
    has_group = np.flatnonzero(group_of_row >= 0)
    group_of_row[has_group] = renumber[group_of_row[has_group]]
    kept_names = [unique_names[i] for i in keep.tolist()]
    return Routing(all_rows[commit], all_rows[other], group_of_row, kept_names, unique_codes[keep])


def split_groups(routing: Routing, state: ShardState) -> tuple[np.ndarray, np.ndarray]:
    """Local group indexes of the fast path (commits only, no members) and of the exact path."""
    k = len(routing.group_names)
    slow = np.zeros(k, dtype=bool)
    slow[routing.group_of_row[routing.other]] = True
    known = routing.group_codes >= 0
    members = np.zeros(k, dtype=np.int64)
    members[known] = state.groups.members[routing.group_codes[known]]
    slow |= members > 0
    return np.flatnonzero(~slow), np.flatnonzero(slow)
