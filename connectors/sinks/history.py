"""The commit history (``offset_commit_history``): Burrow's windows and retention's deletes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.statements import HISTORY_FILTERS
from connectors.sinks.text import original_row, original_text, stored_text
from connectors.sinks.values import CommitHistoryEntry
from state.coordinator.model import TopicPartition


def _at_least_one(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"history: {name} must be >= 1, got {value}")


def _entry(row: Sequence[Any]) -> CommitHistoryEntry:
    return CommitHistoryEntry(*original_row(row, 0, 1, 5))


class CommitHistory(SinkCore):
    """The offset commits as applied, kept when the writer runs with ``keep_history``."""

    def purge_history(self, older_than_ms: int, limit: int) -> int:
        """Delete at most ``limit`` rows committed before ``older_than_ms`` in one short
        transaction (callers repeat it: ``retention``); the number deleted."""
        self._check_writable()
        if limit < 1:
            raise ValueError(f"purge_history: limit must be >= 1, got {limit}")
        deleted = 0

        def purge(tx: Statements) -> bool:
            nonlocal deleted
            cursor = tx.execute(self._sql["purge_history"], (int(older_than_ms), int(limit)))
            deleted = max(int(getattr(cursor, "rowcount", 0) or 0), 0)
            return True

        self._write(purge, "cannot delete expired history")
        return deleted

    def thinnable_history(
        self, spacing_ms: int, since_ms: int, before_ms: int, limit: int
    ) -> list[tuple[int, int, int]]:
        """The first ``limit`` in commit time (batch id, seq, commit time) of the commits timed
        in [``since_ms``, ``before_ms``) that a later commit of their group-partition shares a
        bucket of ``spacing_ms`` with (``state.commit_history``): the rows thinning deletes. The
        last one's time is where the next read of the range goes on from."""
        _at_least_one("spacing_ms", spacing_ms)
        _at_least_one("limit", limit)
        params = (int(since_ms), int(before_ms), int(spacing_ms), int(spacing_ms), int(limit))
        return [(int(b), int(s), int(t)) for b, s, t in self._run("thinnable_history", params)]

    def delete_history(self, keys: Sequence[tuple[int, int]]) -> int:
        """Delete the history rows of ``keys`` (batch id, seq) in one short transaction,
        fenced as every write; the number deleted."""
        self._check_writable()
        deleted = 0
        if not keys:
            return deleted

        def delete(tx: Statements) -> bool:
            nonlocal deleted
            # sqlite3 answers with a cursor; psycopg's cursor (``tx``) holds the total.
            cursor = tx.executemany(self._sql["delete_history_row"], list(keys)) or tx
            deleted = max(int(getattr(cursor, "rowcount", 0) or 0), 0)
            return True

        self._write(delete, "cannot thin history")
        return deleted

    def history_since_batch(self, batch_id: int) -> tuple[int | None, int | None]:
        """Of the commits applied after ``batch_id``: the oldest commit time and the newest
        batch id (None, None when there are none)."""
        ((oldest, newest),) = self._run("history_since_batch", (int(batch_id),))
        return (
            None if oldest is None else int(oldest),
            None if newest is None else int(newest),
        )

    def history_as_of(self, group_id: str, at_ms: int) -> list[CommitHistoryEntry]:
        """Each partition's commit of the group in force at ``at_ms`` as the history keeps
        it: its last at or before ``at_ms`` (commit time, then log order), by topic and
        partition; partitions without one are absent."""
        return [
            _entry(row) for row in self._run("history_as_of", (stored_text(group_id), int(at_ms)))
        ]

    def history_partitions_between(
        self, group_id: str, after_ms: int, before_ms: int
    ) -> set[TopicPartition]:
        """The group's partitions with a commit kept timed in (``after_ms``, ``before_ms``)."""
        rows = self._run(
            "history_partitions_between", (stored_text(group_id), int(after_ms), int(before_ms))
        )
        return {TopicPartition(original_text(t), int(p)) for t, p in rows}

    def reclaim_space(self) -> None:
        """Return free pages to the file system where the backend needs asking (SQLite)."""

    def history(
        self,
        group_id: str,
        topic: str | None = None,
        partition: int | None = None,
        limit: int = 100,
    ) -> list[CommitHistoryEntry]:
        """The group's offset commits, newest first, at most ``limit`` (``partition`` requires
        ``topic``)."""
        if partition is not None and topic is None:
            raise ValueError("history: partition requires topic")
        _at_least_one("limit", limit)
        params: list[Any] = [stored_text(group_id)]
        if topic is not None:
            params.append(stored_text(topic))
        if partition is not None:
            params.append(int(partition))
        statement = "history:" + " ".join(HISTORY_FILTERS[len(params) - 1])
        return [_entry(row) for row in self._run(statement, (*params, int(limit)))]

    def recent_history(
        self, group_id: str, per_partition: int
    ) -> dict[TopicPartition, list[CommitHistoryEntry]]:
        """Each partition's last ``per_partition`` commits of the group, newest first, in one
        query (Burrow's window of every partition at once)."""
        _at_least_one("per_partition", per_partition)
        windows: dict[TopicPartition, list[CommitHistoryEntry]] = {}
        for row in self._run("recent_history", (stored_text(group_id), per_partition)):
            entry = _entry(row)
            windows.setdefault(TopicPartition(entry.topic, entry.partition), []).append(entry)
        return windows

    def groups_recent_commits(
        self, group_ids: Sequence[str], per_partition: int
    ) -> dict[tuple[str, str, int], list[tuple[int, int]]]:
        """The last ``per_partition`` commits of each partition of several groups, as (offset,
        commit time ms), newest first, by (group, topic, partition): no object per commit."""
        _at_least_one("per_partition", per_partition)
        windows: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
        if not group_ids:
            return windows
        stored = self._bind_list([stored_text(g) for g in group_ids])
        key: tuple[str, str, int] | None = None
        window: list[tuple[int, int]] = []
        for group, topic, partition, offset, at in self._run(
            "groups_recent_commits", (stored, per_partition)
        ):
            if key != (group, topic, partition):
                key, window = (group, topic, partition), []
                windows[(original_text(group), original_text(topic), partition)] = window
            window.append((offset, at))
        return windows
