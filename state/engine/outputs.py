"""What applying requests to a shard produces: records for the offsets topic and responses.

Both are columnar (Arrow) so the streaming job can hand them to Spark and the sinks without a
Python object per row. Every record stays keyed by group/topic/partition whatever the state is
keyed by.
"""

from __future__ import annotations

import pyarrow as pa

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
