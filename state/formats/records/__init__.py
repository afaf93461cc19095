"""Byte-exact codecs for the records of Kafka's ``__consumer_offsets`` topic.

The layouts follow apache/kafka ``group-coordinator/src/main/resources/common/message/*.json``.
A record key is an int16 *key version* (Kafka 4.x calls it the record type) followed by the key
struct; a record value is an int16 *value version* followed by the value struct; a null value is
a tombstone. One module per part, each with its layout table:

- ``wire``: Kafka's primitive types (integers, strings, varints, tagged fields), the field checks
  and the checked ``Reader``;
- ``keys``: ``OffsetCommitKey`` (key versions 0, 1) and ``GroupMetadataKey`` (2);
- ``offset_commit_value``: ``OffsetCommitValue`` v0-v4 (``OffsetAndMetadata``);
- ``group_metadata_value``: ``GroupMetadataValue`` v0-v4 and the subscription inside it;
- ``dispatch``: whole records decoded, by key type;
- ``record_types``: every record type a 4.1 broker writes, classified by type id and group.

Writers pick the versions Kafka 4.0 writes: GroupMetadataKey 2 and GroupMetadataValue 3 here;
offset records (OffsetCommitKey 1, OffsetCommitValue 1 with an explicit expire timestamp, else 3)
a column at a time in ``state.formats.record_columns``. Decoders accept every version. Encoding
contract: ``decode(encode(v)) == v`` or ``encode`` raises ``ValueError`` naming the field that
the chosen version cannot hold.

Decoding is strict: truncated input, trailing bytes, a negative length other than the null
marker (-1), invalid UTF-8 or an unknown value version raise ``RecordFormatError``. (Kafka's
generated readers read any negative string length as null and decode invalid UTF-8 with
replacement characters; Kafka never writes either, so here both mean corruption.)

The public names of the modules are importable from this package.
"""

from state.formats.records.dispatch import decode_record
from state.formats.records.group_metadata_value import (
    GROUP_METADATA_VALUE_VERSION,
    decode_group_metadata_value,
    encode_group_metadata_value,
)
from state.formats.records.keys import (
    GROUP_METADATA_KEY_VERSION,
    OFFSET_COMMIT_KEY_VERSION,
    decode_key,
    encode_group_metadata_key,
)
from state.formats.records.offset_commit_value import decode_offset_commit_value
from state.formats.records.record_types import (
    RECORD_TYPES,
    RecordType,
    classify_key,
    record_type_name,
)
from state.formats.records.wire import RecordFormatError

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "RECORD_TYPES",
    "RecordFormatError",
    "RecordType",
    "classify_key",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_record",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "record_type_name",
]
