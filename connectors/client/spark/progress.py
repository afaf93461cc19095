"""A Spark query's Kafka progress committed as a consumer group's offsets, which Spark never
commits (SPARK-27549): after each micro-batch by a listener (:class:`CommitProgressListener`,
asynchronously) or a ``foreachBatch`` wrapper (:func:`commit_after_batch`, synchronously). The
offsets trail what the query processed, never lead it; the checkpoint stays its truth.
"""

from __future__ import annotations

import ast
import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import wait
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import (
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from connectors.client.answers import CommitResult
from connectors.client.commit_client import OffsetCommitClient
from state.coordinator.model import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)


def kafka_end_offsets(end_offset: str | Mapping[str, Any] | None) -> dict[TopicPartition, int]:
    """A Kafka source's ``endOffset`` (JSON, PySpark's Python repr of it, or the mapping) as
    committed offsets, Spark's negative markers left out; {} for any other source's."""
    if end_offset is None:
        return {}
    parsed: Any = end_offset
    if isinstance(end_offset, str):
        try:
            parsed = json.loads(end_offset)
        except ValueError:
            try:
                parsed = ast.literal_eval(end_offset)
            except (ValueError, SyntaxError):
                return {}
    if not isinstance(parsed, Mapping):
        return {}
    offsets: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(topic, str) or not isinstance(partitions, Mapping):
            return {}  # not a Kafka source: its offsets have another shape
        for partition, offset in partitions.items():
            try:
                p, o = int(partition), int(offset)
            except (TypeError, ValueError):
                return {}
            if p >= 0 and o >= 0:
                offsets[TopicPartition(topic, p)] = o
    return offsets


class CommitProgressListener(StreamingQueryListener):
    """Commits each micro-batch's Kafka end offsets for ``group_id`` (``commit_async``, with
    ``metadata``; offsets equal to the query's last ones are not sent again).

    Register with ``spark.streams.addListener``; ``query_name`` or ``query_id`` follow one query
    of the session, ``topics`` limit the partitions. ``on_commit(result, exception)`` follows
    each commit (default: log failures). Thread-safe: Spark calls it from its own threads.
    """

    def __init__(
        self,
        client: OffsetCommitClient,
        group_id: str,
        *,
        query_name: str | None = None,
        query_id: str | None = None,
        topics: Collection[str] | None = None,
        metadata: str = "",
        timeout_s: float | None = None,
        on_commit: Callable[[CommitResult | None, BaseException | None], None] | None = None,
    ) -> None:
        super().__init__()
        self.client = client
        self.group_id = group_id
        self.query_name = query_name
        self.query_id = None if query_id is None else str(query_id)
        self.topics = None if topics is None else frozenset(topics)
        self.metadata = metadata
        self.timeout_s = timeout_s
        self.on_commit = on_commit or self._log_outcome
        self._lock = threading.Lock()
        self._terminated = threading.Condition(self._lock)
        self._terminated_ids: set[str] = set()
        self._last: dict[str, dict[TopicPartition, int]] = {}
        #: The recent commits' futures, newest last, for callers that wait for them.
        self.futures: list[Any] = []

    def _follows(self, name: str | None, query_id: str) -> bool:
        if self.query_name is not None and name != self.query_name:
            return False
        return self.query_id is None or query_id == self.query_id

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        pass

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        try:
            self._on_progress(event)
        except Exception:  # a listener that raises is removed by nothing and helps no one
            log.exception("cannot commit the progress of a streaming query")

    def _on_progress(self, event: QueryProgressEvent) -> None:
        progress = event.progress
        query_id = str(progress.id)
        if not self._follows(progress.name, query_id):
            return
        offsets: dict[TopicPartition, int] = {}
        for source in progress.sources:
            for tp, offset in kafka_end_offsets(source.endOffset).items():
                if self.topics is None or tp.topic in self.topics:
                    offsets[tp] = offset
        if not offsets:
            return
        with self._lock:
            if self._last.get(query_id) == offsets:
                return
            self._last[query_id] = offsets
        values = {tp: OffsetAndMetadata(o, metadata=self.metadata) for tp, o in offsets.items()}
        future = self.client.commit_async(
            self.group_id, values, self.on_commit, timeout_s=self.timeout_s
        )
        with self._lock:
            self.futures.append(future)
            del self.futures[:-100]  # keep the recent ones only

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        with self._lock:
            self._last.pop(str(event.id), None)
            self._terminated_ids.add(str(event.id))
            self._terminated.notify_all()

    def flush(self, timeout_s: float = 60.0, *, query: Any = None) -> None:
        """Wait until every commit sent so far is answered, so that the group's offsets are
        final. With ``query`` (a stopped query, or its id) first wait for its termination event:
        its last batch's progress may arrive after ``stop()`` returned. TimeoutError after
        ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        if query is not None:
            query_id = str(getattr(query, "id", query))
            with self._terminated:
                seen = self._terminated.wait_for(
                    lambda: query_id in self._terminated_ids, timeout=timeout_s
                )
            if not seen:
                raise TimeoutError(f"query {query_id} was not reported terminated in {timeout_s} s")
        with self._lock:
            pending = list(self.futures)
        _, not_done = wait(pending, timeout=max(0.0, deadline - time.monotonic()))
        if not_done:
            raise TimeoutError(
                f"{len(not_done)} commit(s) of group {self.group_id!r} unanswered after "
                f"{timeout_s} s"
            )

    def _log_outcome(self, result: CommitResult | None, error: BaseException | None) -> None:
        if error is not None:
            log.warning(
                "committing streaming progress for group %r failed: %s", self.group_id, error
            )
        elif result is not None:
            log.debug("committed %d offset(s) for group %r", len(result.offsets), self.group_id)


def batch_offsets(batch: DataFrame) -> dict[TopicPartition, int]:
    """``max(offset) + 1`` per partition of a Kafka-source batch (one small Spark job)."""
    rows = (
        batch.groupBy("topic", "partition")
        .agg((F.max("offset") + F.lit(1)).alias("next_offset"))
        .collect()
    )
    return {TopicPartition(r["topic"], int(r["partition"])): int(r["next_offset"]) for r in rows}


def commit_after_batch(
    func: Callable[[DataFrame, int], None],
    client: OffsetCommitClient,
    group_id: str,
    *,
    metadata: str = "",
    timeout_s: float | None = None,
    raise_on_failure: bool = False,
) -> Callable[[DataFrame, int], None]:
    """Wrap a ``foreachBatch`` function: each batch's offsets, read before ``func`` runs (it may
    drop the Kafka columns), are committed after it returns; a batch that raises commits none.
    A failed commit is logged, or raised with ``raise_on_failure`` (failing the query)."""

    def run(batch: DataFrame, batch_id: int) -> None:
        offsets = batch_offsets(batch)
        func(batch, batch_id)
        if not offsets:
            return
        values = {tp: OffsetAndMetadata(o, metadata=metadata) for tp, o in offsets.items()}
        try:
            client.commit(group_id, values, timeout_s=timeout_s)
        except Exception as exc:
            if raise_on_failure:
                raise
            log.warning(
                "batch %d: committing offsets for group %r failed: %s", batch_id, group_id, exc
            )

    return run
