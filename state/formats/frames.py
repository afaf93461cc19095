"""The Arrow frames between the state and its callers: requests in, records and responses out.

They are the whole contract, so that no Python object per row crosses it.
"""

from __future__ import annotations

import pyarrow as pa

#: One row per partition of each request, in log order (``ingest_offset``, ``partition_index``).
#: Request-level fields repeat on each row. Requests without partitions (DeleteGroups,
#: GroupMetadata, or a commit listing none) have one row with null topic/partition.
#: ``error_code`` != 0 marks a row the decoder already rejected, ``error_reason`` says why.
REQUEST_FRAME_SCHEMA = pa.schema(
    [
        pa.field("ingest_offset", pa.int64(), nullable=False),
        pa.field("partition_index", pa.int32(), nullable=False),
        # The broker's append time (LogAppendTime): the commit time and the deadline's start.
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

#: Optional GroupMetadata fields (absent: "consumer", null, null).
GROUP_METADATA_FIELDS = [
    pa.field("protocol_type", pa.string()),
    pa.field("protocol", pa.string()),
    pa.field("leader", pa.string()),
]
#: The optional request ``timeoutMs`` (null or absent: ``request_timeout_ms``).
REQUEST_TIMEOUT_FIELD = pa.field("timeout_ms", pa.int32())
#: A TxnOffsetCommit's ``transactionalId`` (null on other APIs; a TxnOffsetCommit without one is
#: refused: it names no transaction).
TRANSACTIONAL_ID_FIELD = pa.field("transactional_id", pa.string())
#: ``REQUEST_FRAME_SCHEMA`` plus ``GROUP_METADATA_FIELDS``, ``REQUEST_TIMEOUT_FIELD`` and
#: ``TRANSACTIONAL_ID_FIELD``.
EXTENDED_REQUEST_FRAME_SCHEMA = pa.schema(
    list(REQUEST_FRAME_SCHEMA)
    + GROUP_METADATA_FIELDS
    + [REQUEST_TIMEOUT_FIELD, TRANSACTIONAL_ID_FIELD]
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

#: One row per ``ConsumerGroupMemberMetadata`` record (KIP-848) in log order; ``alive`` false
#: for its tombstone.
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
