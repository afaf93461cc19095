"""The exact path's ``GroupView``s, loaded for a whole batch in a few vectorized lookups; each
then follows the batch's own writes, so a request sees the records of those before it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
    TopicPartition,
)
from state.engine.apply.batch import DELETE_GROUPS, GROUP_METADATA, Batch
from state.engine.apply.routing import Routing
from state.engine.columns import python_list
from state.engine.hashing import key_hash, string_hash
from state.engine.offset_table import Located
from state.engine.shard_reads import offset_items
from state.engine.shard_state import ShardState


@dataclass
class GroupView:
    """A group as the batch's earlier requests left it (``count``: its offsets); when not
    ``complete``, ``known`` holds only the offsets its requests read (None: no offset), and
    reading another is a ``KeyError``."""

    metadata: GroupMetadataValue | None
    count: int
    known: dict[TopicPartition, OffsetAndMetadata | None]
    complete: bool

    def exists(self) -> bool:
        return self.metadata is not None or self.count > 0

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        if tp in self.known:
            return self.known[tp]
        if self.complete:
            return None
        raise KeyError(f"offset of {tp} was not loaded")

    def topic_partitions(self) -> list[TopicPartition]:
        if not self.complete:
            raise KeyError("the group's offsets were not loaded")
        return sorted(tp for tp, v in self.known.items() if v is not None)

    def apply(self, record: Record) -> None:
        """Follow a record a handler returned."""
        key, value = record
        if isinstance(key, GroupMetadataKey):
            assert value is None or isinstance(value, GroupMetadataValue)
            self.metadata = value
        elif isinstance(key, OffsetCommitKey):
            tp = TopicPartition(key.topic, key.partition)
            self.count += int(value is not None) - int(self.offset(tp) is not None)
            self.known[tp] = value  # type: ignore[assignment]


def load_views(
    batch: Batch, routing: Routing, idx: np.ndarray, slow_groups: np.ndarray, state: ShardState
) -> dict[str, GroupView]:
    """Views of ``slow_groups`` (local indexes) by group id, holding the keys the requests at
    rows ``idx`` name, and every offset of groups with a DeleteGroups request."""
    groups = state.groups
    known_by_group: dict[int, dict[TopicPartition, OffsetAndMetadata | None]] = {
        int(g): {} for g in slow_groups
    }
    # Named keys of existing groups, found in one vectorized lookup.
    keyed = idx[
        (batch.api[idx] != DELETE_GROUPS)
        & (batch.api[idx] != GROUP_METADATA)
        & ~batch.topic_null[idx]
        & (batch.partition[idx] >= 0)
    ]
    local = routing.group_of_row[keyed]
    gcode = routing.group_codes[local]
    topic_names = batch.col("topic").take(pa.array(keyed)).cast(pa.large_string())
    tcode = state.topics.lookup(topic_names, string_hash(topic_names))
    parts = batch.partition[keyed]
    for g, t, p in zip(local.tolist(), python_list(topic_names), parts.tolist(), strict=True):
        known_by_group[g][TopicPartition(t, p)] = None
    present = (gcode >= 0) & (tcode >= 0)
    if present.any():
        q = np.flatnonzero(present)
        pg, pt, pp = gcode[q], tcode[q], parts[q].astype(np.int32)
        khash = key_hash(groups.names.hashes[pg], state.topics.hashes[pt], pp)
        loc = state.offsets.locate(khash, pg.astype(np.int32), pt.astype(np.int32), pp)
        live = np.flatnonzero(loc.live)
        if live.size:
            found = state.offsets.gather(Located(loc.delta[live], loc.base[live], loc.live[live]))
            for i, (tp, v) in zip(q[live].tolist(), offset_items(state, found), strict=True):
                known_by_group[int(local[i])][tp] = v

    # Whole groups for DeleteGroups.
    complete = set(routing.group_of_row[idx[batch.api[idx] == DELETE_GROUPS]].tolist())
    whole = [g for g in complete if routing.group_codes[g] >= 0]
    if whole:
        wc = routing.group_codes[whole]
        all_rows = state.offsets.group_rows(wc, groups.names.hashes[wc])
        by_code = {int(c): g for g, c in zip(whole, wc.tolist(), strict=True)}
        for code in np.unique(all_rows.gcode).tolist():
            part = all_rows.take(np.flatnonzero(all_rows.gcode == code))
            known_by_group[by_code[code]].update(offset_items(state, part))

    views: dict[str, GroupView] = {}
    codes = routing.group_codes[slow_groups]
    for g, code in zip(slow_groups.tolist(), codes.tolist(), strict=True):
        metadata = groups.group_metadata(code) if code >= 0 else None
        count = int(groups.offset_count[code]) if code >= 0 else 0
        views[routing.group_names[g]] = GroupView(metadata, count, known_by_group[g], g in complete)
    return views
