"""Which offsets-topic partition owns a group: ``Utils.abs(groupId.hashCode()) % partitions``,
exactly as Kafka computes it, so that records written here and by Kafka's coordinator agree."""

from __future__ import annotations

from functools import lru_cache

#: Kafka's default ``offsets.topic.num.partitions``.
DEFAULT_PARTITIONS = 50

_INT32_MIN = -(1 << 31)
_MASK32 = 0xFFFFFFFF


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` of ``s`` (signed 32-bit), over UTF-16 code units: a
    character outside the BMP counts as its two surrogates, a lone surrogate as itself."""
    h = 0
    if s.isascii():
        for ch in s:
            h = (31 * h + ord(ch)) & _MASK32
    else:
        units = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


# Runs once per request, on few distinct group ids.
_cached_hash = lru_cache(maxsize=1 << 16)(java_string_hash)


def partition_for(group_id: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    """The offsets-topic partition of ``group_id`` among ``partitions``; ``ValueError`` if
    ``partitions < 1``."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    h = _cached_hash(group_id)
    # Utils.abs maps Integer.MIN_VALUE to 0 (Math.abs would leave it negative).
    return 0 if h == _INT32_MIN else abs(h) % partitions
