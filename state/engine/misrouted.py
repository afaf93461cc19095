"""Requests that reached a shard by a path their group does not own: answered, never applied.

On an ingest topic of fewer partitions than shards, the job keys a message to a shard by its key
(the group id) and reads each shard's requests from one partition, the shard's (its index modulo
the partition count). A message on another partition came through a producer that did not put
it where its key says (a custom partitioner, say): applying it would mix two partitions' orders
in one shard, so it is refused as Kafka refuses a request sent to the wrong coordinator.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.errors import ErrorCode


def refuse_misrouted(frame: pa.Table, reason: str) -> pa.Table:
    """``frame`` (a request frame) with every row not already rejected by the decoder answered
    NOT_COORDINATOR (16) for ``reason``: ``apply_batch`` answers such rows and applies none."""
    if not frame.num_rows:
        return frame
    accepted = pc.equal(frame["error_code"], 0)
    code_type = frame.schema.field("error_code").type
    reason_type = frame.schema.field("error_reason").type
    codes = pc.if_else(
        accepted, pa.scalar(int(ErrorCode.NOT_COORDINATOR), code_type), frame["error_code"]
    )
    reasons = pc.if_else(accepted, pa.scalar(reason, reason_type), frame["error_reason"])
    frame = frame.set_column(frame.schema.get_field_index("error_code"), "error_code", codes)
    return frame.set_column(frame.schema.get_field_index("error_reason"), "error_reason", reasons)


def split_misrouted(messages: pd.DataFrame, own: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``messages`` from the shard's own ingest partition ``own`` (``ingest_partition``), and
    those from another (for ``refuse_misrouted``); own None: the layout is not known, all count."""
    if own is None or "ingest_partition" not in messages.columns or not len(messages):
        return messages, messages.iloc[0:0]
    mine = messages["ingest_partition"] == own
    if bool(mine.all()):
        return messages, messages.iloc[0:0]
    return messages[mine].reset_index(drop=True), messages[~mine].reset_index(drop=True)
