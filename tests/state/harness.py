"""Running the same requests through the shard and the reference coordinator, and comparing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from state.coordinator.config import CoordinatorConfig
from state.coordinator.model import GroupMetadataValue, OffsetAndMetadata, TopicPartition
from state.coordinator.requests import Request
from state.shard import (
    ShardState,
    apply_batch,
    empty_shard,
    frame_from_requests,
    replay_records,
    snapshot,
)
from tests.state.reference import ReferenceCoordinator

Groups = dict[str, tuple[GroupMetadataValue | None, dict[TopicPartition, OffsetAndMetadata]]]
ResponseRow = tuple[str | None, int | None, int, str | None]


def shard_groups(state: ShardState) -> Groups:
    """Every group of the shard as (metadata, offsets)."""
    return {g: (s.metadata, dict(s.offsets)) for g, s in snapshot(state).items()}


def reference_groups(ref: ReferenceCoordinator) -> Groups:
    """Every group of the reference coordinator as (metadata, offsets)."""
    return {g: (s.metadata, dict(s.offsets)) for g, s in ref.groups.items()}


def responses_by_offset(responses: pa.Table) -> dict[int, list[ResponseRow]]:
    """A response frame's rows as (topic, partition, code, reason), by ingest offset."""
    out: dict[int, list[ResponseRow]] = {}
    for row in responses.to_pylist():
        out.setdefault(row["ingest_offset"], []).append(
            (row["topic"], row["partition"], row["error_code"], row["error_reason"])
        )
    return out


@dataclass
class Run:
    """The shard applying batches, and the reference applying the same requests one by one with
    expiry at the same points (the start of each batch)."""

    shard_id: int
    config: CoordinatorConfig
    state: ShardState = field(init=False)
    ref: ReferenceCoordinator = field(init=False)
    records: list[pa.Table] = field(default_factory=list)
    next_offset: int = 0

    def __post_init__(self) -> None:
        self.state = empty_shard(self.shard_id, self.config)
        self.ref = ReferenceCoordinator(self.shard_id, self.config)

    def batch(
        self,
        requests: Sequence[Request],
        now_ms: int,
        shuffle_seed: int | None = None,
        ages_ms: Sequence[int] | None = None,
    ) -> None:
        """Apply ``requests`` as one batch at ``now_ms`` (rows shuffled with ``shuffle_seed``) on
        both, and assert the same responses, groups and next expiry. Request ``i``'s message
        timestamp is ``now_ms - ages_ms[i]`` (``now_ms`` when ``ages_ms`` is None)."""
        stamps = (
            [now_ms - age for age in ages_ms] if ages_ms is not None else [now_ms] * len(requests)
        )
        frame = frame_from_requests(requests, self.next_offset, stamps)
        if shuffle_seed is not None and frame.num_rows:
            # Rows reach the state function in no particular order.
            import random

            order = list(range(frame.num_rows))
            random.Random(shuffle_seed).shuffle(order)
            frame = frame.take(pa.array(order))
        result = apply_batch(self.state, frame, now_ms, self.config)
        self.state = result.state
        self.records.append(result.records)

        self.ref.expire(now_ms)
        expected: dict[int, list[ResponseRow]] = {}
        for i, request in enumerate(requests):
            answer = self.ref.handle(request, stamps[i], now_ms)
            expected[self.next_offset + i] = [
                (r.topic, r.partition, r.error_code, r.error_reason) for r in answer.responses
            ]
        got = responses_by_offset(result.responses)
        assert got == expected, f"responses differ:\n got {got}\nwant {expected}"
        assert shard_groups(self.state) == reference_groups(self.ref)
        assert result.next_expiry_ms == self.ref.next_expiry_ms()
        self.next_offset += len(requests)

    def replayed(self) -> ShardState:
        """The shard rebuilt by replaying every record it emitted, from empty."""
        state = empty_shard(self.shard_id, self.config)
        for table in self.records:
            state = replay_records(state, table)
        return state
