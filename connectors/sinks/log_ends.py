"""Log-end offsets as the mirror reads them, and their samples over time (lag in seconds)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.log_end_samples import DEFAULT_KEEP, LogEndSample, thin
from connectors.sinks.text import original_text, stored_text
from connectors.sinks.values import LogEndOffset
from state.coordinator.model import TopicPartition


def _sample(offset: Any, first: Any, last: Any) -> LogEndSample:
    return LogEndSample(int(offset), int(first), int(last))


class LogEndOffsets(SinkCore):
    """Log-end offsets read from the cluster, and their samples over time."""

    def write_log_end_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Store the log-end offsets of ``(topic, partition)``s as read from the cluster now,
        and sample them: readers compute lag without a connection to the cluster."""
        self._write_log_ends(offsets, None, DEFAULT_KEEP, latest=True)

    def record_log_end_samples(
        self,
        offsets: Mapping[tuple[str, int], int],
        at_ms: int | None = None,
        keep: int = DEFAULT_KEEP,
    ) -> None:
        """Add log-end offsets read at ``at_ms`` (default: now) to each partition's points
        (``log_end_samples.merge_sample``), at most ``keep`` a partition. Writers may sample the
        same partitions: points merge by offset, a sample older than the newest is ignored."""
        self._write_log_ends(offsets, at_ms, keep, latest=False)

    def _write_log_ends(
        self, offsets: Mapping[tuple[str, int], int], at_ms: int | None, keep: int, latest: bool
    ) -> None:
        self._check_writable()
        if not offsets:
            return
        at = self._clock() if at_ms is None else int(at_ms)

        def write(tx: Statements) -> bool:
            if latest:
                params = [(stored_text(t), int(p), int(o), at) for (t, p), o in offsets.items()]
                tx.executemany(self._sql["upsert_log_end"], params)
            self._merge_samples(tx, offsets, at, keep)
            return True

        what = "log-end offsets" if latest else "log-end samples"
        self._write(write, f"cannot write {what}")

    def _merge_samples(
        self, tx: Statements, offsets: Mapping[tuple[str, int], int], at_ms: int, keep: int
    ) -> None:
        """Merge one round of samples inside ``tx``: the points of ``merge_sample`` then
        ``thin``, reading each partition's newest point and count (one aggregate), and its
        points only once it has outgrown ``keep`` by a fifth."""
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
            found = tx.execute(self._sql["partition_samples"], (topic, partition)).fetchall()
            points = [_sample(*row) for row in found]
            kept = {p.offset for p in thin(points, keep)}
            deletes.extend((topic, partition, p.offset) for p in points if p.offset not in kept)
        if deletes:
            tx.executemany(self._sql["delete_sample"], deletes)

    def log_end_samples_since(self, since_ms: int) -> list[tuple[str, int, LogEndSample]]:
        """Points seen at or after ``since_ms``, as (topic, partition, point): what a reader
        that loaded the table before needs to catch up."""
        return [
            (original_text(topic), int(partition), _sample(*point))
            for topic, partition, *point in self._run("samples_since", (int(since_ms),))
        ]

    def log_end_samples(
        self, topics: Iterable[str] | None = None
    ) -> dict[TopicPartition, list[LogEndSample]]:
        """Each partition's points, oldest first (of every topic, or of ``topics``)."""
        wanted = None if topics is None else {stored_text(t) for t in topics}
        found: dict[TopicPartition, list[LogEndSample]] = {}
        for topic, partition, *point in self._run("samples"):
            if wanted is None or topic in wanted:
                tp = TopicPartition(original_text(topic), int(partition))
                found.setdefault(tp, []).append(_sample(*point))
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
