"""Expiry deadlines over columns: Kafka's retention rules (``state.coordinator.rules``) vectorized.

An offset row's deadline is when ``expire`` removes it in its group's current state; an Empty
group's deadline is when its metadata goes once it has no offsets. The shard stores the row
deadlines (``OffsetTable``) and recomputes them whenever a row or its group changes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.rules import subscribed_topics
from state.engine.columns import saturating_add
from state.engine.groups import GroupTable, StringDict
from state.engine.offset_rows import Rows
from state.engine.offset_table import NEVER, NO_EXPIRE


def compute_deadlines(
    groups: GroupTable, topics: StringDict, rows: Rows, retention_ms: int
) -> np.ndarray:
    """The expiry deadline (int64, ``NEVER`` when it cannot expire) of each of ``rows`` in its
    group's current state: ``rules.offset_deadline`` over columns."""
    if len(rows) == 0:
        return np.zeros(0, np.int64)
    g = rows.gcode
    has_md = groups.has_metadata[g]
    members = groups.members[g]
    base = rows.commit_ts
    empty_md = has_md & (members == 0)
    if empty_md.any():
        base = np.where(empty_md, np.maximum(base, groups.state_ts[g]), base)
    deadline = saturating_add(base, retention_ms)
    explicit = rows.expire_ts != NO_EXPIRE
    deadline = np.where(explicit, rows.expire_ts, deadline)
    member_rows = np.flatnonzero(has_md & (members > 0))
    if member_rows.size:
        never = np.ones(member_rows.size, dtype=bool)
        member_codes = g[member_rows]
        for code in np.unique(member_codes).tolist():
            topics_of_group = subscribed_topics(groups.group_metadata(code))
            if topics_of_group is None:
                continue
            sel = np.flatnonzero(member_codes == code)
            names = topics.names.take(pa.array(rows.tcode[member_rows[sel]], pa.int64()))
            subscribed = pc.is_in(
                names, value_set=pa.array(sorted(topics_of_group), pa.large_string())
            )
            never[sel] = np.asarray(subscribed)
        deadline[member_rows[never]] = NEVER
    return deadline.astype(np.int64)


def empty_group_deadlines(groups: GroupTable) -> tuple[np.ndarray, np.ndarray]:
    """Codes of Empty groups with metadata and no offsets, and when each is deleted
    (``rules.empty_group_deadline``)."""
    codes = np.flatnonzero(groups.has_metadata & (groups.members == 0) & (groups.offset_count == 0))
    return codes, groups.state_ts[codes]
