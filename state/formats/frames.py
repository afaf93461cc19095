"""The Arrow frames between the state and the Spark adapter: requests in, records and responses out.

A frame is a table with one of these schemas; they are the whole contract between ``state`` and
its callers (the streaming job, the sinks, the tests), so that no Python object per row crosses it:

- ``REQUEST_FRAME_SCHEMA``: the requests of a micro-batch, flattened one row per partition;
  ``EXTENDED_REQUEST_FRAME_SCHEMA`` adds a GroupMetadata request's protocol fields and the
  request's timeout;
- ``RECORD_FRAME_SCHEMA``: the records to append to the offsets topic, keyed by
  group/topic/partition whatever the state is keyed by;
- ``RESPONSE_FRAME_SCHEMA``: one answer per partition of each request, or a dead letter.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "EXTENDED_REQUEST_FRAME_SCHEMA",
    "GROUP_METADATA_FIELDS",
    "MEMBER_FRAME_SCHEMA",
    "RECORD_FRAME_SCHEMA",
    "REQUEST_FRAME_SCHEMA",
    "REQUEST_TIMEOUT_FIELD",
    "RESPONSE_FRAME_SCHEMA",
]

#: One row per partition of each request, in log order (``ingest_offset``, ``partition_index``).
#: Request-level fields repeat on each row. Requests without partitions (DeleteGroups,
#: GroupMetadata, or a commit listing none) have one row with null topic/partition.
#: ``error_code`` != 0 marks a row the decoder already rejected, ``error_reason`` says why.
REQUEST_FRAME_SCHEMA = pa.schema(
    [
        pa.field("ingest_offset", pa.int64(), nullable=False),
        pa.field("partition_index", pa.int32(), nullable=False),
        # The ingest message's timestamp: the broker's append time (the job creates the ingest
        # topic with LogAppendTime). The commit timestamp, and where a request's deadline starts.
        pa.field("timestamp_ms", pa.int64(), nullable=False),
        pa.field("api", pa.string()),
        pa.field("request_id", pa.string()),
        pa.field("group_id", pa.string()),
        pa.field("generation_id", pa.int32(), nullable=False),
        pa.field("member_id", pa.string(), nullable=False),
        pa.field("group_instance_id", pa.string()),
        pa.field("retention_time_ms", pa.int64(), nullable=False),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("leader_epoch", pa.int32(), nullable=False),
        pa.field("metadata", pa.string()),
        # GroupMetadata only: the request's "members" array as JSON text.
        pa.field("members_json", pa.string()),
        pa.field("error_code", pa.int16(), nullable=False),
        pa.field("error_reason", pa.string()),
    ]
)

#: GroupMetadata fields that ``REQUEST_FRAME_SCHEMA`` lacks: a GroupMetadata request's protocol
#: type, protocol and leader. Optional in a request frame: without them the shard stores
#: "consumer", null and null.
GROUP_METADATA_FIELDS = [
    pa.field("protocol_type", pa.string()),
    pa.field("protocol", pa.string()),
    pa.field("leader", pa.string()),
]
#: The request's ``timeoutMs`` (null: the coordinator's ``request_timeout_ms``): it is refused
#: with REQUEST_TIMED_OUT when reached at or after ``timestamp_ms + timeout_ms``. Optional in a
#: request frame: without it every request gets the default.
REQUEST_TIMEOUT_FIELD = pa.field("timeout_ms", pa.int32())
#: ``REQUEST_FRAME_SCHEMA`` plus ``GROUP_METADATA_FIELDS`` and ``REQUEST_TIMEOUT_FIELD``.
EXTENDED_REQUEST_FRAME_SCHEMA = pa.schema(
    list(REQUEST_FRAME_SCHEMA) + GROUP_METADATA_FIELDS + [REQUEST_TIMEOUT_FIELD]
)

#: Records to append to the offsets topic, in the order they must be applied.
#: ``kind`` is "offset" (OffsetCommitKey) or "group" (GroupMetadataKey; topic null, partition -1).
#: ``key``/``value`` are the exact ``__consumer_offsets`` bytes; ``value`` null is a tombstone, and
#: then the decoded value columns are null too. ``expire_timestamp_ms`` is null unless explicit.
RECORD_FRAME_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64()),
        pa.field("leader_epoch", pa.int32()),
        pa.field("metadata", pa.string()),
        pa.field("commit_timestamp_ms", pa.int64()),
        pa.field("expire_timestamp_ms", pa.int64()),
        # GroupMetadata records only: generation and member count, for the sink's groups table.
        pa.field("generation", pa.int32()),
        pa.field("members", pa.int32()),
        pa.field("key", pa.binary(), nullable=False),
        pa.field("value", pa.binary()),
    ]
)

#: Members of consumer-protocol (KIP-848) groups as a reader of ``__consumer_offsets`` learns
#: them, in log order: one row per ``ConsumerGroupMemberMetadata`` record, ``alive`` false for
#: its tombstone (the member left the group).
MEMBER_FRAME_SCHEMA = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("member_id", pa.string(), nullable=False),
        pa.field("alive", pa.bool_(), nullable=False),
    ]
)

#: One row per partition of each answered request (one row with null topic for request-level
#: answers). ``request_id`` null means the input could not be answered: dead-letter it with
#: ``error_reason`` and the ingest position.
RESPONSE_FRAME_SCHEMA = pa.schema(
    [
        pa.field("ingest_offset", pa.int64(), nullable=False),
        pa.field("request_id", pa.string()),
        pa.field("group_id", pa.string()),
        pa.field("api", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("error_code", pa.int16(), nullable=False),
        pa.field("error_reason", pa.string()),
    ]
)
