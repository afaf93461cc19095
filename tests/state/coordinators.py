"""The shard and the reference coordinator behind one small interface, so each Kafka rule is tested
against both."""

from __future__ import annotations

from collections.abc import Sequence

from state.coordinator.config import CoordinatorConfig
from state.coordinator.model import GroupMetadataValue, OffsetAndMetadata, TopicPartition
from state.coordinator.requests import Request
from state.shard import (
    apply_batch,
    empty_shard,
    expire,
    frame_from_requests,
    next_expiry_ms,
    snapshot,
)
from tests.state.harness import ResponseRow, responses_by_offset
from tests.state.reference import ReferenceCoordinator


class ShardCoordinator:
    """The shard (``state.shard``), one batch per ``run``."""

    name = "shard"

    def __init__(self, shard_id: int, config: CoordinatorConfig) -> None:
        self.config = config
        self.state = empty_shard(shard_id, config)
        self.offset = 0

    def run(self, requests: Sequence[Request], now_ms: int) -> list[list[ResponseRow]]:
        """Apply ``requests`` as one batch at ``now_ms``; the responses of each request."""
        frame = frame_from_requests(requests, self.offset, now_ms)
        result = apply_batch(self.state, frame, now_ms, self.config)
        self.state = result.state
        got = responses_by_offset(result.responses)
        out = [got.get(self.offset + i, []) for i in range(len(requests))]
        self.offset += len(requests)
        return out

    def expire(self, now_ms: int) -> None:
        self.state = expire(self.state, now_ms, self.config).state

    def offsets(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        s = snapshot(self.state).get(group)
        return dict(s.offsets) if s else {}

    def metadata(self, group: str) -> GroupMetadataValue | None:
        s = snapshot(self.state).get(group)
        return s.metadata if s else None

    def groups(self) -> set[str]:
        return set(snapshot(self.state))

    def next_expiry_ms(self) -> int | None:
        return next_expiry_ms(self.state)


class ReferenceAdapter:
    """The reference coordinator, expiring before each ``run`` as the shard does."""

    name = "reference"

    def __init__(self, shard_id: int, config: CoordinatorConfig) -> None:
        self.ref = ReferenceCoordinator(shard_id, config)

    def run(self, requests: Sequence[Request], now_ms: int) -> list[list[ResponseRow]]:
        self.ref.expire(now_ms)
        return [
            [
                (r.topic, r.partition, r.error_code, r.error_reason)
                for r in self.ref.handle(q, now_ms, now_ms).responses
            ]
            for q in requests
        ]

    def expire(self, now_ms: int) -> None:
        self.ref.expire(now_ms)

    def offsets(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        s = self.ref.groups.get(group)
        return dict(s.offsets) if s else {}

    def metadata(self, group: str) -> GroupMetadataValue | None:
        s = self.ref.groups.get(group)
        return s.metadata if s else None

    def groups(self) -> set[str]:
        return set(self.ref.groups)

    def next_expiry_ms(self) -> int | None:
        return self.ref.next_expiry_ms()


Coordinator = ShardCoordinator | ReferenceAdapter
