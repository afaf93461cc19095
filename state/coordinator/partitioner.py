"""Which offsets-topic partition (coordinator shard) owns a group, exactly as Kafka computes it.

Kafka's group coordinator places a group on ``__consumer_offsets`` partition
``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``, where ``String.hashCode`` runs
over the string's UTF-16 code units with 32-bit overflow and ``Utils.abs(Integer.MIN_VALUE)`` is
0. Any other formula (Python's ``hash``, masking with ``& 0x7fffffff``, hashing UTF-8 bytes) puts
some groups on a different shard than a Kafka broker would, so records written here could not be
read back by Kafka's own coordinator, and vice versa.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["DEFAULT_PARTITIONS", "java_string_hash", "partition_for"]

#: Kafka's default ``offsets.topic.num.partitions``.
DEFAULT_PARTITIONS = 50

_INT32_MIN = -(1 << 31)
_MASK32 = 0xFFFFFFFF

# Large enough to hold every group active in a deployment, small enough never to matter for
# memory. Group ids repeat across requests, so most calls are cache hits.
_CACHE_SIZE = 1 << 16


def java_string_hash(s: str) -> int:
    """Return Java's ``String.hashCode()`` of ``s`` as a signed 32-bit int.

    The hash runs over UTF-16 code units, so a character outside the Basic Multilingual Plane
    (e.g. an emoji) contributes its two surrogates. Lone surrogates in ``s`` are hashed as the
    single code unit they are, as Java would.
    """
    h = 0
    if s.isascii():
        # Fast path: one code unit per character, no UTF-16 encoding needed.
        for ch in s:
            h = (31 * h + ord(ch)) & _MASK32
    else:
        units = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=_CACHE_SIZE)
def _cached_hash(s: str) -> int:
    """``java_string_hash(s)``, cached: it runs once per request, on few distinct group ids."""
    return java_string_hash(s)


def partition_for(group_id: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    """Return the offsets-topic partition of ``group_id`` among ``partitions`` partitions.

    Equals Kafka's ``Utils.abs(groupId.hashCode()) % partitions``; a group whose hash is
    ``Integer.MIN_VALUE`` lands on partition 0. Raises ``ValueError`` if ``partitions < 1``.
    Hashes are cached, as the function runs once per request.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    h = _cached_hash(group_id)
    # Utils.abs maps Integer.MIN_VALUE to 0 (Math.abs would leave it negative).
    return 0 if h == _INT32_MIN else abs(h) % partitions
