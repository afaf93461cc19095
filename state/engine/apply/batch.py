"""A request frame in log order (``ingest_offset``, ``partition_index``), numeric columns as
numpy: "earlier" is "smaller row index", and a request is a run of rows with one ``ingest_offset``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.requests import Api
from state.engine.columns import arrow_column, numpy_column, python_list
from state.formats.frames import (
    GROUP_METADATA_FIELDS,
    REQUEST_FRAME_SCHEMA,
    REQUEST_TIMEOUT_FIELD,
    TRANSACTIONAL_ID_FIELD,
)

#: The APIs a frame may carry, by their index in ``Batch.api``.
APIS = [
    Api.OFFSET_COMMIT.value,
    Api.OFFSET_DELETE.value,
    Api.DELETE_GROUPS.value,
    Api.GROUP_METADATA.value,
    Api.TXN_OFFSET_COMMIT.value,
]
OFFSET_COMMIT, OFFSET_DELETE, DELETE_GROUPS, GROUP_METADATA, TXN_OFFSET_COMMIT = range(len(APIS))
_API_SET = pa.array(APIS)
#: ``Batch.api`` of a row whose API is not one of ``APIS``.
UNKNOWN_API = -1
#: The columns a frame may lack (each then all null): ``as_table`` adds them.
OPTIONAL_FIELDS = [*GROUP_METADATA_FIELDS, REQUEST_TIMEOUT_FIELD, TRANSACTIONAL_ID_FIELD]
#: ``Batch.timeout`` of a request without its own timeout (the coordinator's default applies).
DEFAULT_TIMEOUT = -1


@dataclass(frozen=True)
class Batch:
    """The frame in log order; nullable numeric columns come filled, with a null mask."""

    table: pa.Table
    n: int
    ingest_offset: np.ndarray  # int64
    timestamp: np.ndarray  # int64, the message's timestamp (the broker's append time)
    # int64, timeout_ms, DEFAULT_TIMEOUT where null; None when no row has one
    timeout: np.ndarray | None
    generation: np.ndarray  # int64
    retention: np.ndarray  # int64, retention_time_ms (-1: the configured one; always a txn's)
    leader_epoch: np.ndarray  # int64
    error_code: np.ndarray  # int64, != 0 where the decoder rejected the row
    partition: np.ndarray  # int64, -1 where null
    partition_null: np.ndarray  # bool
    offset: np.ndarray  # int64, 0 where null
    offset_null: np.ndarray  # bool
    topic_null: np.ndarray  # bool
    api: np.ndarray  # int64, index in APIS, UNKNOWN_API for any other
    # bool, rows of commits: OffsetCommit and TxnOffsetCommit, which share their rules but for
    # the group checks (``rules.validate_commit_group``), the empty group id and retention
    commit: np.ndarray

    @staticmethod
    def of(frame: pa.Table | pd.DataFrame) -> Batch:
        """The batch of a request frame in any row order; ``ValueError`` if a column is missing."""
        table = as_table(frame)
        n = table.num_rows
        if n:
            order = np.lexsort(
                (
                    numpy_column(table, "partition_index", np.int64),
                    numpy_column(table, "ingest_offset", np.int64),
                )
            )
            if (order != np.arange(n)).any():
                table = table.take(pa.array(order))
        table = table.combine_chunks()
        api = np.asarray(
            pc.fill_null(pc.index_in(table["api"], value_set=_API_SET), UNKNOWN_API)
        ).astype(np.int64)
        transactional = api == TXN_OFFSET_COMMIT
        retention = numpy_column(table, "retention_time_ms", np.int64)
        if transactional.any():  # Kafka's TxnOffsetCommit has no retention
            retention = np.where(transactional, -1, retention)
        return Batch(
            table=table,
            n=n,
            ingest_offset=numpy_column(table, "ingest_offset", np.int64),
            timestamp=numpy_column(table, "timestamp_ms", np.int64),
            timeout=(
                None
                if table["timeout_ms"].null_count == n
                else numpy_column(table, "timeout_ms", np.int64, DEFAULT_TIMEOUT)
            ),
            generation=numpy_column(table, "generation_id", np.int64),
            retention=retention,
            leader_epoch=numpy_column(table, "leader_epoch", np.int64),
            error_code=numpy_column(table, "error_code", np.int64),
            partition=numpy_column(table, "partition", np.int64, -1),
            partition_null=np.asarray(table["partition"].is_null()),
            offset=numpy_column(table, "offset", np.int64, 0),
            offset_null=np.asarray(table["offset"].is_null()),
            topic_null=np.asarray(table["topic"].is_null()),
            api=api,
            commit=(api == OFFSET_COMMIT) | transactional,
        )

    def col(self, name: str) -> pa.Array:
        return arrow_column(self.table, name)

    def strings(self, name: str, rows: np.ndarray) -> list[str | None]:
        """String column ``name`` at ``rows``, as Python strings."""
        return python_list(self.col(name).take(pa.array(rows, pa.int64())))


def as_table(frame: pa.Table | pd.DataFrame) -> pa.Table:
    """``frame`` as an Arrow table, the ``OPTIONAL_FIELDS`` it lacks added as nulls."""
    if isinstance(frame, pd.DataFrame):
        extra = [f for f in OPTIONAL_FIELDS if f.name in frame.columns]
        schema = pa.schema(list(REQUEST_FRAME_SCHEMA) + extra)
        frame = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
    present = set(frame.column_names)
    missing = [f.name for f in REQUEST_FRAME_SCHEMA if f.name not in present]
    if missing:
        raise ValueError(f"request frame lacks columns {missing}")
    for optional in OPTIONAL_FIELDS:
        if optional.name not in present:
            frame = frame.append_column(optional.name, pa.nulls(frame.num_rows, optional.type))
    return frame
