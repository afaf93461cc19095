"""Consumer-protocol (KIP-848) groups as a reader of ``__consumer_offsets`` sees them: the epoch
becomes a group row of the record frame (``generation`` the epoch, ``members`` null: counted from
their own records), so the sink lists them as classic groups; a tombstone deletes the row."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from state.engine.record_frame import group_row
from state.formats.frames import MEMBER_FRAME_SCHEMA, RECORD_FRAME_SCHEMA
from state.formats.record_column_decoding import big_endian_ints, binary_parts
from state.formats.records import RecordFormatError, classify_key
from state.formats.records.consumer_group import (
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    decode_consumer_group_epoch,
    decode_consumer_group_member_key,
)


class ConsumerGroupRecords(NamedTuple):
    """What the consumer-group records of a slice of ``__consumer_offsets`` say."""

    #: Group rows (``RECORD_FRAME_SCHEMA``), one per ConsumerGroupMetadata record, in order.
    groups: pa.Table
    #: Each group row's position among the input records.
    positions: np.ndarray
    #: Member changes (``MEMBER_FRAME_SCHEMA``) in log order.
    members: pa.Table
    #: Records of the two types read.
    readable: int


def _type_ids(keys: pa.Array) -> np.ndarray:
    """The int16 record type of each key (-1 for null or under two bytes)."""
    data, starts, lengths, valid = binary_parts(keys)
    whole = valid & (lengths >= 2)
    return np.where(whole, big_endian_ints(data, starts, 2, whole), -1)


def consumer_group_records(
    keys: pa.Array,
    values: pa.Array,
    on_unreadable: Callable[[RecordFormatError], None] | None = None,
) -> ConsumerGroupRecords:
    """The consumer-group epochs and members among offsets-topic records (binary columns); other
    types are left out, unreadable records go to ``on_unreadable``."""
    types = _type_ids(keys)
    group_rows: list[dict[str, object]] = []
    positions: list[int] = []
    members: list[dict[str, object]] = []
    for i in np.flatnonzero(
        (types == CONSUMER_GROUP_METADATA) | (types == CONSUMER_GROUP_MEMBER_METADATA)
    ).tolist():
        key = keys[i].as_py()
        value = values[i].as_py()
        try:
            if types[i] == CONSUMER_GROUP_METADATA:
                group_id = classify_key(key).group_id
                if group_id is None:
                    raise RecordFormatError("ConsumerGroupMetadataKey: group_id: unreadable")
                epoch = None if value is None else decode_consumer_group_epoch(value)
                group_rows.append(group_row(group_id, epoch, None, key, value))
                positions.append(i)
            else:
                group_id, member_id = decode_consumer_group_member_key(key)
                members.append(
                    {"group_id": group_id, "member_id": member_id, "alive": value is not None}
                )
        except RecordFormatError as error:
            if on_unreadable is not None:
                on_unreadable(error)
    return ConsumerGroupRecords(
        pa.Table.from_pylist(group_rows, schema=RECORD_FRAME_SCHEMA),
        np.array(positions, dtype=np.int64),
        pa.Table.from_pylist(members, schema=MEMBER_FRAME_SCHEMA),
        len(group_rows) + len(members),
    )
