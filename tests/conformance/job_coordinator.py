"""The job, spoken to as its clients do: requests on the ingest topic, answers on the responses
topic, offsets from the sink, records from its offsets topic.

Every sequence's requests are produced at once, each group's in order on its shard, and the
answers are awaited together: a few micro-batches for any number of sequences.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from connectors.kafka.admin import consumer_end_offsets
from connectors.sinks import open_sink
from state.coordinator.model import TopicPartition
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    DeleteGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    Request,
)
from state.formats.request_codec import encode_request
from streaming.config import JobConfig
from tests.conformance.operations import (
    Answer,
    Commit,
    DeleteGroup,
    DeleteOffsets,
    Fetched,
    Operation,
    Sequence,
)


def job_request(group_id: str, operation: Operation) -> Request:
    """The ingest request for ``operation``, with a fresh request id."""
    request_id = uuid.uuid4().hex
    if isinstance(operation, Commit):
        return OffsetCommitRequest(
            request_id=request_id,
            group_id=group_id,
            partitions=tuple(
                PartitionCommit(p.topic, p.partition, p.offset, p.leader_epoch, p.metadata or "")
                for p in operation.partitions
            ),
            retention_time_ms=operation.retention_ms,
            generation_id=operation.generation_id,
            member_id=operation.member_id,
            group_instance_id=operation.group_instance_id,
        )
    if isinstance(operation, DeleteOffsets):
        return OffsetDeleteRequest(
            request_id, group_id, tuple(TopicPartition(t, p) for t, p in operation.partitions)
        )
    if isinstance(operation, DeleteGroup):
        return DeleteGroupsRequest(request_id, group_id)
    raise TypeError(operation)


def _answer(response: dict[str, object]) -> Answer:
    """The job's response JSON as an ``Answer`` (partitions as listed, repeats kept)."""
    entries = response.get("partitions") or []
    assert isinstance(entries, list)
    code = response.get("errorCode", 0)
    assert isinstance(code, int)
    return Answer.of(code, [(e["topic"], e["partitionIndex"], e["errorCode"]) for e in entries])


class JobCoordinator:
    """Requests to a running offsets job configured by ``config``."""

    def __init__(
        self,
        config: JobConfig,
        timeout_s: float = 120.0,
        *,
        tenant: str | None = None,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        """Requests go to ``config``'s ingest topic, or its ``tenant``'s, as the principal of
        ``client_options`` (kafka-python's; default the config's)."""
        self._config = config
        self._timeout_s = timeout_s
        self._ingest_topic, responses_topic = config.ingest_topic, config.responses_topic
        if tenant is not None:
            (chosen,) = [t for t in config.tenants if t.name == tenant]
            self._ingest_topic, responses_topic = chosen.ingest_topic, chosen.responses_topic
        options = client_options or config.kafka_python_options()
        self._producer = KafkaProducer(**options, acks="all")
        # As clients read answers: once their batch's transaction commits.
        self._responses = KafkaConsumer(
            **{**options, "isolation_level": "read_committed"}, enable_auto_commit=False
        )
        tps = [KafkaTopicPartition(responses_topic, p) for p in range(config.partitions)]
        self._responses.assign(tps)
        # Only answers to this harness's requests matter; start after what is there.
        for tp, end in consumer_end_offsets(self._responses, tps).items():
            self._responses.seek(tp, end)

    def close(self) -> None:
        self._producer.close()
        self._responses.close()

    def run(self, sequences: Iterable[Sequence]) -> list[list[Answer]]:
        """Send every sequence's operations and return their answers, per sequence in order."""
        ids = [[self._send(job_request(s.group_id, op)) for op in s.operations] for s in sequences]
        self._producer.flush()
        answers = self._await({i for request_ids in ids for i in request_ids})
        return [[answers[i] for i in request_ids] for request_ids in ids]

    def request(self, request: Request) -> Answer:
        """Send one request of any kind (e.g. GroupMetadata) and return its answer."""
        request_id = self._send(request)
        self._producer.flush()
        return self._await({request_id})[request_id]

    def _send(self, request: Request) -> str:
        self._producer.send(
            self._ingest_topic,
            key=request.group_id.encode("utf-8"),
            value=encode_request(request),
            partition=partition_for(request.group_id, self._config.ingest_topic_partitions),
        )
        return request.request_id

    def _await(self, pending: set[str]) -> dict[str, Answer]:
        answers: dict[str, Answer] = {}
        deadline = time.monotonic() + self._timeout_s
        while pending - answers.keys():
            if time.monotonic() > deadline:
                missing = len(pending - answers.keys())
                raise TimeoutError(f"the job did not answer {missing} of {len(pending)} requests")
            for batch in self._responses.poll(timeout_ms=500).values():
                for message in batch:
                    request_id = message.key.decode("utf-8")
                    if request_id in pending:
                        answers[request_id] = _answer(json.loads(message.value))
        return answers

    def fetch(self, group_ids: Iterable[str]) -> dict[str, Fetched]:
        """Every group's committed offsets, as the sink serves them (OffsetFetch)."""
        sink = open_sink(self._config.sink_url, read_only=True)
        try:
            return {
                group_id: {
                    (o.topic, o.partition): (o.offset, o.leader_epoch, o.metadata)
                    for o in sink.fetch_offsets(group_id, None)
                }
                for group_id in group_ids
            }
        finally:
            sink.close()
