"""How many states hold the offsets-topic partitions (``CoordinatorConfig.state_shards``), and
where a checkpoint records it.

A state is one Python call per micro-batch, each with a fixed cost, so a state holds several
partitions, as a broker leads several of ``__consumer_offsets``: by default one state per state
partition, so a micro-batch makes one call a task. State ``k`` holds partitions ``p %
state_shards == k`` and reads partition ``k % count`` of an ingest topic of ``count``
partitions: ``state_shards`` divides the partitions and is a multiple of every ingest count.

Spark's ``pmod(murmur3(key), n)`` spreads a few small integers unevenly (2 shards may share one
task), so a new checkpoint keys shard ``k`` by :func:`shard_keys` and records the partitions it
spread them over with the count; a call's shard is its key modulo ``shards``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

from streaming.spark.checkpoint_files import hadoop_path, read_text

#: The file in a checkpoint location that records its state layout (Spark leaves it alone).
STATE_SHARDS_FILE = "consumer-offsets-state-shards"


def choose_state_shards(
    partitions: int,
    ingest_counts: Mapping[str, int],
    wanted: int | None,
    held: int | None,
    state_partitions: int,
) -> int:
    """The state shards to run: the checkpoint's (``held``), else ``wanted``, else the smallest
    valid count with at least one per state partition (one Python call a task; tests/bench/
    README.md, "The shard count"). ``ValueError`` saying what to do when they cannot be served."""
    if held is not None and wanted is not None and wanted != held:
        raise ValueError(
            f"state_shards is {wanted} but the checkpoint's state is held in {held} state "
            f"shards: unset state_shards or set it to {held}, or move the checkpoint away to "
            f"rebuild the state from the offsets topic"
        )
    step = math.lcm(*ingest_counts.values()) if ingest_counts else 1
    valid = [d for d in range(step, partitions + 1, step) if partitions % d == 0]
    chosen = held if held is not None else wanted
    if chosen is None:
        return min((d for d in valid if d >= state_partitions), default=partitions)
    if chosen not in valid:
        counts = ", ".join(f"{topic} has {count}" for topic, count in ingest_counts.items())
        raise ValueError(
            f"{chosen} state shards cannot read the ingest topics: a state shard count must "
            f"divide partitions ({partitions}) and be a multiple of every ingest topic's "
            f"partition count ({counts}); valid: {', '.join(map(str, valid))}"
        )
    return chosen


@dataclass(frozen=True)
class StateLayout:
    """How a checkpoint keys its states: ``shards`` states, their keys spread over
    ``spread_over`` state partitions (0: the shard is the key, as release 2's checkpoints)."""

    shards: int
    spread_over: int = 0

    def keys(self) -> list[int] | None:
        """Each shard's key (``shard_keys``), or None when the shard is its key."""
        return shard_keys(self.shards, self.spread_over) if self.spread_over else None


def _fmix(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    return h ^ (h >> 16)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


_MASK32 = 0xFFFFFFFF
#: The seed of Spark's ``HashPartitioning`` (``Murmur3Hash``'s default, as SQL's ``hash``).
SPARK_HASH_SEED = 42


def spark_partition(key: int, partitions: int) -> int:
    """Spark's hash partition of an integer key: ``pmod(Murmur3_x86_32.hashInt(key, 42), n)``."""
    k = (key & _MASK32) * 0xCC9E2D51 & _MASK32
    k = _rotl(k, 15) * 0x1B873593 & _MASK32
    h = _rotl(SPARK_HASH_SEED ^ k, 13)
    h = _fmix((h * 5 + 0xE6546B64) & _MASK32 ^ 4)
    signed = h - (1 << 32) if h & 0x80000000 else h
    return signed % partitions


def shard_keys(shards: int, partitions: int) -> list[int]:
    """Each shard ``k``'s key: the smallest ``k + j * shards`` Spark places in state partition
    ``k % partitions``, so each partition gets ``shards / partitions``, give or take one."""
    keys = []
    for shard in range(shards):
        key = shard
        while spark_partition(key, partitions) != shard % partitions:
            key += shards
        keys.append(key)
    return keys


def checkpoint_layout(spark: SparkSession, location: str) -> StateLayout | None:
    """The state layout the checkpoint at ``location`` records, or None."""
    path, fs = hadoop_path(spark, f"{location.rstrip('/')}/{STATE_SHARDS_FILE}")
    if not fs.exists(path):
        return None
    text = read_text(spark, fs, path)
    try:
        fields = json.loads(text)
        layout = StateLayout(int(fields["state_shards"]), int(fields["spread_over"]))
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{location}/{STATE_SHARDS_FILE} is not a state layout ({error}): {text[:100]!r}"
        ) from None
    if layout.shards < 1 or layout.spread_over < 0:
        raise ValueError(f"{location}/{STATE_SHARDS_FILE} holds an impossible layout: {text!r}")
    return layout


def record_layout(spark: SparkSession, location: str, layout: StateLayout) -> None:
    """Record ``layout`` in the checkpoint at ``location`` (before its query first starts)."""
    path, fs = hadoop_path(spark, f"{location.rstrip('/')}/{STATE_SHARDS_FILE}")
    stream = fs.create(path, True)
    text = json.dumps({"state_shards": layout.shards, "spread_over": layout.spread_over})
    try:
        stream.write(bytearray((text + "\n").encode()))
    finally:
        stream.close()
