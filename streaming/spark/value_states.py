"""The shard calls on ``transformWithStateInPandas``: one state key per state partition, its
logical shards inside it, so that a task makes one Python call a micro-batch and pays the state
server's round trips once, not once per shard. Three state variables per state partition:

- ``heads`` (one value, rewritten once a call): per shard, the state's stamp, its base's stamp,
  the log's chunk count and bytes, the base's bytes; and the ``log`` list's entries and bytes;
- ``bases`` (a map, shard → the shard state blob): a shard's is rewritten when its log would
  outgrow it (``state.shard.rewrite_base``);
- ``log`` (a list, appended once a call): one chunk per shard call since its base, each with its
  shard, its base's stamp and the stamp of the state it leads to. A rewritten base leaves its
  shard's chunks behind until they weigh as much as the live ones, at least ``COMPACT_BYTES``:
  the list is then rewritten with the live ones, so it stays under twice the live chunks (each
  shard's under its base's bytes, or ``LOG_FLOOR_BYTES``) plus ``COMPACT_BYTES``.

A call uses the state this worker kept under the head's stamp (``streaming.spark.shard_cache``),
else replays the log after the latest state it kept, else the base and the whole log. A stamp (64
random bits) names one state; only committed chunks carry one. No timers (time mode ``None``):
the batch's timestamp comes from the state server (:func:`batch_timestamp_ms`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (
    ListState,
    MapState,
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

HEADS_SCHEMA = T.StructType(
    [
        # ``HEAD_DTYPE`` rows, one per shard that has state.
        T.StructField("heads", T.BinaryType(), False),
        T.StructField("log_entries", T.LongType(), False),
        T.StructField("log_bytes", T.LongType(), False),
    ]
)
BASES_KEY_SCHEMA = T.StructType([T.StructField("shard", T.IntegerType(), False)])
BASES_SCHEMA = T.StructType([T.StructField("blob", T.BinaryType(), False)])
LOG_SCHEMA = T.StructType(
    [
        T.StructField("shard", T.IntegerType(), False),
        T.StructField("base_stamp", T.LongType(), False),
        # The stamp of the state this chunk leads to (its shard's head's when it was appended).
        T.StructField("stamp", T.LongType(), False),
        T.StructField("chunk", T.BinaryType(), False),
    ]
)
HEAD_DTYPE = np.dtype(
    [
        ("shard", "<i8"),
        ("stamp", "<u8"),
        ("base_stamp", "<u8"),
        ("log_chunks", "<i8"),
        ("log_bytes", "<i8"),
        ("base_bytes", "<i8"),
    ]
)
#: Stale chunks (of rewritten bases) the log keeps before it is rewritten, whatever the live ones.
COMPACT_BYTES = 256 * 1024


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
    """A shard's entry in ``heads``: which state it holds, and how it is stored."""

    stamp: int
    base_stamp: int
    log_chunks: int
    log_bytes: int
    base_bytes: int


def encode_heads(heads: dict[int, Head]) -> bytes:
    rows = np.zeros(len(heads), HEAD_DTYPE)
    for i, (shard, head) in enumerate(sorted(heads.items())):
        rows[i] = (
            shard,
            head.stamp,
            head.base_stamp,
            head.log_chunks,
            head.log_bytes,
            head.base_bytes,
        )
    return rows.tobytes()


def decode_heads(blob: bytes) -> dict[int, Head]:
    if len(blob) % HEAD_DTYPE.itemsize:
        raise StateFormatError(f"corrupt state heads: {len(blob)} bytes")
    return {
        int(shard): Head(*(int(value) for value in rest))
        for shard, *rest in np.frombuffer(blob, HEAD_DTYPE).tolist()
    }


class LogEntry(NamedTuple):
    shard: int
    base_stamp: int
    stamp: int
    chunk: bytes

    def row(self) -> tuple[int, int, int, bytes]:
        return (self.shard, _signed(self.base_stamp), _signed(self.stamp), self.chunk)


class PartitionStore:
    """One call's view of a state partition's ``heads``, ``bases`` and ``log``: each shard's
    state read and written through :meth:`shard`, stored at :meth:`flush`."""

    def __init__(
        self, heads: ValueState, bases: MapState, log: ListState, batch_time_ms: int
    ) -> None:
        self._heads_state, self._bases, self._log_state = heads, bases, log
        self._batch_time_ms = batch_time_ms
        self._heads: dict[int, Head] | None = None  # read at the first use
        self._log_entries = self._log_bytes = 0
        self._log: list[LogEntry] | None = None  # read at the first miss
        self._appended: list[LogEntry] = []
        self._changed = False

    @property
    def heads(self) -> dict[int, Head]:
        """Each shard's head (read from the state server once a call)."""
        if self._heads is None:
            row = self._heads_state.get()
            self._heads = decode_heads(bytes(row[0])) if row is not None else {}
            self._log_entries, self._log_bytes = (int(row[1]), int(row[2])) if row else (0, 0)
        return self._heads

    def shard(self, shard: int) -> ShardView:
        return ShardView(self, shard)

    def log(self) -> list[LogEntry]:
        """The stored log (read from the state server once a call)."""
        if self._log is None:
            self.heads  # noqa: B018 (the heads count the log's entries)
            self._log = (
                [
                    LogEntry(int(s), _unsigned(int(b)), _unsigned(int(t)), bytes(c))
                    for s, b, t, c in self._log_state.get()
                ]
                if self._log_entries
                else []
            )
            if len(self._log) != self._log_entries:
                raise StateFormatError(
                    f"corrupt state: the heads count {self._log_entries} log chunks, the store "
                    f"holds {len(self._log)}"
                )
        return self._log

    def read(self, shards: DecodedShards, shard: int) -> ShardState | None:
        head = self.heads.get(shard)
        if head is None:
            return None
        kept = shards.kept(head.stamp)
        if kept is not None:
            return kept
        log = [
            (e.chunk, e.stamp)
            for e in (self.log() if head.log_chunks else [])
            if e.shard == shard and e.base_stamp == head.base_stamp
        ]
        if len(log) != head.log_chunks or (log and log[-1][1] != head.stamp):
            raise StateFormatError(
                f"corrupt shard state: shard {shard}'s head counts {head.log_chunks} log chunks "
                f"up to state {head.stamp:#x}, the store holds {len(log)}"
            )
        # Replay only the chunks after the latest state of this log this worker kept.
        start, state = 0, None
        for at in range(len(log) - 1, -1, -1):
            state = shards.kept(log[at][1])
            if state is not None:
                start = at + 1
                break
        if state is None:
            state = self._read_base(shards, shard, head)
        state = replay_log_chunks_on(state, [chunk for chunk, _ in log[start:]])
        shards.keep(head.stamp, state, shard)
        return state

    def _read_base(self, shards: DecodedShards, shard: int, head: Head) -> ShardState:
        kept = shards.kept(head.base_stamp)
        if kept is not None:
            return kept
        base = self._bases.getValue((shard,))
        if base is None:
            raise StateFormatError(f"corrupt shard state: shard {shard} has a head, no base")
        blob = bytes(base[0])
        if blob_stamp(blob) != head.base_stamp:
            raise StateFormatError(
                f"corrupt shard state: shard {shard}'s head names base {head.base_stamp:#x}, "
                f"the store holds {blob_stamp(blob):#x}"
            )
        return shards.decode(blob)

    def write(
        self, shards: DecodedShards, shard: int, state: ShardState, records: pa.Table
    ) -> None:
        head = self.heads.get(shard)
        chunk = encode_log_chunk(records) if head is not None and records.num_rows else None
        if (
            head is None
            or chunk is None
            or rewrite_base(head.base_bytes, head.log_bytes + len(chunk))
        ):
            blob = shards.encode(state, shard)
            stamp = blob_stamp(blob)
            self._bases.updateValue((shard,), (blob,))
            # The shard's chunks in the log are stale from now: compaction drops them.
            self.heads[shard] = Head(stamp, stamp, 0, 0, len(blob))
        else:
            stamp = new_stamp()
            self._appended.append(LogEntry(shard, head.base_stamp, stamp, chunk))
            shards.keep(stamp, state, shard)
            self.heads[shard] = Head(
                stamp,
                head.base_stamp,
                head.log_chunks + 1,
                head.log_bytes + len(chunk),
                head.base_bytes,
            )
        self._changed = True

    def flush(self) -> None:
        """Store what the call's shards wrote: the log's new chunks (the live ones alone when
        the stale ones outweigh them), then the heads."""
        if not self._changed:
            return
        appended_bytes = sum(len(e.chunk) for e in self._appended)
        live_bytes = sum(head.log_bytes for head in self.heads.values())
        stale_bytes = self._log_bytes + appended_bytes - live_bytes
        if stale_bytes > max(live_bytes, COMPACT_BYTES):
            live = [e for e in [*self.log(), *self._appended] if self._is_live(e)]
            if live:
                self._log_state.put([e.row() for e in live])
            else:
                self._log_state.clear()
            self._log_entries, self._log_bytes = len(live), live_bytes
        elif self._appended:
            self._log_state.appendList([e.row() for e in self._appended])
            self._log_entries += len(self._appended)
            self._log_bytes += appended_bytes
        self._appended = []
        self._heads_state.update((encode_heads(self.heads), self._log_entries, self._log_bytes))
        self._changed = False

    def _is_live(self, entry: LogEntry) -> bool:
        head = self.heads.get(entry.shard)
        return head is not None and head.log_chunks > 0 and entry.base_stamp == head.base_stamp


class ShardView:
    """A shard of a ``PartitionStore``, as the shard call sees it (``StoredShard``)."""

    def __init__(self, store: PartitionStore, shard: int) -> None:
        self._store, self._shard = store, shard

    def batch_time_ms(self) -> int:
        return self._store._batch_time_ms

    def read(self, shards: DecodedShards) -> ShardState | None:
        return self._store.read(shards, self._shard)

    def write(
        self, shards: DecodedShards, shard: int, state: ShardState, records: pa.Table
    ) -> None:
        self._store.write(shards, shard, state, records)


def by_shard(messages: pd.DataFrame) -> list[tuple[int, pd.DataFrame]]:
    """A state partition's messages split by ``shard``, in shard order."""
    shards = messages["shard"].to_numpy()
    if not len(shards) or (shards == shards[0]).all():
        return [(int(shards[0]), messages)] if len(shards) else []
    return [
        (int(shard), part.reset_index(drop=True))
        for shard, part in messages.groupby("shard", sort=True)
    ]


class PartitionProcessor(StatefulProcessor):
    """The shard calls of a state partition as a ``transformWithStateInPandas`` processor."""

    def __init__(self, settings: ProcessorSettings) -> None:
        self.settings = settings
        self._call: ShardCall | None = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._heads = handle.getValueState("heads", HEADS_SCHEMA)
        self._bases = handle.getMapState("bases", BASES_KEY_SCHEMA, BASES_SCHEMA)
        self._log = handle.getListState("log", LOG_SCHEMA)
        self._call = make_shard_call(self.settings)
        # A handle serves one task, and a task one micro-batch: its timestamp is asked once.
        self._handle = handle
        self._batch_time_ms: int | None = None

    def batch_time_ms(self) -> int:
        """The micro-batch's timestamp, asked of the state server once per task."""
        if self._batch_time_ms is None:
            self._batch_time_ms = batch_timestamp_ms(self._handle)
        return self._batch_time_ms

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        assert self._call is not None, "init runs first"
        store = PartitionStore(self._heads, self._bases, self._log, self.batch_time_ms())
        yield from call_partition(self._call, store, rows)


def call_partition(
    call: ShardCall, store: PartitionStore, frames: Iterator[pd.DataFrame]
) -> Iterator[pd.DataFrame]:
    """A state partition's micro-batch: each shard with messages called in turn, the store
    flushed, then one frame of their output rows."""
    parts = list(frames)
    # Spark hands a small batch's rows in one frame: no concat (a copy) for it.
    messages = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    outputs = [
        frame
        for shard, part in by_shard(messages)
        for frame in call(shard, iter([part]), store.shard(shard))
    ]
    store.flush()
    if outputs:
        yield outputs[0] if len(outputs) == 1 else pd.concat(outputs, ignore_index=True)
