"""The shard call on ``transformWithStateInPandas``, each shard stored so that a micro-batch
writes what it changed, not the whole blob. Three state variables per shard key:

- ``head`` (one row, rewritten at each change): the state's stamp, its base's stamp, the log's
  chunk count and bytes, the base's bytes;
- ``base`` (the shard state blob): rewritten when the log would outgrow it;
- ``log`` (one chunk per call since the base, each with the stamp of the state it leads to).

A call uses the state this worker kept under the head's stamp (``streaming.spark.shard_cache``),
else replays the log after the latest state it kept, else the base and the whole log. A stamp (64
random bits, stored signed) names one state; only committed chunks carry one. No timers (time
mode ``None``): the batch's timestamp comes from the state server (:func:`batch_timestamp_ms`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (
    ListState,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
    ValueState,
)

from state.shard import (
    ShardState,
    StateFormatError,
    blob_stamp,
    encode_log_chunk,
    replay_log_chunks_on,
    rewrite_base,
)
from streaming.spark.processor import ProcessorSettings, ShardCall, make_shard_call
from streaming.spark.shard_cache import DecodedShards, new_stamp

HEAD_SCHEMA = T.StructType(
    [
        T.StructField("stamp", T.LongType(), False),
        T.StructField("base_stamp", T.LongType(), False),
        T.StructField("log_chunks", T.IntegerType(), False),
        T.StructField("log_bytes", T.LongType(), False),
        T.StructField("base_bytes", T.LongType(), False),
    ]
)
BASE_SCHEMA = T.StructType([T.StructField("blob", T.BinaryType(), False)])
LOG_SCHEMA = T.StructType(
    [
        T.StructField("chunk", T.BinaryType(), False),
        # The stamp of the state this chunk leads to (the head's stamp when it was appended).
        T.StructField("stamp", T.LongType(), False),
    ]
)


def batch_timestamp_ms(handle: StatefulProcessorHandle) -> int:
    """The micro-batch's timestamp (ms) from the task's state server, through the handle's
    private client: PySpark gives it no public way in time mode ``None``."""
    client = getattr(handle, "_statefulProcessorApiClient", None)
    fetch = getattr(client, "_get_batch_timestamp", None)
    if fetch is None:
        raise RuntimeError(
            "this PySpark's stateful processor handle does not give the micro-batch's timestamp "
            "(_statefulProcessorApiClient._get_batch_timestamp): the value-state operator needs it"
        )
    timestamp = int(fetch())
    if timestamp < 0:
        raise RuntimeError(f"the state server gave no micro-batch timestamp ({timestamp})")
    return timestamp


_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


def _signed(stamp: int) -> int:
    return stamp - _U64 if stamp > _I64_MAX else stamp


def _unsigned(stored: int) -> int:
    return stored + _U64 if stored < 0 else stored


@dataclass(frozen=True)
class Head:
    """The ``head`` row: which state the shard holds, and how it is stored."""

    stamp: int
    base_stamp: int
    log_chunks: int
    log_bytes: int
    base_bytes: int

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> Head:
        stamp, base_stamp, *sizes = (int(value) for value in row)
        return cls(_unsigned(stamp), _unsigned(base_stamp), *sizes)

    def row(self) -> tuple[int, ...]:
        sizes = (self.log_chunks, self.log_bytes, self.base_bytes)
        return (_signed(self.stamp), _signed(self.base_stamp), *sizes)


class ValueStateStore:
    """One call's view of a shard's ``head``, ``base`` and ``log`` (``StoredShard``)."""

    def __init__(
        self, head: ValueState, base: ValueState, log: ListState, batch_time_ms: int
    ) -> None:
        self._head_state, self._base, self._log = head, base, log
        self._batch_time_ms = batch_time_ms
        self._head: Head | None = None

    def batch_time_ms(self) -> int:
        return self._batch_time_ms

    def read(self, shards: DecodedShards) -> ShardState | None:
        row = self._head_state.get()
        if row is None:
            return None
        head = self._head = Head.of(row)
        kept = shards.kept(head.stamp)
        if kept is not None:
            return kept
        log = (
            [(bytes(chunk), _unsigned(int(stamp))) for chunk, stamp in self._log.get()]
            if head.log_chunks
            else []
        )
        if len(log) != head.log_chunks or (log and log[-1][1] != head.stamp):
            raise StateFormatError(
                f"corrupt shard state: the head counts {head.log_chunks} log chunks up to state "
                f"{head.stamp:#x}, the store holds {len(log)}"
            )
        # Replay only the chunks after the latest state of this log this worker kept.
        start, state = 0, None
        for at in range(len(log) - 1, -1, -1):
            state = shards.kept(log[at][1])
            if state is not None:
                start = at + 1
                break
        if state is None:
            state = self._read_base(shards, head)
        state = replay_log_chunks_on(state, [chunk for chunk, _ in log[start:]])
        shards.keep(head.stamp, state, state.shard_id)
        return state

    def _read_base(self, shards: DecodedShards, head: Head) -> ShardState:
        kept = shards.kept(head.base_stamp)
        if kept is not None:
            return kept
        base = self._base.get()
        if base is None:
            raise StateFormatError("corrupt shard state: a head without a base")
        blob = bytes(base[0])
        if blob_stamp(blob) != head.base_stamp:
            raise StateFormatError(
                f"corrupt shard state: the head names base {head.base_stamp:#x}, "
                f"the store holds {blob_stamp(blob):#x}"
            )
        return shards.decode(blob)

    def write(
        self, shards: DecodedShards, shard: int, state: ShardState, records: pa.Table
    ) -> None:
        head = self._head
        chunk = encode_log_chunk(records) if head is not None and records.num_rows else None
        if (
            head is None
            or chunk is None
            or rewrite_base(head.base_bytes, head.log_bytes + len(chunk))
        ):
            blob = shards.encode(state, shard)
            stamp = blob_stamp(blob)
            self._base.update((blob,))
            if head is not None and head.log_chunks:
                self._log.clear()
            self._head = Head(stamp, stamp, 0, 0, len(blob))
        else:
            stamp = new_stamp()
            self._log.appendValue((chunk, _signed(stamp)))
            shards.keep(stamp, state, shard)
            self._head = Head(
                stamp,
                head.base_stamp,
                head.log_chunks + 1,
                head.log_bytes + len(chunk),
                head.base_bytes,
            )
        self._head_state.update(self._head.row())


class ShardProcessor(StatefulProcessor):
    """The shard call as a ``transformWithStateInPandas`` processor."""

    def __init__(self, settings: ProcessorSettings) -> None:
        self.settings = settings
        self._call: ShardCall | None = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._head = handle.getValueState("head", HEAD_SCHEMA)
        self._base = handle.getValueState("base", BASE_SCHEMA)
        self._log = handle.getListState("log", LOG_SCHEMA)
        self._call = make_shard_call(self.settings)
        # A handle serves one task, and a task one micro-batch: its timestamp is asked once.
        self._handle = handle
        self._batch_time_ms: int | None = None

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        assert self._call is not None, "init runs first"
        if self._batch_time_ms is None:
            self._batch_time_ms = batch_timestamp_ms(self._handle)
        store = ValueStateStore(self._head, self._base, self._log, self._batch_time_ms)
        # The key is the shard, or the shard plus a multiple of the count (``shard_keys``).
        shard = int(key[0]) % self.settings.coordinator.shard_count
        yield from self._call(shard, rows, store)
