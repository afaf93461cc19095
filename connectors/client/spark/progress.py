"""Committing a Spark Structured Streaming query's Kafka progress as a consumer group's offsets.

Spark's Kafka source keeps its position in the checkpoint and never commits it to Kafka
(SPARK-27549), so lag monitors and a consumer taking over cannot see how far a query got. Two
ways to commit it, through :class:`OffsetCommitClient`:

* :class:`CommitProgressListener`, a ``StreamingQueryListener``: after each micro-batch it
  commits every Kafka source's ``endOffset`` (``{"topic": {"0": 42}}``: the next offset to read,
  what Kafka stores as committed) asynchronously, like ``commitAsync``;
* :func:`commit_after_batch`, a ``foreachBatch`` wrapper: commits ``max(offset) + 1`` per
  partition of the batch synchronously after the batch function returned.

Either way the committed offsets trail what the query processed, never lead it. The checkpoint
stays the query's source of truth; the group's offsets are what the outside world sees, and
what a query on a new checkpoint starts from (:mod:`connectors.client.spark.resume`).
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
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from connectors.client.answers import CommitResult
from connectors.client.commit_client import OffsetCommitClient
from state.coordinator.model import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["CommitProgressListener", "commit_after_batch", "kafka_end_offsets"]


def kafka_end_offsets(end_offset: str | Mapping[str, Any] | None) -> dict[TopicPartition, int]:
    """A Kafka source's ``endOffset`` as committed offsets; {} for any other source's.

    Accepts the JSON text Spark reports (``{"orders": {"0": 42, "1": 17}}``), the Python repr
    PySpark produces from a parsed progress, or the mapping itself. Partitions with a negative
    offset (Spark's -1/-2 "latest"/"earliest" markers, never a real position) are left out.
    """
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
    """Commits each micro-batch's Kafka end offsets for ``group_id``.

    Register with ``spark.streams.addListener(listener)``. A listener sees every query of the
    session: give ``query_name`` (or ``query_id``) to follow one, and ``topics`` to commit only
    those topics' partitions. Commits are asynchronous (``commit_async``) with ``metadata``
    attached; a batch whose offsets equal the last ones committed for that query is not
    committed again. ``on_commit(result, exception)`` is called after each commit (default:
    log failures). Spark calls listeners from its own threads, so this class locks its state.
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
        #: Commits sent so far (the futures of ``commit_async``), newest last; for callers that
        #: want to wait for them (tests, shutdown).
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

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        pass

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        with self._lock:
            self._last.pop(str(event.id), None)
            self._terminated_ids.add(str(event.id))
            self._terminated.notify_all()

    def flush(self, timeout_s: float = 60.0, *, query: Any = None) -> None:
        """Wait until every commit sent so far is answered (applied, or failed), so that the
        group's offsets are final — e.g. before the group is handed to another consumer or a
        query starts from it (:mod:`connectors.client.spark.resume`).

        With ``query`` (a stopped ``StreamingQuery``, or its id) it first waits until Spark has
        reported that query's termination to this listener: Spark reports progress
        asynchronously, so a query's last batch may reach the listener after ``stop()``
        returned, and its termination comes after it. Raises TimeoutError after ``timeout_s``.
        """
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
    """``max(offset) + 1`` per (topic, partition) of a Kafka-source batch: the offsets to commit
    once the batch is processed. Runs one small aggregation job over ``batch``."""
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
    """Wrap a ``foreachBatch`` function so that each batch's offsets are committed after it.

    The offsets are computed before ``func`` runs (``func`` may drop the Kafka columns) and
    committed synchronously after it returns; a batch that raises commits nothing. A failed
    commit is logged, or raised when ``raise_on_failure`` (which fails the query). Persist the
    batch inside the query if reading it twice from Kafka is too costly.
    """

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
