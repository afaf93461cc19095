"""A group's committed offsets as the ``startingOffsets`` JSON a Spark Kafka query takes:
``{"orders": {"0": 42, "1": 17}}``, every partition of every subscribed topic named (Spark wants
them all), -2 (earliest) or -1 (latest) where nothing is committed. Pure; imports no pyspark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from state.coordinator.model import TopicPartition

#: Spark's per-partition markers, by Kafka's ``auto.offset.reset`` words.
_MARKERS = {"earliest": -2, "latest": -1}


def missing_marker(missing: str) -> int:
    """Spark's marker for ``missing`` ("earliest" -2, "latest" -1); ValueError naming the field
    for anything else."""
    if missing not in _MARKERS:
        raise ValueError(f"missing must be 'earliest' or 'latest', got {missing!r}")
    return _MARKERS[missing]


def starting_offsets_json(
    committed: Iterable[tuple[TopicPartition, int]],
    partitions: Mapping[str, Sequence[int]],
    missing: str = "earliest",
) -> str:
    """The ``startingOffsets`` JSON over exactly ``partitions`` (topic -> partition ids), sorted.

    Each partition gets its committed offset from ``committed`` (negative: nothing committed),
    else the ``missing`` marker; committed partitions outside ``partitions`` are left out, as
    Spark would refuse them.
    """
    marker = missing_marker(missing)
    known = {(tp[0], int(tp[1])): int(offset) for tp, offset in committed if int(offset) >= 0}
    document = {
        topic: {str(p): known.get((topic, p), marker) for p in sorted(set(ids))}
        for topic, ids in sorted(partitions.items())
    }
    return json.dumps(document, separators=(",", ":"))
