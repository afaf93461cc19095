"""The shard call: Spark's rows in, one ``state.shard.handle_messages`` call, one row out.

Spark keys the state by shard, so a micro-batch makes at most one call per shard whatever the
number of groups. A call: the stored state (kept by this worker, decoded, or rebuilt from the
offsets topic) → ``handle_messages`` at the micro-batch's timestamp → the new state stored when
it changed → a rebuilt shard written to the sink from here when the worker writes it → one
``(shard, payload)`` row (``streaming.spark.output``). No timer calls: the job's expiry ticks are
messages.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import pandas as pd
import pyarrow as pa

from state.shard import (
    Authorizer,
    CoordinatorConfig,
    LoadedShard,
    ShardRules,
    ShardState,
    handle_messages,
    replay_log_chunks,
)
from streaming.spark.output import encode_output, output_table
from streaming.spark.shard_cache import DEFAULT_MAX_BYTES, DecodedShards

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessorSettings:
    """What the state function needs on the executors (pickled with it)."""

    coordinator: CoordinatorConfig
    offsets_topic: str
    #: The cluster and Kafka client options (the Java client's names) for loading a shard.
    bootstrap_servers: str
    kafka_options: Mapping[str, str]
    #: True when the offsets topic holds records: a shard called without state rebuilds it from
    #: its offsets-topic partitions.
    load_from_offsets_topic: bool
    #: The sink (an absolute URL) the worker writes a rebuilt shard's state to; None: the
    #: driver writes it after the batch (``JobConfig.rebuild_sink_writes``).
    loaded_sink_url: str | None = None
    sink_write_timeout_s: float = 60.0
    #: The driver's deployment lease (name, epoch, holder, TTL): the worker's sink writes under it,
    #: so a rebuilt shard of a process that lost the lease is not written. None: no lease. A
    #: plain tuple, not ``connectors.sinks``' ``Fence``: unpickling that would import the sinks
    #: (SQLAlchemy) in every Python worker, which imports them only to write a rebuilt shard.
    lease: tuple[str, int, str, int] | None = None
    #: Each tenant's ingest topic and rules, by tenant index (``ShardRules``).
    tenant_topics: tuple[str, ...] = ()
    tenant_authorizers: tuple[Authorizer, ...] = ()
    #: Partition counts of the ingest topics: the job's, then each tenant's (``ShardRules``).
    ingest_partitions: tuple[int, ...] = ()
    #: Bytes of decoded shard states each Python worker keeps between calls (0: none).
    state_cache_bytes: int = DEFAULT_MAX_BYTES

    def rules(self) -> ShardRules:
        return ShardRules(
            self.coordinator, self.tenant_topics, self.tenant_authorizers, self.ingest_partitions
        )


#: This Python worker's decoded shard states, made at its first call.
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
        # As Kafka's loader, skip what cannot be read rather than fail the shard.
        log.warning("shard %d: skipping unreadable offsets record: %s", shard, error)

    # Partitions hold disjoint groups: replaying one after another is replaying each.
    chunks = itertools.chain.from_iterable(
        read_partition_chunks(
            settings.bootstrap_servers, settings.kafka_options, settings.offsets_topic, partition
        )
        for partition in settings.coordinator.partitions_of(shard)
    )
    return replay_log_chunks(shard, chunks, on_unreadable=skip)


def write_loaded(
    sink_url: str,
    timeout_s: float,
    shard: int,
    records: pa.Table,
    lease: tuple[str, int, str, int] | None = None,
) -> None:
    """Write a piece of a rebuilt shard's state into the sink at ``sink_url``, retrying for
    ``timeout_s``; fenced by ``lease`` (LeaseLost once another holder took it)."""
    # Imported here: the sinks (SQLAlchemy) cost every Python worker ~0.3 s to import, and
    # only a worker that rebuilds a shard writes to one.
    from connectors.sinks import open_sink
    from connectors.sinks.retry import with_sink_retries

    def write() -> None:
        with open_sink(sink_url) as sink:
            if lease is not None:
                sink.fence_writes(*lease)
            sink.write_loaded(records)

    with_sink_retries(write, timeout_s, f"shard {shard}'s rebuilt state", log)


class StoredShard(Protocol):
    """Where a shard's state lives between calls, as one call sees it."""

    def batch_time_ms(self) -> int:
        """The micro-batch's timestamp (a replay sees the same)."""
        ...

    def read(self, shards: DecodedShards) -> ShardState | None:
        """The stored state (kept by this worker when ``shards`` has it), or None: none yet."""
        ...

    def write(
        self, shards: DecodedShards, shard: int, state: ShardState, records: pa.Table
    ) -> None:
        """Store ``state``: the state read (or none) with ``records`` replayed."""
        ...


ShardCall = Callable[[int, Iterator[pd.DataFrame], StoredShard], Iterator[pd.DataFrame]]


def make_shard_call(settings: ProcessorSettings) -> ShardCall:
    """The shard call (see the module's docstring) for these settings."""
    rules = settings.rules()
    load = (lambda shard: load_shard(settings, shard)) if settings.load_from_offsets_topic else None

    def call(
        shard: int, frames: Iterator[pd.DataFrame], store: StoredShard
    ) -> Iterator[pd.DataFrame]:
        shards = decoded_shards(settings.state_cache_bytes)
        stored = store.read(shards)
        parts = list(frames)
        # Spark hands a small batch's rows in one frame: no concat (a copy) for it.
        messages = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
        # Decided against the micro-batch's timestamp, not the wall clock: a replay decides
        # the same. A rebuilt shard goes to the sink from here, not from the driver, which
        # would wait for every shard to load.
        url = settings.loaded_sink_url
        writes = (
            None
            if url is None
            else partial(
                write_loaded, url, settings.sink_write_timeout_s, shard, lease=settings.lease
            )
        )
        out = handle_messages(shard, stored, messages, store.batch_time_ms(), rules, load, writes)
        if out.changed:
            store.write(shards, shard, out.state, out.records)
        yield pd.DataFrame({"shard": [shard], "payload": [encode_output(output_table(shard, out))]})

    return call
