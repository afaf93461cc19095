"""Where the job starts, planned from what it finds by a pure function (:func:`plan_start`).

With a checkpoint the query resumes from it; without one the sink starts over, and if the offsets
topic holds records every shard rebuilds its state from it first (LOADING: readers answer
COORDINATOR_LOAD_IN_PROGRESS), else STARTING until the first micro-batch completed. A checkpoint
of an earlier release is moved aside and a new one starts where it ended (or the sink, if
further), its state rebuilt from the offsets topic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from streaming.config import JobConfig
from streaming.spark.state_shards import StateLayout, choose_state_shards

#: What a checkpoint that records no state layout is: release 1's (one state per partition).
NO_LAYOUT = "release 1 (no state layout recorded)"
#: Ingest positions by topic, then partition (Spark's Kafka source JSON, decoded).
Positions = Mapping[str, Mapping[int, int]]


@dataclass(frozen=True)
class CheckpointFacts:
    """What the checkpoint location holds when the job starts."""

    exists: bool = False
    #: The state layout it records (None: none recorded, as release 1's: migrated).
    layout: StateLayout | None = None
    #: The earlier release's state it holds, in words, when it must be migrated.
    earlier_release: str | None = None
    #: Where its last committed batch ended (read only for a migration).
    committed: Positions = field(default_factory=dict)


@dataclass(frozen=True)
class SinkFacts:
    """What the sink's status row says (``connectors.sinks`` ``CoordinatorStatus``)."""

    status: str
    ingest_offsets: Mapping[int, int] = field(default_factory=dict)
    tenant_offsets: Positions = field(default_factory=dict)


@dataclass(frozen=True)
class StartPlan:
    """What the runner does: the checkpoint, the sink's status, where reading starts."""

    resumed: bool
    #: The earlier release's state to migrate from (the checkpoint moves aside), else None.
    migrate: str | None
    layout: StateLayout
    #: Spark partitions of the state (tasks per micro-batch).
    state_partitions: int
    #: Every shard rebuilds its state from the offsets topic in the first batch.
    loading: bool
    #: A shard without state loads its offsets-topic partitions (they hold records).
    load_from_offsets_topic: bool
    #: Spark's ``startingOffsets`` (a new checkpoint only).
    starting_offsets: str
    #: The sink's status and detail; ``reset_sink``: the sink view starts over with them.
    status: str
    detail: str
    reset_sink: bool
    #: The positions the writer starts from (a resumed checkpoint's, from the sink).
    ingest_offsets: Mapping[int, int] = field(default_factory=dict)
    tenant_offsets: Positions = field(default_factory=dict)

    @property
    def shards(self) -> int:
        return self.layout.shards


def plan_start(
    config: JobConfig,
    checkpoint: CheckpointFacts,
    sink: SinkFacts,
    stored: Mapping[int, int],
    ingest_layout: Mapping[str, int],
    parallelism: int,
) -> StartPlan:
    """The start given the checkpoint, the sink, the offsets topic's end offsets (``stored``),
    each ingest topic's partition count and the state partitions wanted (``parallelism``).
    ``ValueError`` for state shards the checkpoint or topics refuse."""
    migrate = None
    if checkpoint.exists:
        migrate = checkpoint.earlier_release or (None if checkpoint.layout else NO_LAYOUT)
    held = checkpoint.layout if checkpoint.exists and migrate is None else None
    resumed = held is not None
    shards = choose_state_shards(
        config.partitions,
        ingest_layout,
        config.state_shards,
        held.shards if held else None,
        parallelism,
    )
    layout = held or StateLayout(shards, min(parallelism, shards))
    has_log = sum(stored.values()) > 0
    if resumed:
        # A rebuild whose batch never committed: its shards have no state and load when called.
        loading = sink.status == "LOADING" and has_log
        starting = config.starting_offsets  # Spark reads the checkpoint's instead
        detail = (
            "resuming the rebuild from the offsets topic" if loading else "resumed from checkpoint"
        )
    else:
        loading = has_log
        recorded = {config.ingest_topic: sink.ingest_offsets, **sink.tenant_offsets}
        # The sink may be one batch past the last committed one: no request is answered twice.
        positions = _further(checkpoint.committed, recorded) if migrate else recorded
        starting = starting_offsets(config, positions, ingest_layout)
        detail = "rebuilding state from the offsets topic" if loading else "new state"
    return StartPlan(
        resumed=resumed,
        migrate=migrate,
        layout=layout,
        state_partitions=layout.spread_over or min(parallelism, shards),
        loading=loading,
        load_from_offsets_topic=has_log,
        starting_offsets=starting,
        status="LOADING" if loading else "STARTING",
        detail=detail,
        # A new checkpoint restarts batch ids and state: the sink view starts over with it.
        reset_sink=not resumed,
        ingest_offsets=dict(sink.ingest_offsets) if resumed else {},
        tenant_offsets={t: dict(o) for t, o in sink.tenant_offsets.items()} if resumed else {},
    )


def _further(a: Positions, b: Positions) -> dict[str, dict[int, int]]:
    """Per topic and partition, the further of two positions."""
    merged: dict[str, dict[int, int]] = {t: dict(o) for t, o in a.items()}
    for topic, offsets in b.items():
        mine = merged.setdefault(topic, {})
        for partition, offset in offsets.items():
            mine[partition] = max(offset, mine.get(partition, offset))
    return merged


def starting_offsets(config: JobConfig, positions: Positions, layout: Mapping[str, int]) -> str:
    """Where a new checkpoint's ingest reading starts: ``positions`` on the job's and tenants'
    ingest topics (of ``layout`` partitions), else ``config.starting_offsets``."""
    topics = [config.ingest_topic, *(t.ingest_topic for t in config.tenants)]
    if not any(positions.get(topic) for topic in topics):
        return config.starting_offsets
    # Spark wants every partition named; those never read start at the earliest (-2).
    return json.dumps(
        {
            topic: {str(p): positions.get(topic, {}).get(p, -2) for p in range(layout[topic])}
            for topic in topics
        }
    )
