"""How many states hold the offsets-topic partitions (``CoordinatorConfig.state_shards``), and
where a checkpoint records it.

A state is the unit of one Python call per micro-batch, and each call has a fixed cost (~4-5 ms
of Python on the project's machine, whatever it applies: tests/bench/README.md, "The shard
count"). One state per partition (Kafka's 50) costs ~46
calls for a micro-batch of 100 requests; states that hold several partitions each, as a broker
leads several partitions of ``__consumer_offsets``, cost fewer while the offsets topic keeps its
partitions.

State ``k`` holds partitions ``p`` with ``p % state_shards == k``, and reads its requests from
partition ``k % count`` of an ingest topic of ``count`` partitions; so ``state_shards`` divides
the offsets topic's partitions and is a multiple of every ingest topic's partition count. The
checkpoint fixes it: its states are keyed by it.

Spark places a key in state partition ``pmod(murmur3(key), n)``, which spreads a few small
integers unevenly: 10 shards over 2 tasks land 3 and 7, 2 shards both in one task (one core then
does all the work). So a new checkpoint keys shard ``k`` by ``shard_keys``: the smallest
``k + j * shards`` that Spark places in partition ``k % n``, and a call's shard is its key modulo
``shards``. The checkpoint records the partitions it spread the keys over with the count.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

#: The file in a checkpoint location that records its state shards (Spark leaves other files
#: of a checkpoint's root alone).
STATE_SHARDS_FILE = "consumer-offsets-state-shards"

#: The default state shards follow the Spark partitions of the state: the valid count nearest
#: this many per partition (on 2 cores, 10 shards did better than 50 and as well as 2 at a
#: small batch, with a fifth of the memory per shard of 2: tests/bench/README.md).
STATES_PER_STATE_PARTITION = 5


def choose_state_shards(
    partitions: int,
    ingest_counts: Mapping[str, int],
    wanted: int | None,
    held: int | None,
    state_partitions: int,
) -> int:
    """The state shards to run: the checkpoint's (``held``), else ``wanted``
    (``JobConfig.state_shards``), else the valid count nearest (by ratio; the larger on a tie)
    ``STATES_PER_STATE_PARTITION`` per state partition, and at least one per partition so that
    no task sits idle. Raises ``ValueError`` in one line that says what to do when they cannot
    be served."""
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
        target = STATES_PER_STATE_PARTITION * state_partitions
        usable = [d for d in valid if d >= state_partitions] or [partitions]
        return min(usable, key=lambda d: (abs(math.log(d / target)), -d))
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
    """The partition Spark's hash partitioning gives an integer key among ``partitions``:
    ``pmod(Murmur3_x86_32.hashInt(key, 42), partitions)``."""
    k = (key & _MASK32) * 0xCC9E2D51 & _MASK32
    k = _rotl(k, 15) * 0x1B873593 & _MASK32
    h = _rotl(SPARK_HASH_SEED ^ k, 13)
    h = _fmix((h * 5 + 0xE6546B64) & _MASK32 ^ 4)
    signed = h - (1 << 32) if h & 0x80000000 else h
    return signed % partitions


def shard_keys(shards: int, partitions: int) -> list[int]:
    """The key of each shard: the smallest ``k + j * shards`` that Spark places in state
    partition ``k % partitions``, so every partition gets ``shards / partitions`` shards, give
    or take one."""
    keys = []
    for shard in range(shards):
        key = shard
        while spark_partition(key, partitions) != shard % partitions:
            key += shards
        keys.append(key)
    return keys


def _path(spark: SparkSession, location: str) -> tuple[object, object]:
    jvm = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/" + STATE_SHARDS_FILE)
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]


def checkpoint_layout(spark: SparkSession, location: str) -> StateLayout | None:
    """The state layout the checkpoint at ``location`` records (any Hadoop file system), or
    None when it records none."""
    path, fs = _path(spark, location)
    if not fs.exists(path):  # type: ignore[attr-defined]
        return None
    stream = fs.open(path)  # type: ignore[attr-defined]
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        text = str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()
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
    path, fs = _path(spark, location)
    stream = fs.create(path, True)  # type: ignore[attr-defined]
    text = json.dumps({"state_shards": layout.shards, "spread_over": layout.spread_over})
    try:
        stream.write(bytearray((text + "\n").encode()))
    finally:
        stream.close()


__all__ = [
    "STATE_SHARDS_FILE",
    "StateLayout",
    "checkpoint_layout",
    "choose_state_shards",
    "record_layout",
    "shard_keys",
    "spark_partition",
]
