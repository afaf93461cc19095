"""The offset state machine of one coordinator shard (Kafka's ``GroupCoordinatorShard`` offsets).

The streaming job keys its state by shard (offsets-topic partition, ``partition_for(group)``) and,
for each shard with data or a due timeout, calls::

    state = decode_state(blob) if blob else empty_shard(shard_id)
    result = apply_batch(state, frame, now_ms, config)   # or expire(state, now_ms, config)
    blob = encode_state(result.state)

``apply_batch`` and ``expire`` never touch their input state; the new state is the old one with the
returned records replayed, so loading a shard from the offsets topic (``replay_records``) rebuilds
it exactly.
"""

from __future__ import annotations

from state.engine.apply import ApplyResult, apply_batch
from state.engine.shard_state import (
    ExpireResult,
    GroupSnapshot,
    ShardState,
    empty_shard,
    expire,
    fetch_offsets,
    group_metadata,
    next_expiry_ms,
    replay,
    replay_records,
    snapshot,
)
from state.formats.state_codec import StateFormatError, decode_state, encode_state

__all__ = [
    "ApplyResult",
    "ExpireResult",
    "GroupSnapshot",
    "ShardState",
    "StateFormatError",
    "apply_batch",
    "decode_state",
    "empty_shard",
    "encode_state",
    "expire",
    "fetch_offsets",
    "group_metadata",
    "next_expiry_ms",
    "replay",
    "replay_records",
    "snapshot",
]
