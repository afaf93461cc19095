"""What a batch produces, gathered in any order and put back in log order at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.rules import error_reason
from state.engine.apply.batch import Batch
from state.formats.frames import RECORD_FRAME_SCHEMA, RESPONSE_FRAME_SCHEMA

_NULL_STRING = pa.scalar(None, pa.string())
_NULL_INT32 = pa.scalar(None, pa.int32())


@dataclass
class Answers:
    """Responses as (batch row, request-level?, code, reason): every row answered at most once; a
    request-level answer, on its request's first row, has null topic and partition."""

    rows: list[np.ndarray] = field(default_factory=list)
    request_level: list[np.ndarray] = field(default_factory=list)
    codes: list[np.ndarray] = field(default_factory=list)
    reasons: list[list[str | None]] = field(default_factory=list)

    def add(
        self,
        rows: np.ndarray,
        codes: np.ndarray | int,
        request_level: bool,
        reasons: list[str | None] | None = None,
    ) -> None:
        """Answer ``rows`` with ``codes`` (one per row, or one for all) and ``reasons`` (default:
        the code's ``error_reason``)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        codes_arr = np.broadcast_to(np.asarray(codes, dtype=np.int64), rows.shape).copy()
        self.rows.append(rows)
        self.request_level.append(np.full(rows.size, request_level))
        self.codes.append(codes_arr)
        if reasons is None and np.ndim(codes) == 0:
            reasons = [error_reason(int(codes))] * rows.size
        elif reasons is None:
            by_code = {int(c): error_reason(int(c)) for c in np.unique(codes_arr)}
            reasons = [by_code[c] for c in codes_arr.tolist()]
        self.reasons.append(reasons)

    def table(self, batch: Batch) -> pa.Table:
        """The responses (``RESPONSE_FRAME_SCHEMA``) in log order."""
        if not self.rows:
            return RESPONSE_FRAME_SCHEMA.empty_table()
        rows = np.concatenate(self.rows)
        level = np.concatenate(self.request_level)
        codes = np.concatenate(self.codes)
        reasons = [r for part in self.reasons for r in part]
        order = np.argsort(rows, kind="stable")
        rows, level, codes = rows[order], level[order], codes[order]
        reasons_arr = pa.array(reasons, pa.string()).take(pa.array(order))
        take = pa.array(rows)
        topic = batch.col("topic").take(take)
        partition = batch.col("partition").take(take)
        if level.any():  # request-level answers have no topic and partition
            mask = pa.array(level)
            topic = pc.if_else(mask, _NULL_STRING, topic)
            partition = pc.if_else(mask, _NULL_INT32, partition)
        return pa.Table.from_arrays(
            [
                batch.col("ingest_offset").take(take),
                batch.col("request_id").take(take),
                batch.col("group_id").take(take),
                batch.col("api").take(take),
                topic,
                partition,
                pa.array(codes, pa.int16()),
                reasons_arr,
            ],
            schema=RESPONSE_FRAME_SCHEMA,
        )


@dataclass
class Writes:
    """Records, each at its log position: its batch row (plus a fraction for a request's later
    ones)."""

    tables: list[pa.Table] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)

    def add(self, table: pa.Table, positions: np.ndarray) -> None:
        if table.num_rows:
            self.tables.append(table)
            self.positions.append(np.asarray(positions, dtype=np.float64))

    def table(self) -> pa.Table:
        """Every record added, in log position order (stable)."""
        if not self.tables:
            return RECORD_FRAME_SCHEMA.empty_table()
        table = pa.concat_tables(self.tables)
        order = np.argsort(np.concatenate(self.positions), kind="stable")
        return table.take(pa.array(order))
