"""One coordinator shard: the single entry point of the state machine (Kafka's
``GroupCoordinatorShard``, offsets side).

The streaming job keys its state by shard (``CoordinatorConfig.state_shard_for(group)``: the
offsets-topic partition, or that modulo ``state_shards`` when a shard holds several partitions;
``record_partitions`` then gives each record's partition) and keeps each shard between
micro-batches as an opaque blob. For each shard with input or a due
timer it calls::

    state = decode_state(blob)                            # or, for a shard seen the first time:
    state = empty_shard(shard_id)                         #   nothing to load
    state, read = replay_log(shard_id, key_value_pairs)   #   load from the offsets topic
    state, read = replay_log_chunks(shard_id, chunks)     #   ... given as binary columns
    frame = decode_request_messages(raw_messages)         # messages it could not parse itself
    result = apply_batch(state, frame, now_ms, config)    # or, when the timer fired:
    result = cleanup_group_metadata(state, now_ms, config)
    blob = encode_state(result.state, stamp)               # stamp: names the blob (0: none)
    answers, dead_letters = encode_responses(result.responses, shard_id)

A shard may also be kept as a base blob and a log of the records applied since
(``encode_log_chunk`` of each call's records, ``replay_log_chunks_on`` the decoded base,
``rewrite_base`` to decide when to fold the log into a new base).

``result.records`` go to the offsets topic (and the sinks) in order; ``result.next_expiry_ms`` is
when to call again without input; ``snapshot_records(state)`` is a loaded shard as records, to
refill a sink. Frames are Arrow tables of the ``state.formats.frames`` schemas, re-exported here.

``apply_batch``, ``cleanup_group_metadata`` and ``expire`` never touch their input state; the new
state is the old one with the returned records replayed, so loading a shard from the offsets topic
(``replay_log``/``replay_records``) rebuilds it exactly. The reads (``fetch_offsets``,
``group_metadata``, ``snapshot``) serve tests and tools.
"""

from __future__ import annotations

from state.coordinator.acls import AclBinding, Authorizer
from state.coordinator.config import CoordinatorConfig
from state.engine.apply import ApplyResult, apply_batch, cleanup_group_metadata
from state.engine.consumer_groups import ConsumerGroupRecords, consumer_group_records
from state.engine.loading import (
    LoadedShard,
    positioned_record_frame_of,
    record_frame_of,
    record_partitions,
    replay_log,
    replay_log_chunks,
    snapshot_records,
)
from state.engine.misrouted import refuse_misrouted
from state.engine.request_frame import decode_request_messages, frame_from_requests
from state.engine.shard_log import (
    LOG_FLOOR_BYTES,
    encode_log_chunk,
    replay_log_chunk,
    replay_log_chunks_on,
    rewrite_base,
)
from state.engine.shard_reads import GroupSnapshot, fetch_offsets, group_metadata, snapshot
from state.engine.shard_state import (
    ExpireResult,
    ShardState,
    empty_shard,
    expire,
    next_expiry_ms,
    replay,
    replay_records,
    state_nbytes,
)
from state.engine.state_codec import (
    StateFormatError,
    blob_stamp,
    decode_state,
    encode_state,
    encode_state_kept,
)
from state.formats.frames import (
    EXTENDED_REQUEST_FRAME_SCHEMA,
    MEMBER_FRAME_SCHEMA,
    RECORD_FRAME_SCHEMA,
    REQUEST_FRAME_SCHEMA,
    RESPONSE_FRAME_SCHEMA,
)
from state.formats.records import RECORD_TYPES, RecordFormatError, classify_key
from state.formats.response_codec import encode_responses

__all__ = [
    "EXTENDED_REQUEST_FRAME_SCHEMA",
    "LOG_FLOOR_BYTES",
    "MEMBER_FRAME_SCHEMA",
    "RECORD_FRAME_SCHEMA",
    "RECORD_TYPES",
    "REQUEST_FRAME_SCHEMA",
    "RESPONSE_FRAME_SCHEMA",
    "AclBinding",
    "ApplyResult",
    "Authorizer",
    "ConsumerGroupRecords",
    "CoordinatorConfig",
    "ExpireResult",
    "GroupSnapshot",
    "LoadedShard",
    "RecordFormatError",
    "ShardState",
    "StateFormatError",
    "apply_batch",
    "blob_stamp",
    "classify_key",
    "cleanup_group_metadata",
    "consumer_group_records",
    "decode_request_messages",
    "decode_state",
    "empty_shard",
    "encode_log_chunk",
    "encode_responses",
    "encode_state",
    "encode_state_kept",
    "expire",
    "fetch_offsets",
    "frame_from_requests",
    "group_metadata",
    "next_expiry_ms",
    "positioned_record_frame_of",
    "record_frame_of",
    "record_partitions",
    "refuse_misrouted",
    "replay",
    "replay_log",
    "replay_log_chunk",
    "replay_log_chunks",
    "replay_log_chunks_on",
    "replay_records",
    "rewrite_base",
    "snapshot",
    "snapshot_records",
    "state_nbytes",
]
