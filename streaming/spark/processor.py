"""The shard call: a thin adapter from Spark rows to ``state.shard`` calls, and its
``applyInPandasWithState`` function (``streaming.spark.value_states`` runs the same call on
``transformWithStateInPandas``; ``StoredShard`` is what differs: where the state lives).

Spark keys the state by shard (``CoordinatorConfig.state_shard_for``: the offsets-topic partition
``partition_for(group)``, or that modulo ``state_shards`` when a shard holds several partitions,
``streaming.spark.state_shards``): at most that many keys per micro-batch whatever the number of
groups,
which is what makes the Python state affordable (measured in deploy/README.md, "How it works").
A shard of several partitions rebuilds from each of them, and gives each record its group's
partition (``record_partitions``) for the writer.

Calling contract (PySpark's, restated): the function is invoked first once for every shard that
has input rows in the micro-batch (``state.hasTimedOut`` False, rows in ``frames``), then once for
every shard whose processing-time timeout expired and got no rows (``hasTimedOut`` True, no rows).
The state is one binary column, the versioned shard blob of ``state.shard.encode_state``.

Each call is messages -> ``state.shard`` calls -> one output row:

1. the shard: the blob's state, decoded (``decode_state``) or kept by this worker since it
   encoded it (``streaming.spark.shard_cache``); for a shard without one, ``replay_log_chunks`` of
   its
   offsets-topic partition (when the query starts over an existing topic; the rebuilt state then
   goes into the sink from here, or in the output for the driver to write) or ``empty_shard``;
2. ingest messages (``streaming.spark.ingest``) -> a request frame (``decode_request_messages``, the
   job's markers left out) -> ``apply_batch`` at the micro-batch's timestamp, which expires what
   is due first when an expiry tick is among the messages of the job's own topic (Kafka expires
   in its periodic check only) and refuses the requests whose deadline that timestamp passed;
3. ``encode_state`` of the new state, unless it is the state the call started from;
4. one ``streaming.spark.output`` row whose payload holds the loaded shard as records
   (``snapshot_records``), the records for the offsets topic and the sink, the responses and
   dead letters (``encode_responses``), and one ``stats`` row.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T
from pyspark.sql.streaming.state import GroupState

from connectors.sinks import open_sink
from connectors.sinks.retry import with_sink_retries
from state.shard import (
    RECORD_FRAME_SCHEMA,
    RESPONSE_FRAME_SCHEMA,
    Authorizer,
    CoordinatorConfig,
    LoadedShard,
    ShardState,
    apply_batch,
    cleanup_group_metadata,
    decode_request_messages,
    empty_shard,
    encode_responses,
    record_partitions,
    refuse_misrouted,
    replay_log_chunks,
    snapshot_records,
)
from streaming.spark.ingest import EXPIRY_TICK, MARKERS, OPERATOR
from streaming.spark.output import OUTPUT_TABLE_SCHEMA, encode_output
from streaming.spark.shard_cache import DEFAULT_MAX_BYTES, DecodedShards
from streaming.spark.worker_imports import install as install_worker_imports

log = logging.getLogger(__name__)

# Imported in every Python worker that runs the state function: make Spark's per-task import
# cache invalidation cheap there (see streaming.spark.worker_imports).
install_worker_imports()

#: When set (in the environment of the Python workers), every state-function call appends one
#: JSON line of section timings (seconds) to ``<dir>/sections-<pid>.jsonl``: a profiling switch
#: for the benchmark (``tests/bench/bench_e2e.py``), off by default.
PROFILE_DIR_ENV = "CONSUMER_OFFSETS_PROFILE_DIR"

STATE_SCHEMA = T.StructType([T.StructField("shard_state", T.BinaryType(), False)])


@dataclass(frozen=True)
class ProcessorSettings:
    """What the state function needs on the executors (pickled with it)."""

    coordinator: CoordinatorConfig
    offsets_topic: str
    #: The cluster and Kafka client options (the Java client's names) for loading a shard.
    bootstrap_servers: str
    kafka_options: Mapping[str, str]
    #: True when the offsets topic holds records: a shard called without state rebuilds it from
    #: its offsets-topic partition (a new checkpoint over an existing topic, or a restart over
    #: a checkpoint whose first batch never committed).
    load_from_offsets_topic: bool
    #: Where a rebuilt shard's state goes: this sink (an absolute URL), written by the worker
    #: that rebuilt it as soon as it has, so the sink fills while other shards still load; or,
    #: when None, the driver, after the whole batch (see ``JobConfig.rebuild_sink_writes``).
    loaded_sink_url: str | None = None
    #: How long a worker retries a sink write that fails (``JobConfig.sink_write_timeout_s``).
    sink_write_timeout_s: float = 60.0
    #: Each tenant's ingest topic and rules, by tenant index (``streaming.spark.ingest``'s
    #: ``tenant``
    #: column); empty without tenants.
    tenant_topics: tuple[str, ...] = ()
    tenant_authorizers: tuple[Authorizer, ...] = ()
    #: Partition counts of the ingest topics: the job's, then each tenant's (by tenant index).
    #: Empty: not known, and a shard takes every message keyed to it.
    ingest_partitions: tuple[int, ...] = ()
    #: Bytes of decoded shard states each Python worker keeps between calls
    #: (``streaming.spark.shard_cache``; ``JobConfig.state_cache_mb``); 0 decodes every blob.
    state_cache_bytes: int = DEFAULT_MAX_BYTES


#: This Python worker's decoded shard states (``streaming.spark.shard_cache``), made at its first
#: call.
_decoded: DecodedShards | None = None


def decoded_shards(max_bytes: int) -> DecodedShards:
    """The worker's cache of decoded shard states, bounded by ``max_bytes``."""
    global _decoded
    if _decoded is None or _decoded.max_bytes != max_bytes:
        _decoded = DecodedShards(max_bytes)
    return _decoded


def load_shard(settings: ProcessorSettings, shard: int) -> LoadedShard:
    """Rebuild a shard by replaying its offsets-topic partitions; returns (state, records read)."""
    from connectors.kafka.offsets_log import read_partition_chunks

    def skip(error: Exception) -> None:
        # A record this code cannot read must not take the shard down: Kafka's loader also
        # skips what it does not understand. Log it with its position-free description.
        log.warning("shard %d: skipping unreadable offsets record: %s", shard, error)

    # Partitions hold disjoint groups: replaying one after another is replaying each.
    chunks = itertools.chain.from_iterable(
        read_partition_chunks(
            settings.bootstrap_servers, settings.kafka_options, settings.offsets_topic, partition
        )
        for partition in settings.coordinator.partitions_of(shard)
    )
    return replay_log_chunks(shard, chunks, on_unreadable=skip)


def write_loaded(sink_url: str, timeout_s: float, shard: int, records: pa.Table) -> None:
    """Write a rebuilt shard's state (``snapshot_records``) into the sink at ``sink_url``,
    retrying while the sink fails for up to ``timeout_s``."""

    def write() -> None:
        with open_sink(sink_url) as sink:
            sink.write_loaded(records)

    with_sink_retries(write, timeout_s, f"shard {shard}'s rebuilt state", log)


def request_frame(messages: pd.DataFrame, markers: frozenset[bytes] = MARKERS) -> pa.Table:
    """A shard's ingest messages (``streaming.spark.ingest.ingest_messages`` rows) as a request
    frame,
    in log order, without the job's own ``markers`` (none on a tenant's topic: there a marker is
    a message like any other, refused as a malformed request)."""
    if len(messages) > 1 and not messages["ingest_offset"].is_monotonic_increasing:
        messages = messages.sort_values("ingest_offset", kind="stable")
    return decode_request_messages(
        (offset, timestamp_ms, value)
        for offset, timestamp_ms, value in zip(
            messages["ingest_offset"].tolist(),
            messages["timestamp_ms"].tolist(),
            messages["value"].tolist(),
            strict=True,
        )
        if value is None or bytes(value) not in markers
    )


def by_source(messages: pd.DataFrame) -> list[tuple[int, pd.DataFrame]]:
    """A shard's messages split by the topic they came from (``streaming.spark.ingest``'s ``tenant``
    column): the job's own topic first, then each tenant's in configuration order, so that a
    replayed batch applies them in the same order. Without the column, all are the job's."""
    if "tenant" not in messages.columns or not len(messages):
        return [(OPERATOR, messages)]
    return [
        (int(tenant), part.reset_index(drop=True))
        for tenant, part in messages.groupby("tenant", sort=True)
    ]


def expiry_ticked(sources: list[tuple[int, pd.DataFrame]]) -> bool:
    """Whether an expiry tick is among the messages of the job's own ingest topic (``by_source``
    parts). The job writes its ticks there, where only operators may write; a tick a tenant
    writes on its own topic must not start an expiry pass, and is refused like any malformed
    request (``request_frame``)."""
    return any(
        tenant == OPERATOR and bool((part["value"] == EXPIRY_TICK).any())
        for tenant, part in sources
        if len(part)
    )


def own_partition(settings: ProcessorSettings, tenant: int, shard: int) -> int | None:
    """The partition of ``tenant``'s ingest topic (the job's for ``OPERATOR``) that holds
    ``shard``'s requests: the shard modulo the topic's partition count (a divisor of the shard
    count; ``streaming.spark.ingest``). None when the layout is not known (every message counts)."""
    counts = settings.ingest_partitions
    index = 0 if tenant == OPERATOR else tenant + 1
    if index >= len(counts):
        return None
    return shard % counts[index]


def next_offsets(messages: pd.DataFrame) -> list[tuple[int | None, int]]:
    """(ingest partition, the offset after its last message) for each partition among
    ``messages``; partition None for rows without the column (every message is the shard's)."""
    if not len(messages):
        return []
    offsets = messages["ingest_offset"].to_numpy()
    if "ingest_partition" not in messages.columns:
        return [(None, int(offsets.max()) + 1)]
    partitions = messages["ingest_partition"].to_numpy()
    first = partitions[0]
    if (partitions == first).all():  # the usual case: every message from the shard's partition
        return [(int(first), int(offsets.max()) + 1)]
    return [(int(p), int(offsets[partitions == p].max()) + 1) for p in np.unique(partitions)]


def split_misrouted(messages: pd.DataFrame, own: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``messages`` from the shard's own ingest partition, and those from another (answered
    NOT_COORDINATOR: ``state.shard.refuse_misrouted``)."""
    if own is None or "ingest_partition" not in messages.columns or not len(messages):
        return messages, messages.iloc[0:0]
    mine = messages["ingest_partition"] == own
    if bool(mine.all()):
        return messages, messages.iloc[0:0]
    return (
        messages[mine].reset_index(drop=True),
        messages[~mine].reset_index(drop=True),
    )


def group_commits(responses: pa.Table) -> pa.Table:
    """Offset commits applied per group in a call's responses (``group_id``,
    ``commits_applied``): its OffsetCommit partitions answered NONE, one per partition as Kafka
    writes a record per partition (the sink's commits counter)."""
    if not responses.num_rows:
        return pa.table({})
    applied = pc.and_(
        pc.and_(pc.equal(responses["api"], "OffsetCommit"), pc.equal(responses["error_code"], 0)),
        pc.is_valid(responses["topic"]),
    )
    groups = responses["group_id"].filter(applied)
    if not len(groups):
        return pa.table({})
    counts = pc.value_counts(groups).flatten()
    return pa.table({"group_id": counts[0], "commits_applied": counts[1]})


#: A call's output of up to this many rows is built row by row (``_output_by_row``): a small
#: call's handful of rows costs ~0.3 ms that way against ~1.3 ms of fixed cost in the column
#: build's per-part appends, schema promotion and 27 casts. Both build equal tables (tested).
ROW_BY_ROW_UP_TO = 64


def _output_table(
    shard: int,
    loaded: pa.Table,
    records: pa.Table,
    answers: pa.Table,
    dead_letters: pa.Table,
    stats: Mapping[str, int | None],
    positions: pa.Table | None = None,
    commits: pa.Table | None = None,
    record_shards: pa.Array | None = None,
) -> pa.Table:
    """Stack loaded state, records, encoded responses and dead letters, tenants' positions,
    commits per group and the stats row into one ``OUTPUT_TABLE_SCHEMA`` table. Every row's
    ``shard`` is ``shard`` but a record's, which is its offsets-topic partition
    (``record_shards``; None: ``shard``)."""
    parts = [
        (out, table)
        for out, table in (
            ("loaded", loaded),
            ("record", records),
            ("response", answers),
            ("dead_letter", dead_letters),
            ("position", positions),
            ("group_commits", commits),
        )
        if table is not None and table.num_rows
    ]
    if sum(table.num_rows for _, table in parts) < ROW_BY_ROW_UP_TO:
        return _output_by_row(shard, parts, stats, record_shards)
    return _output_by_column(shard, parts, stats, record_shards)


def _output_by_row(
    shard: int,
    parts: list[tuple[str, pa.Table]],
    stats: Mapping[str, int | None],
    record_shards: pa.Array | None = None,
) -> pa.Table:
    """``_output_by_column`` through Python rows, for a few rows."""
    rows: list[dict[str, Any]] = []
    for out, table in parts:
        shards = (
            record_shards.to_pylist()
            if out == "record" and record_shards is not None
            else [shard] * table.num_rows
        )
        for row, row_shard in zip(table.to_pylist(), shards, strict=True):
            if out in ("loaded", "record"):
                row["is_tombstone"] = row["value"] is None
            if out == "loaded":
                del row["key"], row["value"]
            row.update(out=out, seq=len(rows), shard=row_shard)
            rows.append(row)
    rows.append({**stats, "out": "stats", "seq": len(rows), "shard": shard})
    batch = pa.RecordBatch.from_pylist(rows, schema=OUTPUT_TABLE_SCHEMA)
    return pa.Table.from_batches([batch], schema=OUTPUT_TABLE_SCHEMA)


def _output_by_column(
    shard: int,
    parts: list[tuple[str, pa.Table]],
    stats: Mapping[str, int | None],
    record_shards: pa.Array | None = None,
) -> pa.Table:
    """The output table built column by column (any number of rows)."""
    tables = []
    shards = []
    offset = 0
    for out, part in parts:
        shards.append(
            record_shards.cast(pa.int32())
            if out == "record" and record_shards is not None
            else pa.array(np.full(part.num_rows, shard, dtype=np.int32))
        )
        table = part
        if out in ("loaded", "record"):
            table = table.append_column("is_tombstone", pc.is_null(table["value"]))
        if out == "loaded":
            # Only the sink reads a loaded shard, and it needs the decoded columns: the
            # record bytes would double what a rebuild carries to the driver.
            table = table.drop_columns(["key", "value"])
        table = table.append_column("out", pa.array([out] * table.num_rows, pa.string()))
        table = table.append_column(
            "seq", pa.array(range(offset, offset + table.num_rows), pa.int64())
        )
        offset += table.num_rows
        tables.append(table)
    stats_row = {"out": ["stats"], "seq": [offset]}
    stats_row.update({k: [v] for k, v in stats.items()})
    tables.append(pa.table(stats_row))
    combined = pa.concat_tables(tables, promote_options="permissive")
    shards.append(pa.array([shard], pa.int32()))
    combined = combined.append_column("shard", pa.chunked_array(shards, pa.int32()))
    columns = []
    for field in OUTPUT_TABLE_SCHEMA:
        if field.name in combined.column_names:
            columns.append(combined[field.name].cast(field.type))
        else:
            columns.append(pa.nulls(combined.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=OUTPUT_TABLE_SCHEMA)


class StoredShard(Protocol):
    """Where a shard's state lives between calls, as one call of the state function sees it:
    Spark's ``GroupState`` holding the blob (``GroupStateStore``), or the value-state operator's
    base, log and head (``streaming.spark.value_states``)."""

    def batch_time_ms(self) -> int:
        """The micro-batch's timestamp (Spark's offset log keeps it; a replay sees the same)."""
        ...

    def timed_out(self) -> bool:
        """Whether this call is the shard's timer firing (no input rows)."""
        ...

    def read(self, shards: DecodedShards) -> ShardState | None:
        """The stored state (kept by this worker when ``shards`` has it), or None: none yet."""
        ...

    def write(
        self, shards: DecodedShards, shard: int, state: ShardState, records: pa.Table
    ) -> None:
        """Store ``state``: the state read (or none) with ``records`` replayed."""
        ...


@dataclass(frozen=True)
class GroupStateStore:
    """A shard's state as one blob in ``applyInPandasWithState``'s ``GroupState``."""

    group_state: GroupState

    def batch_time_ms(self) -> int:
        return int(self.group_state.getCurrentProcessingTimeMs())

    def timed_out(self) -> bool:
        return bool(self.group_state.hasTimedOut)

    def read(self, shards: DecodedShards) -> ShardState | None:
        if not self.group_state.exists:
            return None
        return shards.decode(bytes(self.group_state.get[0]))

    def write(
        self, shards: DecodedShards, shard: int, state: ShardState, records: pa.Table
    ) -> None:
        self.group_state.update((shards.encode(state, shard),))


ShardCall = Callable[[int, Iterator[pd.DataFrame], StoredShard], Iterator[pd.DataFrame]]


def make_state_function(
    settings: ProcessorSettings,
) -> Callable[[tuple[Any, ...], Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]]:
    """Build the function passed to ``applyInPandasWithState`` for these settings."""
    call = make_shard_call(settings)
    # A shard's key is the shard, or the shard plus a multiple of the count
    # (``streaming.spark.state_shards.shard_keys``).
    shards = settings.coordinator.shard_count

    def process(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], group_state: GroupState
    ) -> Iterator[pd.DataFrame]:
        yield from call(int(key[0]) % shards, frames, GroupStateStore(group_state))

    return process


def make_shard_call(settings: ProcessorSettings) -> ShardCall:
    """Build one shard call (the module's docstring) for these settings, whatever stores the
    shard's state between calls."""
    config = settings.coordinator

    def call(
        shard: int, frames: Iterator[pd.DataFrame], store: StoredShard
    ) -> Iterator[pd.DataFrame]:
        profile_dir = os.environ.get(PROFILE_DIR_ENV)
        if not profile_dir:
            yield from _process(shard, frames, store, None)
            return
        sections: dict[str, float] = {}
        yield from _process(shard, frames, store, sections)
        sections["pid"] = os.getpid()
        path = os.path.join(profile_dir, f"sections-{os.getpid()}.jsonl")
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(sections) + "\n")

    def _process(
        shard: int,
        frames: Iterator[pd.DataFrame],
        store: StoredShard,
        sections: dict[str, float] | None,
    ) -> Iterator[pd.DataFrame]:
        clock = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal clock
            if sections is not None:
                now = time.perf_counter()
                sections[name] = sections.get(name, 0.0) + now - clock
                clock = now

        # The micro-batch's timestamp, which Spark writes in its offset log when it plans the
        # batch and reads back when it replays it: expiry and request deadlines are decided
        # against it, never against the wall clock, so a replayed batch decides as it did.
        now_ms = store.batch_time_ms()
        loaded_records: int | None = None
        loaded = RECORD_FRAME_SCHEMA.empty_table()
        shards = decoded_shards(settings.state_cache_bytes)
        hits = shards.hits
        stored = store.read(shards)
        if stored is not None:
            shard_state = stored
            if sections is not None:
                sections["state_kept"] = float(shards.hits - hits)
        elif settings.load_from_offsets_topic:
            shard_state, loaded_records = load_shard(settings, shard)
            lap("load_shard")
            # The sink is a view of the state: refill it with what was rebuilt, from here when
            # this worker can reach the sink (the driver's write would wait for every shard).
            loaded = snapshot_records(shard_state)
            if settings.loaded_sink_url is not None:
                write_loaded(settings.loaded_sink_url, settings.sink_write_timeout_s, shard, loaded)
                loaded = RECORD_FRAME_SCHEMA.empty_table()
            lap("snapshot")
        else:
            shard_state = empty_shard(shard)
        called_with = shard_state
        lap("decode_state")

        input_rows = 0
        # The next offset after this call's messages in each (topic, partition) they came from;
        # topic null: the job's own ingest topic.
        positions: dict[str, list] = {"topic": [], "partition": [], "next_offset": []}
        # (tenant index or OPERATOR, responses) of each apply_batch call.
        answered: list[tuple[int, pa.Table]] = []
        record_parts: list[pa.Table] = []
        if store.timed_out():
            # Timers are no longer set (expiry follows the ticks); one a checkpoint of an
            # earlier version holds still fires once, and is a tick.
            result = cleanup_group_metadata(shard_state, now_ms, config)
            record_parts.append(result.records)
        else:
            messages = pd.concat(list(frames), ignore_index=True)
            lap("read_input")
            # Offsets expire at expiry ticks only: Kafka's periodic check, not at every call.
            # Ticks come on the job's own topic, whose messages are applied first.
            sources = by_source(messages)
            expire_due = expiry_ticked(sources)
            result = None
            for tenant, part in sources:
                topic = None if tenant == OPERATOR else settings.tenant_topics[tenant]
                own = own_partition(settings, tenant, shard)
                for partition, end in next_offsets(part):
                    positions["topic"].append(topic)
                    positions["partition"].append(partition)
                    positions["next_offset"].append(end)
                routed, misrouted = split_misrouted(part, own)
                for piece, refused in ((routed, False), (misrouted, True)):
                    if refused and not len(piece):
                        continue
                    frame = request_frame(piece, MARKERS if tenant == OPERATOR else frozenset())
                    if refused:
                        frame = refuse_misrouted(
                            frame,
                            f"shard {shard} reads its requests from partition {own} of its "
                            "ingest topic: a request goes to partition_for(group id, partition "
                            "count) with the group id as its key",
                        )
                    input_rows += frame.num_rows
                    lap("decode_requests")
                    result = apply_batch(
                        shard_state,
                        frame,
                        now_ms,
                        config,
                        expire_due=expire_due,
                        authorizer=(
                            None if tenant == OPERATOR else settings.tenant_authorizers[tenant]
                        ),
                    )
                    expire_due = False
                    shard_state = result.state
                    record_parts.append(result.records)
                    answered.append((tenant, result.responses))
                    lap("apply")
            assert result is not None
        lap("apply")

        records = record_parts[0] if len(record_parts) == 1 else pa.concat_tables(record_parts)
        # A call that changed nothing (no records: the state is the replay of its records)
        # leaves the stored state as it is: nothing to encode, nothing for the checkpoint.
        if not (stored is not None and result.state is called_with):
            store.write(shards, shard, result.state, records)
        lap("encode_state")

        responses = (
            RESPONSE_FRAME_SCHEMA.empty_table()
            if not answered
            else answered[0][1]
            if len(answered) == 1
            else pa.concat_tables([r for _, r in answered])
        )
        is_tombstone = pc.is_null(records["value"]) if records.num_rows else None
        ok = pc.equal(responses["error_code"], 0) if responses.num_rows else None
        is_commit = pc.equal(responses["api"], "OffsetCommit") if responses.num_rows else None
        stats = {
            "input_rows": input_rows,
            "commits_applied": (
                int(pc.sum(pc.and_(ok, is_commit).cast(pa.int64())).as_py() or 0) if ok else 0
            ),
            "rejected": int(pc.sum(pc.invert(ok).cast(pa.int64())).as_py() or 0) if ok else 0,
            "tombstones": int(pc.sum(is_tombstone.cast(pa.int64())).as_py() or 0)
            if is_tombstone is not None
            else 0,
            "state_keys": result.state.num_offsets,
            "loaded_records": loaded_records,
            "next_expiry_ms": result.next_expiry_ms,
        }
        answers, dead_letters = _encode_answers(answered, shard)
        lap("encode_responses")
        payload = encode_output(
            _output_table(
                shard,
                loaded,
                records,
                answers,
                dead_letters,
                stats,
                pa.table(positions),
                group_commits(responses),
                record_partitions(records, config),
            )
        )
        lap("output_table")
        if sections is not None:
            sections["rows"] = input_rows
            sections["state_keys"] = result.state.num_offsets
        yield pd.DataFrame({"shard": [shard], "payload": [payload]})
        lap("emit")

    return call


def _encode_answers(answered: list[tuple[int, pa.Table]], shard: int) -> tuple[pa.Table, pa.Table]:
    """The responses and dead letters of a shard's ``apply_batch`` calls (``encode_responses``),
    each response with the ``tenant`` whose responses topic it goes to (null: the job's)."""
    answers, dead = [], []
    for tenant, responses in answered:
        encoded, dead_letters = encode_responses(responses, shard)
        if tenant != OPERATOR and encoded.num_rows:
            encoded = encoded.append_column(
                "tenant", pa.array([tenant] * encoded.num_rows, pa.int32())
            )
        answers.append(encoded)
        dead.append(dead_letters)
    if not answers:
        return encode_responses(RESPONSE_FRAME_SCHEMA.empty_table(), shard)
    if len(answers) == 1:
        return answers[0], dead[0]
    return pa.concat_tables(answers, promote_options="permissive"), pa.concat_tables(dead)


__all__ = [
    "RECORD_FRAME_SCHEMA",
    "STATE_SCHEMA",
    "GroupStateStore",
    "ProcessorSettings",
    "ShardCall",
    "StoredShard",
    "make_shard_call",
    "make_state_function",
]
