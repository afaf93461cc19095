"""How many states hold the offsets-topic partitions (``CoordinatorConfig.state_shards``), and
where a checkpoint records it.

A state is the unit of one Python call per micro-batch, and each call has a fixed cost (~4-5 ms
of Python on the project's machine, whatever it applies: see the README's "Choosing
`partitions`"). One state per partition (Kafka's 50) costs ~46 calls for a micro-batch of 100
requests; states that hold several partitions each, as a broker leads several partitions of
``__consumer_offsets``, cost fewer while the offsets topic keeps its partitions.

State ``k`` holds partitions ``p`` with ``p % state_shards == k``, and reads its requests from
partition ``k % count`` of an ingest topic of ``count`` partitions; so ``state_shards`` divides
the offsets topic's partitions and is a multiple of every ingest topic's partition count. The
checkpoint fixes it: its states are keyed by it. A checkpoint made before it was recorded holds
one state per partition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pyspark.sql import SparkSession

#: The file in a checkpoint location that records its state shards (Spark leaves other files
#: of a checkpoint's root alone).
STATE_SHARDS_FILE = "consumer-offsets-state-shards"

#: The default state shards follow the Spark partitions of the state: at least this many
#: states per partition, so that a skewed assignment of states to tasks stays mild.
STATES_PER_STATE_PARTITION = 5


def choose_state_shards(
    partitions: int,
    ingest_counts: Mapping[str, int],
    wanted: int | None,
    held: int | None,
    resumed: bool,
    state_partitions: int,
) -> int:
    """The state shards to run: the checkpoint's (``held``; a resumed checkpoint without a
    record holds one state per partition), else ``wanted`` (``JobConfig.state_shards``), else
    the fewest valid counts of at least ``STATES_PER_STATE_PARTITION`` per state partition.
    Raises ``ValueError`` in one line that says what to do when they cannot be served."""
    if resumed and held is None:
        held = partitions
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
        floor = min(partitions, STATES_PER_STATE_PARTITION * state_partitions)
        return next((d for d in valid if d >= floor), partitions)
    if chosen not in valid:
        counts = ", ".join(f"{topic} has {count}" for topic, count in ingest_counts.items())
        raise ValueError(
            f"{chosen} state shards cannot read the ingest topics: a state shard count must "
            f"divide partitions ({partitions}) and be a multiple of every ingest topic's "
            f"partition count ({counts}); valid: {', '.join(map(str, valid))}"
        )
    return chosen


def _path(spark: SparkSession, location: str) -> tuple[object, object]:
    jvm = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/" + STATE_SHARDS_FILE)
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]


def checkpoint_state_shards(spark: SparkSession, location: str) -> int | None:
    """The state shards the checkpoint at ``location`` records (any Hadoop file system), or
    None when it records none."""
    path, fs = _path(spark, location)
    if not fs.exists(path):  # type: ignore[attr-defined]
        return None
    stream = fs.open(path)  # type: ignore[attr-defined]
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        text = str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")).strip()
    finally:
        stream.close()
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{location}/{STATE_SHARDS_FILE} holds {text!r}, not a state shard count")
    return int(text)


def record_state_shards(spark: SparkSession, location: str, shards: int) -> None:
    """Record ``shards`` in the checkpoint at ``location`` (before its query first starts)."""
    path, fs = _path(spark, location)
    stream = fs.create(path, True)  # type: ignore[attr-defined]
    try:
        stream.write(bytearray(f"{shards}\n".encode()))
    finally:
        stream.close()


__all__ = [
    "STATE_SHARDS_FILE",
    "checkpoint_state_shards",
    "choose_state_shards",
    "record_state_shards",
]
