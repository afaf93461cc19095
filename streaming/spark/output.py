"""What the state function hands the writer: one ``(shard, payload)`` row per shard call, the
payload an Arrow IPC stream of :data:`OUTPUT_TABLE_SCHEMA` rows that only the driver reads (no
pandas round trip per column).

A row's ``out`` says which columns it fills: "record" (RECORD_FRAME columns, ``shard`` its
offsets-topic partition, ``seq`` the apply order); "loaded" (a rebuilt shard's state, for the
sink); "response" (``key``, ``value``, ``ingest_offset``; ``tenant``: the requester's tenant
index, null for the job's own topic); "dead_letter" (``value``, ``ingest_offset``); "stats"
(the call's counters); "group_commits" (``group_id``, ``commits_applied``). The ingest progress
is not among them: the writer takes it from Spark's planned batch ends.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from state.shard import ShardOutput

#: The Spark schema of the state function's output.
OUTPUT_SCHEMA = T.StructType(
    [
        T.StructField("shard", T.IntegerType(), False),
        T.StructField("payload", T.BinaryType(), False),
    ]
)

OUTPUT_TABLE_SCHEMA = pa.schema(
    [
        pa.field("out", pa.string(), nullable=False),
        # The call's shard; a record's is its offsets-topic partition, where the writer sends it.
        pa.field("shard", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("group_id", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("leader_epoch", pa.int32()),
        pa.field("metadata", pa.string()),
        pa.field("commit_timestamp_ms", pa.int64()),
        pa.field("expire_timestamp_ms", pa.int64()),
        pa.field("generation", pa.int32()),
        pa.field("members", pa.int32()),
        pa.field("is_tombstone", pa.bool_()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("ingest_offset", pa.int64()),
        pa.field("input_rows", pa.int64()),
        pa.field("commits_applied", pa.int64()),
        pa.field("rejected", pa.int64()),
        pa.field("tombstones", pa.int64()),
        pa.field("state_keys", pa.int64()),
        pa.field("loaded_records", pa.int64()),
        pa.field("next_expiry_ms", pa.int64()),
        pa.field("tenant", pa.int32()),
    ]
)
_OUTPUT_NAMES = frozenset(OUTPUT_TABLE_SCHEMA.names)


#: LZ4-compressed IPC from ``_COMPRESS_FROM`` bytes: a rebuilt shard's payload is tens of MB
#: plain, and a task's payloads travel in one Arrow batch (they outgrew the JVM's direct memory).
#: A small call's payload stays plain: compressing its 27 buffers cost ~1 ms a call. No threads:
#: handing each buffer to Arrow's pool cost more than compressing it (0.73 ms against 0.31 for a
#: 1,400-record call), and a task's cores are Spark's.
_LZ4 = pa.ipc.IpcWriteOptions(compression="lz4", use_threads=False)
_PLAIN = pa.ipc.IpcWriteOptions(use_threads=False)
_COMPRESS_FROM = 256 * 1024


def output_table(shard: int, out: ShardOutput) -> pa.Table:
    """One call's output as :data:`OUTPUT_TABLE_SCHEMA` rows, the stats row last. Every row's
    ``shard`` is ``shard`` but a record's, which is its offsets-topic partition."""
    parts = [
        (kind, table)
        for kind, table in (
            ("loaded", out.loaded),
            ("record", out.records),
            ("response", out.answers),
            ("dead_letter", out.dead_letters),
            ("group_commits", out.group_commits),
        )
        if table.num_rows
    ]
    tables, shards, offset = [], [], 0
    for kind, part in parts:
        shards.append(
            out.record_partitions.cast(pa.int32())
            if kind == "record" and out.record_partitions is not None
            else pa.array(np.full(part.num_rows, shard, dtype=np.int32))
        )
        table = part
        if kind in ("loaded", "record"):
            table = table.append_column("is_tombstone", pc.is_null(table["value"]))
        if kind == "loaded":
            # The sink needs only the decoded columns: the bytes would double a rebuild's.
            table = table.drop_columns(["key", "value"])
        table = table.append_column("out", pa.array([kind] * table.num_rows, pa.string()))
        table = table.append_column(
            "seq", pa.array(range(offset, offset + table.num_rows), pa.int64())
        )
        offset += table.num_rows
        tables.append(table)
    tables.append(_stats_row(out.stats, offset))
    combined = pa.concat_tables(tables, promote_options="permissive")
    shards.append(pa.array([shard], pa.int32()))
    combined = combined.append_column("shard", pa.chunked_array(shards, pa.int32()))
    present = set(combined.column_names)
    columns = []
    for field in OUTPUT_TABLE_SCHEMA:
        if field.name not in present:
            columns.append(pa.nulls(combined.num_rows, field.type))
            continue
        column = combined[field.name]
        columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=OUTPUT_TABLE_SCHEMA)


def _stats_row(stats: Mapping[str, int | None], seq: int) -> pa.Table:
    """The stats row: the call's counters in their :data:`OUTPUT_TABLE_SCHEMA` types (typed
    here: inferring each column's type cost more than the rest of the row)."""
    counters = [k for k in stats if k in _OUTPUT_NAMES]
    values = [pa.array(["stats"], pa.string()), pa.array([seq], pa.int64())]
    values += [pa.array([stats[k]], OUTPUT_TABLE_SCHEMA.field(k).type) for k in counters]
    return pa.Table.from_arrays(values, names=["out", "seq", *counters])


def encode_output(table: pa.Table) -> bytes:
    """One call's output table (:data:`OUTPUT_TABLE_SCHEMA`) as an Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    options = _LZ4 if table.nbytes >= _COMPRESS_FROM else _PLAIN
    with pa.ipc.new_stream(sink, OUTPUT_TABLE_SCHEMA, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def decode_each_output(payloads: pa.ChunkedArray | pa.Array) -> Iterator[pa.Table]:
    """Each call's output table of a micro-batch's ``payload`` column, read without a copy."""
    chunks = payloads.chunks if isinstance(payloads, pa.ChunkedArray) else [payloads]
    for chunk in chunks:
        for i in range(len(chunk)):
            yield pa.ipc.open_stream(chunk[i].as_buffer()).read_all()
