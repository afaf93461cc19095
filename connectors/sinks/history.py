"""The commit history: Burrow's windows and retention's deletes."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.statements import HISTORY_FILTERS
from connectors.sinks.text import original_row, original_text, stored_text
from connectors.sinks.values import CommitHistoryEntry
from state.coordinator.model import TopicPartition

log = logging.getLogger(__name__)


class CommitHistory(SinkCore):
    """The offset commits as applied (``offset_commit_history``): reads and retention."""

    def purge_history(self, older_than_ms: int, limit: int) -> int:
        """Delete at most ``limit`` history rows committed before ``older_than_ms``, in one
        short transaction; the number deleted. Callers repeat it until it returns less than
        ``limit`` (``connectors.sinks.retention``), so no single delete holds the write lock
        long enough to stall a batch."""
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

    def reclaim_space(self) -> None:
        """Return free pages to the file system where the backend needs asking (SQLite's
        incremental vacuum); PostgreSQL's autovacuum does it on its own."""

    def history(
        self,
        group_id: str,
        topic: str | None = None,
        partition: int | None = None,
        limit: int = 100,
    ) -> list[CommitHistoryEntry]:
        """The group's offset commits, newest first, at most ``limit``.

        Empty unless the writer runs with ``keep_history=True`` (a reader cannot know, so this
        reads whatever history the store holds). ``partition`` requires ``topic``.
        """
        if partition is not None and topic is None:
            raise ValueError("history: partition requires topic")
        if limit < 1:
            raise ValueError(f"history: limit must be >= 1, got {limit}")
        params: list[Any] = [stored_text(group_id)]
        if topic is not None:
            params.append(stored_text(topic))
        if partition is not None:
            params.append(int(partition))
        statement = "history:" + " ".join(HISTORY_FILTERS[len(params) - 1])
        found = self._run(statement, (*params, int(limit)))
        return [CommitHistoryEntry(*original_row(row, 0, 1, 5)) for row in found]

    def recent_history(
        self, group_id: str, per_partition: int
    ) -> dict[TopicPartition, list[CommitHistoryEntry]]:
        """Each partition's last ``per_partition`` commits of the group, newest first, in one
        query (Burrow's window of every partition at once)."""
        if per_partition < 1:
            raise ValueError(f"history: per_partition must be >= 1, got {per_partition}")
        found = self._run("recent_history", (stored_text(group_id), per_partition))
        windows: dict[TopicPartition, list[CommitHistoryEntry]] = {}
        for row in found:
            entry = CommitHistoryEntry(*original_row(row, 0, 1, 5))
            windows.setdefault(TopicPartition(entry.topic, entry.partition), []).append(entry)
        return windows

    def groups_recent_commits(
        self, group_ids: Sequence[str], per_partition: int
    ) -> dict[tuple[str, str, int], list[tuple[int, int]]]:
        """The last ``per_partition`` commits of each partition of several groups at once, as
        (offset, commit time ms), newest first, by (group, topic, partition): Burrow's windows
        for a pass over every group, fewer queries and no object per commit."""
        if per_partition < 1:
            raise ValueError(f"history: per_partition must be >= 1, got {per_partition}")
        windows: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
        if not group_ids:
            return windows
        stored = [stored_text(g) for g in group_ids]
        key: tuple[str, str, int] | None = None
        window: list[tuple[int, int]] = []
        found = self._run("groups_recent_commits", (self._bind_list(stored), per_partition))
        for group, topic, partition, offset, at in found:
            if key is None or key != (group, topic, partition):
                key, window = (group, topic, partition), []
                windows[(original_text(group), original_text(topic), partition)] = window
            window.append((offset, at))
        return windows
