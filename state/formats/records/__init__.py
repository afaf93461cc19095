"""Byte-exact codecs for the records of Kafka's ``__consumer_offsets`` topic.

Layouts from apache/kafka ``group-coordinator/src/main/resources/common/message/*.json``: a key is
an int16 *key version* (Kafka 4.x: the record type) and the key struct; a value is an int16 version
and the value struct; a null value is a tombstone. Modules: ``wire`` (primitive types, the checked
``Reader``), ``keys``, ``offset_commit_value``, ``group_metadata_value``, ``consumer_group``
(KIP-848 epochs and members) and ``record_types`` (every type a 4.1 broker writes).

Writers pick Kafka 4.0's versions (offset records a column at a time in
``state.formats.record_columns``); decoders accept every version. ``decode(encode(v)) == v`` or
``encode`` raises ``ValueError`` naming the field. Decoding is strict: truncation, trailing bytes,
a negative length other than -1, invalid UTF-8 or an unknown value version raise
``RecordFormatError`` (Kafka never writes them, so here they mean corruption).
"""

from state.coordinator.model import OffsetCommitKey, Record, UnknownKey
from state.formats.records.group_metadata_value import (
    decode_group_metadata_value,
    encode_group_metadata_value,
)
from state.formats.records.keys import (
    OFFSET_COMMIT_KEY_VERSION,
    decode_key,
    encode_group_metadata_key,
)
from state.formats.records.offset_commit_value import decode_offset_commit_value
from state.formats.records.record_types import RECORD_TYPES, classify_key, record_type_name
from state.formats.records.wire import RecordFormatError

__all__ = [
    "OFFSET_COMMIT_KEY_VERSION",
    "RECORD_TYPES",
    "RecordFormatError",
    "classify_key",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_record",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "record_type_name",
]


def decode_record(key: bytes, value: bytes | None) -> Record:
    """Decode one offsets-topic record; a null ``value`` is a tombstone. An ``UnknownKey``
    record's value is not interpreted (None): callers skip it, as Kafka's classic offset manager
    does. Raises ``RecordFormatError``."""
    k = decode_key(key)
    if value is None or isinstance(k, UnknownKey):
        return Record(k, None)
    if isinstance(k, OffsetCommitKey):
        return Record(k, decode_offset_commit_value(value))
    return Record(k, decode_group_metadata_value(value))
