"""A group's committed offsets as the ``startingOffsets`` a Spark Kafka query takes.

Spark's Kafka source accepts ``startingOffsets`` as JSON, ``{"orders": {"0": 42, "1": 17}}``,
where an offset is the next one to read (what Kafka stores as a committed offset) or one of two
markers: -2 for the partition's earliest offset, -1 for its latest. Spark insists that such a
JSON names *every* partition of every subscribed topic and nothing else ("If startingOffsets
contains specific offsets, you must specify all TopicPartitions"), so a partition the group
never committed must still appear, with a marker: :func:`starting_offsets_json` fills those in
from the topics' partition lists (read from the data cluster by the caller).

Pure: no Kafka, no sink. ``OffsetsReader.spark_starting_offsets`` is the entry point that reads
both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

from state.coordinator.model import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "MISSING_CHOICES",
    "Missing",
    "missing_marker",
    "starting_offsets_json",
]

#: Spark's per-partition markers in ``startingOffsets`` JSON.
EARLIEST: Final = -2
LATEST: Final = -1

#: Where a partition without a committed offset starts (Kafka's ``auto.offset.reset`` words).
Missing = Literal["earliest", "latest"]
MISSING_CHOICES: Final = ("earliest", "latest")


def missing_marker(missing: str) -> int:
    """Spark's marker for ``missing`` ("earliest" -2, "latest" -1); ValueError naming the field
    for anything else."""
    if missing == "earliest":
        return EARLIEST
    if missing == "latest":
        return LATEST
    raise ValueError(f"missing must be 'earliest' or 'latest', got {missing!r}")


def starting_offsets_json(
    committed: Iterable[tuple[TopicPartition, int]],
    partitions: Mapping[str, Sequence[int]],
    missing: str = "earliest",
) -> str:
    """The ``startingOffsets`` JSON over exactly ``partitions`` (topic -> its partition ids).

    Each partition gets its committed offset from ``committed`` (pairs of partition and offset;
    negative offsets mean "nothing committed"), else the ``missing`` marker. Committed offsets of
    partitions outside ``partitions`` (another topic, or a partition the topic no longer has)
    are left out, as Spark would refuse them. Topics and partitions come out sorted, so equal
    inputs give equal text.
    """
    marker = missing_marker(missing)
    known = {(tp[0], int(tp[1])): int(offset) for tp, offset in committed if int(offset) >= 0}
    document = {
        topic: {str(p): known.get((topic, p), marker) for p in sorted(set(ids))}
        for topic, ids in sorted(partitions.items())
    }
    return json.dumps(document, separators=(",", ":"))
