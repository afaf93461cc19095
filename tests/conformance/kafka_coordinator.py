"""Kafka's own group coordinator, spoken to through kafka-python's protocol classes.

The admin clients check input before it leaves them (an empty group id, a negative offset), which
would hide what the broker answers; here each request goes to the group's coordinator as it is,
and the broker's own error codes come back. kafka-python has no OffsetDelete (KIP-496) classes,
so they are declared here from Kafka's ``OffsetDeleteRequest.json`` (v0, not flexible).
"""

from __future__ import annotations

import time
from typing import Any

from kafka.client_async import KafkaClient
from kafka.protocol.admin import DeleteGroupsRequest
from kafka.protocol.api import Request, Response
from kafka.protocol.commit import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.find_coordinator import FindCoordinatorRequest
from kafka.protocol.types import Array, Int16, Int32, Schema, String

from tests.conformance.operations import (
    Answer,
    Commit,
    DeleteGroup,
    DeleteOffsets,
    Fetched,
    Operation,
)

#: Kafka's error code for a group the principal may not use.
GROUP_AUTHORIZATION_FAILED = 30
#: COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR: the coordinator is not ready, retry.
_NOT_READY = frozenset({14, 16})


class OffsetDeleteResponse_v0(Response):
    API_KEY = 47
    API_VERSION = 0
    SCHEMA = Schema(
        ("error_code", Int16),
        ("throttle_time_ms", Int32),
        (
            "topics",
            Array(
                ("name", String("utf-8")),
                ("partitions", Array(("partition_index", Int32), ("error_code", Int16))),
            ),
        ),
    )


class OffsetDeleteRequest_v0(Request):
    API_KEY = 47
    API_VERSION = 0
    RESPONSE_TYPE = OffsetDeleteResponse_v0
    SCHEMA = Schema(
        ("group_id", String("utf-8")),
        ("topics", Array(("name", String("utf-8")), ("partitions", Array(Int32)))),
    )


def _by_topic(partitions: Any) -> list[tuple[str, list[Any]]]:
    """Partitions grouped by topic in first-seen order, repeats kept (as a client sends them)."""
    topics: dict[str, list[Any]] = {}
    for p in partitions:
        topics.setdefault(p[0], []).append(p)
    return list(topics.items())


class KafkaCoordinator:
    """Requests to the coordinator of each group on a real broker."""

    def __init__(
        self, bootstrap_servers: str, timeout_s: float = 30.0, **client_options: Any
    ) -> None:
        """``client_options``: more kafka-python options, e.g. a SASL login whose principal
        Kafka's authorizer then judges."""
        self._client = KafkaClient(
            bootstrap_servers=bootstrap_servers, client_id="conformance-harness", **client_options
        )
        self._timeout_s = timeout_s
        self._coordinators: dict[str, int] = {}
        # A fresh broker makes __consumer_offsets at its first FindCoordinator: made here,
        # before a test notes where the records of its requests will begin.
        self._coordinator("conformance-harness")

    def close(self) -> None:
        self._client.close()

    def _send(self, node_id: int | str, request: Request) -> Any:
        deadline = time.monotonic() + self._timeout_s
        while not self._client.ready(node_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {node_id} not ready")
            self._client.poll(timeout_ms=100)
        future = self._client.send(node_id, request)
        while not future.is_done:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer to {type(request).__name__} from {node_id}")
            self._client.poll(timeout_ms=100, future=future)
        if future.failed():
            raise future.exception
        return future.value

    def _coordinator(self, group_id: str) -> int:
        if group_id not in self._coordinators:
            node = None
            while node is None:
                node = self._client.least_loaded_node()
                if node is None:
                    self._client.poll(timeout_ms=100)
            deadline = time.monotonic() + self._timeout_s
            while True:
                response = self._send(node, FindCoordinatorRequest[1](group_id, 0))
                if response.error_code == 0:
                    break
                if response.error_code == GROUP_AUTHORIZATION_FAILED:
                    # The principal may not DESCRIBE the group, so Kafka will not say where
                    # its coordinator is; on a one-broker cluster it is that broker, whose
                    # answer to the request itself is what the harness compares.
                    self._coordinators[group_id] = node
                    return node
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no coordinator for {group_id!r}: {response}")
                time.sleep(0.2)  # COORDINATOR_NOT_AVAILABLE while __consumer_offsets is made
            self._coordinators[group_id] = response.coordinator_id
        return self._coordinators[group_id]

    def apply(self, group_id: str, operation: Operation) -> Answer:
        """Send one operation and return the broker's answer, retried as Kafka's clients retry
        while the group's coordinator moves or loads (nothing of such a request was applied)."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            answer = self._apply_once(group_id, operation)
            codes = {answer.error_code} if answer.error_code else {c for *_, c in answer.partitions}
            if not codes or not codes <= _NOT_READY or time.monotonic() > deadline:
                return answer
            self._coordinators.pop(group_id, None)
            time.sleep(0.5)

    def _apply_once(self, group_id: str, operation: Operation) -> Answer:
        node = self._coordinator(group_id)
        if isinstance(operation, Commit):
            return self._commit(node, group_id, operation)
        if isinstance(operation, DeleteOffsets):
            topics = [(t, [p for _, p in ps]) for t, ps in _by_topic(operation.partitions)]
            response = self._send(node, OffsetDeleteRequest_v0(group_id, topics))
            return Answer.of(
                response.error_code,
                [(t, p, code) for t, ps in response.topics for p, code in ps],
            )
        if isinstance(operation, DeleteGroup):
            response = self._send(node, DeleteGroupsRequest[1]([group_id]))
            return Answer.of(response.results[0][1])
        raise TypeError(operation)

    def _commit(self, node: int, group_id: str, commit: Commit) -> Answer:
        by_topic = _by_topic([(p.topic, p) for p in commit.partitions])
        request: Request
        if commit.retention_ms != -1:
            topics = [
                (t, [(p.partition, p.offset, p.metadata) for _, p in ps]) for t, ps in by_topic
            ]
            request = OffsetCommitRequest[4](
                group_id, commit.generation_id, commit.member_id, commit.retention_ms, topics
            )
        else:
            topics = [
                (t, [(p.partition, p.offset, p.leader_epoch, p.metadata) for _, p in ps])
                for t, ps in by_topic
            ]
            request = OffsetCommitRequest[7](
                group_id, commit.generation_id, commit.member_id, commit.group_instance_id, topics
            )
        response = self._send(node, request)
        return Answer.of(0, [(t, p, code) for t, ps in response.topics for p, code in ps])

    def fetch(self, group_id: str) -> tuple[int, Fetched]:
        """OffsetFetch of every committed partition: (group-level error, offsets)."""
        node = self._coordinator(group_id)
        response = self._send(node, OffsetFetchRequest[5](group_id, None))
        fetched: Fetched = {}
        for topic, partitions in response.topics:
            for partition, offset, leader_epoch, metadata, _code in partitions:
                fetched[(topic, partition)] = (offset, leader_epoch, metadata or "")
        return response.error_code, fetched
