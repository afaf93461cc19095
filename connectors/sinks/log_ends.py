"""Log-end offsets as the mirror reads them, and their samples over time (lag in seconds)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.log_end_samples import DEFAULT_KEEP, LogEndSample, thin
from connectors.sinks.text import original_text, stored_text
from connectors.sinks.values import LogEndOffset
from state.coordinator.model import TopicPartition

log = logging.getLogger(__name__)


class LogEndOffsets(SinkCore):
    """Log-end offsets read from the cluster, and their samples over time."""

    def write_log_end_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Store the log-end offsets of ``(topic, partition)``s as read from the cluster now.

        Not part of any batch: a mirror refreshes them on an interval so readers compute lag
        without a connection to the mirrored cluster.
        """
        self._check_writable()
        if not offsets:
            return
        now = self._clock()
        params = [(stored_text(t), int(p), int(o), now) for (t, p), o in offsets.items()]

        def upsert(tx: Statements) -> bool:
            tx.executemany(self._sql["upsert_log_end"], params)
            self._merge_samples(tx, offsets, now, DEFAULT_KEEP)
            return True

        self._write(upsert, "cannot write log-end offsets")

    def record_log_end_samples(
        self,
        offsets: Mapping[tuple[str, int], int],
        at_ms: int | None = None,
        keep: int = DEFAULT_KEEP,
    ) -> None:
        """Add log-end offsets read at ``at_ms`` (default: now) to each partition's table of
        (offset, time) points (``connectors.sinks.log_end_samples``): a repeated offset extends
        its point, a new one adds a point, and a partition keeps at most ``keep`` points
        (thinned in the same transaction). Several writers may sample the same partitions:
        points merge by offset, and a sample older than a partition's newest point is ignored.
        :meth:`write_log_end_offsets` records its offsets here too.
        """
        self._check_writable()
        if not offsets:
            return
        at = self._clock() if at_ms is None else int(at_ms)

        def record(tx: Statements) -> bool:
            self._merge_samples(tx, offsets, at, keep)
            return True

        self._write(record, "cannot write log-end samples")

    def _merge_samples(
        self, tx: Statements, offsets: Mapping[tuple[str, int], int], at_ms: int, keep: int
    ) -> None:
        """Merge one round of samples into the table inside ``tx``, reading only each
        partition's newest point and count (one aggregate), and a partition's points only
        when it has outgrown ``keep`` by a fifth (then it is thinned back to ``keep``): the
        same points as :func:`merge_sample` then :func:`thin`, at a fraction of the reads."""
        heads = {
            (topic, int(partition)): (int(newest), int(last), int(count))
            for topic, partition, newest, last, count in tx.execute(
                self._sql["sample_heads"]
            ).fetchall()
        }
        upserts: list[tuple[Any, ...]] = []
        restarted: list[tuple[Any, ...]] = []
        grown: list[tuple[str, int]] = []
        for (raw_topic, raw_partition), raw_offset in offsets.items():
            topic, partition, offset = stored_text(raw_topic), int(raw_partition), int(raw_offset)
            head = heads.get((topic, partition))
            if head is not None:
                newest, last, count = head
                if at_ms < last:
                    continue  # another writer sampled it later: time only moves forward
                if offset < newest:
                    restarted.append((topic, partition))  # recreated or truncated
                elif offset > newest and count + 1 > keep + keep // 5:
                    grown.append((topic, partition))
            upserts.append((topic, partition, offset, at_ms, at_ms))
        if restarted:
            tx.executemany(self._sql["delete_partition_samples"], restarted)
        if upserts:
            tx.executemany(self._sql["upsert_sample"], upserts)
        deletes: list[tuple[Any, ...]] = []
        for topic, partition in grown:
            points = [
                LogEndSample(int(o), int(first), int(last))
                for o, first, last in tx.execute(
                    self._sql["partition_samples"], (topic, partition)
                ).fetchall()
            ]
            kept = {p.offset for p in thin(points, keep)}
            deletes.extend((topic, partition, p.offset) for p in points if p.offset not in kept)
        if deletes:
            tx.executemany(self._sql["delete_sample"], deletes)

    def log_end_samples_since(self, since_ms: int) -> list[tuple[str, int, LogEndSample]]:
        """Points seen at or after ``since_ms`` (``last_seen_ms``), as (topic, partition,
        point): what a reader that loaded the table before needs to catch up."""
        return [
            (original_text(topic), int(partition), LogEndSample(int(o), int(first), int(last)))
            for topic, partition, o, first, last in self._run("samples_since", (int(since_ms),))
        ]

    def log_end_samples(
        self, topics: Iterable[str] | None = None
    ) -> dict[TopicPartition, list[LogEndSample]]:
        """Each partition's (offset, time) points, oldest first (of every topic, or of
        ``topics``): what lag in seconds interpolates (``log_end_samples.lag_ms``)."""
        wanted = None if topics is None else {stored_text(t) for t in topics}
        found: dict[TopicPartition, list[LogEndSample]] = {}
        for topic, partition, offset, first, last in self._run("samples"):
            if wanted is None or topic in wanted:
                found.setdefault(TopicPartition(original_text(topic), int(partition)), []).append(
                    LogEndSample(int(offset), int(first), int(last))
                )
        return found

    def log_end_offsets(
        self, topics: Iterable[str] | None = None
    ) -> dict[TopicPartition, LogEndOffset]:
        """Stored log-end offsets (of every topic, or of ``topics``), with when they were read."""
        wanted = None if topics is None else set(topics)
        found = {}
        for topic, partition, offset, updated in self._run("log_end"):
            entry = LogEndOffset(original_text(topic), int(partition), int(offset), int(updated))
            if wanted is None or entry.topic in wanted:
                found[entry.topic_partition] = entry
        return found
