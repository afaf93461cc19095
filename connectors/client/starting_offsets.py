"""A group's committed offsets as the ``startingOffsets`` JSON a Spark Kafka query takes.

``{"orders": {"0": 42, "1": 17}}``: per partition the next offset to read (a committed offset),
or -2 (earliest) / -1 (latest). Spark wants *every* partition of every subscribed topic named,
so partitions the group never committed get a marker. Pure: no Kafka, no sink
(``OffsetsReader.spark_starting_offsets`` reads both). Imports no pyspark: the CLI uses it.
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
