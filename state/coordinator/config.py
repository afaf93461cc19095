"""The coordinator settings the offset state machine depends on (Kafka's broker configs)."""

from __future__ import annotations

from dataclasses import dataclass

from state.coordinator.partitioner import partition_for

#: ``offsets.retention.minutes`` default (10080 = 7 days) in milliseconds.
DEFAULT_OFFSETS_RETENTION_MS = 10080 * 60 * 1000

#: The largest ``offset.metadata.max.bytes`` whose metadata always fits a record string (int16
#: length, 32,767 bytes): Kafka counts UTF-16 code units, and one takes up to 3 bytes of UTF-8.
MAX_OFFSET_METADATA_MAX_BYTES = 0x7FFF // 3

#: Kafka's client ``default.api.timeout.ms`` default (60 s): the timeout of a request that does
#: not carry its own ``timeoutMs``.
DEFAULT_REQUEST_TIMEOUT_MS = 60_000


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """Kafka's group-coordinator settings that decide routing, expiry and commit validation.

    - ``offsets_topic_partitions``: ``offsets.topic.num.partitions``; a group lives on partition
      ``partition_for(group, offsets_topic_partitions)`` and may not move (as in Kafka).
    - ``state_shards``: how many states hold the partitions (a divisor of
      ``offsets_topic_partitions``; None: one per partition); state ``k`` holds every partition
      ``p`` with ``p % state_shards == k``, as a broker leads several partitions.
    - ``offsets_retention_ms``: ``offsets.retention.minutes`` in ms.
    - ``offset_metadata_max_bytes``: ``offset.metadata.max.bytes`` (counted as Kafka does, in
      UTF-16 code units); longer metadata gets OFFSET_METADATA_TOO_LARGE.
    - ``request_timeout_ms``: the timeout of a request without its own ``timeoutMs`` (Kafka's
      ``default.api.timeout.ms``; ``state.coordinator.deadlines``).
    """

    offsets_topic_partitions: int = 50
    offsets_retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS
    offset_metadata_max_bytes: int = 4096
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    state_shards: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "offsets_topic_partitions",
            "offsets_retention_ms",
            "offset_metadata_max_bytes",
            "request_timeout_ms",
        ):
            value = getattr(self, name)
            # bool is an int subclass; a flag passed by mistake must not become 1 partition.
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if self.offsets_topic_partitions < 1:
            raise ValueError(
                f"offsets_topic_partitions must be >= 1, got {self.offsets_topic_partitions}"
            )
        if self.state_shards is not None and (
            not isinstance(self.state_shards, int)
            or isinstance(self.state_shards, bool)
            or self.state_shards < 1
            or self.offsets_topic_partitions % self.state_shards
        ):
            raise ValueError(
                f"state_shards must divide offsets_topic_partitions "
                f"({self.offsets_topic_partitions}), got {self.state_shards!r}"
            )
        if self.offsets_retention_ms < 1:
            raise ValueError(f"offsets_retention_ms must be >= 1, got {self.offsets_retention_ms}")
        if self.request_timeout_ms < 0:
            raise ValueError(f"request_timeout_ms must be >= 0, got {self.request_timeout_ms}")
        if not 0 <= self.offset_metadata_max_bytes <= MAX_OFFSET_METADATA_MAX_BYTES:
            raise ValueError(
                f"offset_metadata_max_bytes must be in 0..{MAX_OFFSET_METADATA_MAX_BYTES}, "
                f"got {self.offset_metadata_max_bytes}"
            )

    @property
    def shard_count(self) -> int:
        """How many states hold the offsets-topic partitions (``state_shards``)."""
        return self.state_shards or self.offsets_topic_partitions

    def state_shard_for(self, group_id: str) -> int:
        """The state that holds ``group_id``: its offsets-topic partition modulo
        ``shard_count`` (the partition itself with one state per partition)."""
        return partition_for(group_id, self.offsets_topic_partitions) % self.shard_count

    def partitions_of(self, shard: int) -> range:
        """The offsets-topic partitions whose groups the state ``shard`` holds."""
        return range(shard, self.offsets_topic_partitions, self.shard_count)
