"""The reference coordinator: one shard's offset state in plain dicts, one request at a time.

This is the model the shard's columnar state machine is tested against. It favours being obviously
right over being fast: every request goes through ``state.coordinator.handlers`` and every change
through ``replay``, and expiry walks every offset.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from state.coordinator.config import CoordinatorConfig
from state.coordinator.deadlines import is_timed_out, request_deadline_ms, timed_out_reason
from state.coordinator.errors import ErrorCode
from state.coordinator.handlers import HandlerResult, Response, handle
from state.coordinator.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    Record,
    TopicPartition,
)
from state.coordinator.requests import Request, TxnOffsetCommitRequest
from state.coordinator.rules import empty_group_deadline, offset_deadline


@dataclass
class GroupState:
    """A group as the coordinator holds it: its GroupMetadata (None for a simple group) and its
    committed offsets. A group exists while it has either."""

    metadata: GroupMetadataValue | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)


class _View:
    """``GroupView`` over a ``GroupState`` (possibly absent)."""

    def __init__(self, state: GroupState | None) -> None:
        self._state = state

    @property
    def metadata(self) -> GroupMetadataValue | None:
        return self._state.metadata if self._state is not None else None

    def exists(self) -> bool:
        return self._state is not None

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self._state.offsets.get(tp) if self._state is not None else None

    def topic_partitions(self) -> list[TopicPartition]:
        return sorted(self._state.offsets) if self._state is not None else []


class ReferenceCoordinator:
    """One coordinator shard (offsets-topic partition ``shard_id``) in plain dicts."""

    def __init__(self, shard_id: int, config: CoordinatorConfig | None = None) -> None:
        self.shard_id = shard_id
        self.config = config or CoordinatorConfig()
        self.groups: dict[str, GroupState] = {}

    def handle(
        self, request: Request, timestamp_ms: int, now_ms: int | None = None
    ) -> HandlerResult:
        """Validate and apply one request appended at ``timestamp_ms``, reached at ``now_ms``;
        return its records (already replayed) and responses. A request reached at or after its
        deadline is answered REQUEST_TIMED_OUT and changes nothing (``now_ms`` None: never)."""
        # A TxnOffsetCommit has no deadline: read once its transaction committed, it applies.
        if (
            now_ms is not None
            and not isinstance(request, TxnOffsetCommitRequest)
            and is_timed_out(timestamp_ms, request.timeout_ms, now_ms, self.config)
        ):
            deadline = request_deadline_ms(timestamp_ms, request.timeout_ms, self.config)
            reason = timed_out_reason(deadline, now_ms)
            return HandlerResult([], [Response(None, None, ErrorCode.REQUEST_TIMED_OUT, reason)])
        group_id = getattr(request, "group_id", None)
        state = self.groups.get(group_id) if group_id is not None else None
        result = handle(request, _View(state), timestamp_ms, self.shard_id, self.config)
        for record in result.records:
            self.replay(record)
        return result

    def replay(self, record: Record) -> None:
        """Apply one offsets-topic record: last write wins, a tombstone removes, and a group with
        neither metadata nor offsets is gone."""
        key, value = record
        if isinstance(key, OffsetCommitKey):
            tp = TopicPartition(key.topic, key.partition)
            if value is None:
                state = self.groups.get(key.group)
                if state is not None:
                    state.offsets.pop(tp, None)
                    self._drop_if_gone(key.group)
            else:
                assert isinstance(value, OffsetAndMetadata)
                self.groups.setdefault(key.group, GroupState()).offsets[tp] = value
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                state = self.groups.get(key.group)
                if state is not None:
                    state.metadata = None
                    self._drop_if_gone(key.group)
            else:
                assert isinstance(value, GroupMetadataValue)
                self.groups.setdefault(key.group, GroupState()).metadata = value
        # Other record types (e.g. KIP-848 consumer-group records) are not this model's.

    def _drop_if_gone(self, group_id: str) -> None:
        state = self.groups[group_id]
        if state.metadata is None and not state.offsets:
            del self.groups[group_id]

    def expire(self, now_ms: int) -> list[Record]:
        """Remove what is due at ``now_ms``; return a tombstone for each removal, by group, offsets
        (by topic and partition) before the group's metadata."""
        records: list[Record] = []
        for group_id in sorted(self.groups):
            state = self.groups[group_id]
            expired = 0
            for tp in sorted(state.offsets):
                deadline = offset_deadline(state.offsets[tp], tp.topic, state.metadata, self.config)
                if deadline is not None and now_ms >= deadline:
                    records.append(Record(OffsetCommitKey(group_id, tp.topic, tp.partition), None))
                    expired += 1
            deadline = empty_group_deadline(state.metadata, len(state.offsets) > expired)
            if deadline is not None and now_ms >= deadline:
                records.append(Record(GroupMetadataKey(group_id), None))
        for record in records:
            self.replay(record)
        return records

    def next_expiry_ms(self) -> int | None:
        """The earliest ``now`` at which ``expire`` would remove something, None if nothing can
        expire without a further request."""
        deadlines: list[int] = []
        for state in self.groups.values():
            for tp, offset in state.offsets.items():
                d = offset_deadline(offset, tp.topic, state.metadata, self.config)
                if d is not None:
                    deadlines.append(d)
            d = empty_group_deadline(state.metadata, bool(state.offsets))
            if d is not None:
                deadlines.append(d)
        return min(deadlines, default=None)

    def snapshot(self) -> dict[str, GroupState]:
        """A deep copy of every group's state."""
        return copy.deepcopy(self.groups)
