"""The value-state operator: the shard call on ``transformWithStateInPandas``, each shard stored
as a base, a log and a head (``state.engine.shard_log``) so that a micro-batch writes what it
changed to the checkpoint, not every touched shard's whole blob.

Three state variables per shard key (all in Spark's RocksDB state store, committed together
with the batch):

- ``head`` (one row, rewritten at every call that changed the shard): the state's stamp, the
  stamp of the base it starts from, and the log's chunk count and bytes, and the base's bytes;
- ``base`` (one row, the shard state blob): rewritten when the log outgrows it;
- ``log`` (a list, one chunk per call since the base): appended to.

A call reads the head; when this Python worker kept the state the head names
(``streaming.spark.shard_cache``), that is the state, and neither base nor log crosses from the JVM.
Otherwise it reads the log, whose chunks each carry the stamp of the state they lead to, and
replays the chunks after the latest of those states this worker kept (Spark hands a shard's
calls to either of its Python workers, so the other one usually appended a few chunks since);
without one, it reads the base (checked against the head's base stamp) and replays the whole
log. A stamp that names a kept state is in the log only if its chunk was committed: an
attempt of a batch that failed leaves stamps no committed chunk carries. A call
that changed the shard appends its records to the log, or, when the log would outgrow the
base, writes the state as a new base and clears the log. Stamps are the shard cache's: 64
random bits naming exactly one state, stored as signed 64-bit integers.

No timers: expiry follows the job's ticks (``state.shard.EXPIRY_TICK``), so
``handleExpiredTimer`` is never called and the query runs in time mode ``None`` (processing-time
mode made Spark build the timers' key encoder at every copy of the operator while planning each
micro-batch, for timers the job never sets). A call decides against the micro-batch's timestamp,
which Spark keeps in its offset log, so a replayed batch decides as it did; in time mode ``None``
PySpark's ``TimerValues`` do not carry it, so the processor asks the task's state server once per
task (:func:`batch_timestamp_ms`).
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

#: Spark's name for this operator in a checkpoint's state metadata.
OPERATOR_NAME = "transformWithStateInPandasExec"

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
    """The micro-batch's timestamp (ms), from the task's state server. PySpark does not ask the
    server for it in time mode ``None`` and gives it through no public method, so this calls the
    handle's client as ``TimerValues`` would in processing-time mode (the pinned PySpark; the
    Spark tests fail loudly if it changes)."""
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
        stamp, base_stamp, log_chunks, log_bytes, base_bytes = row
        return cls(
            _unsigned(int(stamp)),
            _unsigned(int(base_stamp)),
            int(log_chunks),
            int(log_bytes),
            int(base_bytes),
        )

    def row(self) -> tuple[int, int, int, int, int]:
        return (
            _signed(self.stamp),
            _signed(self.base_stamp),
            self.log_chunks,
            self.log_bytes,
            self.base_bytes,
        )


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
        # The latest state of this log this worker kept (another worker appended the chunks
        # after it), else the base: only the chunks after it are replayed.
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
    """The shard call (``streaming.spark.processor``) as a ``transformWithStateInPandas``
    processor."""

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

    def close(self) -> None:
        pass


__all__ = [
    "BASE_SCHEMA",
    "HEAD_SCHEMA",
    "LOG_SCHEMA",
    "OPERATOR_NAME",
    "Head",
    "ShardProcessor",
    "batch_timestamp_ms",
]
