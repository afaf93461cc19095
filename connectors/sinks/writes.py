"""Writing the compacted offsets: micro-batches and rebuilt shard state."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from connectors.sinks.batch import (
    GROUP_KEY_COLUMNS,
    GROUP_UPSERT_COLUMNS,
    HISTORY_COLUMNS,
    MEMBER_KEY_COLUMNS,
    OFFSET_KEY_COLUMNS,
    OFFSET_UPSERT_COLUMNS,
    SEQ,
    PreparedBatch,
    prepare_batch,
    prepare_members,
    rows,
)
from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.status import progress_values
from connectors.sinks.text import stored_text
from connectors.sinks.values import (
    BatchProgress,
    SinkError,
    SinkWriteError,
)

log = logging.getLogger(__name__)


class Writes(SinkCore):
    """Micro-batches, rebuilt shard state and their progress row, each in one transaction."""

    def write_batch(
        self,
        batch_id: int,
        records: pa.Table,
        progress: BatchProgress,
        members: pa.Table | None = None,
    ) -> bool:
        """Apply one micro-batch and its progress atomically; False if ``batch_id`` was done.

        ``records`` follows ``RECORD_FRAME_SCHEMA`` in log order. Returns False, changing
        nothing, when ``batch_id`` is at or below the last committed batch id (read under the
        transaction's write lock, so two writers cannot both apply a batch). Raises ValueError
        (before touching the store) for records that break the frame contract, and
        :class:`SinkWriteError` when the store fails; either way nothing of the batch is kept.
        A connection found dead before the batch reached the store is replaced and the batch
        runs on the new one; the sink retries nothing else (Spark replays the batch).
        ``members`` (a mirror's consumer-protocol members, ``MEMBER_SCHEMA``) are applied in
        the same transaction.
        """
        _check_write_args(batch_id, progress)
        self._check_writable()
        prepared = prepare_batch(records)
        member_upserts, member_deletes = prepare_members(members)
        started = time.perf_counter()
        begun = False
        last_batch_id = -1

        def apply(tx: Statements) -> bool:
            nonlocal begun, last_batch_id
            last_batch_id = self._last_batch_id(tx)
            begun = True
            if batch_id <= last_batch_id:
                return False
            self._apply_records(tx, batch_id, prepared)
            if member_upserts.num_rows:
                tx.executemany(
                    self._sql["upsert_member"], rows(member_upserts, MEMBER_KEY_COLUMNS, batch_id)
                )
            if member_deletes.num_rows:
                tx.executemany(self._sql["delete_member"], rows(member_deletes, MEMBER_KEY_COLUMNS))
            self._count_commits(tx, progress, prepared)
            self._record_progress(tx, progress)
            return True

        # A connection that died while idle (server restart, idle timeout) before the batch
        # reached the server is replaced and the batch runs again: nothing of it was written.
        self._on_connection(
            lambda conn: self._transaction(conn, apply),
            f"batch {batch_id} not written (replaying it is safe)",
            retry=lambda: not begun,
            error=SinkWriteError,
        )
        if batch_id <= last_batch_id:
            _log_skipped_batch(self.url, batch_id, last_batch_id)
            return False
        log.debug(
            "%s: batch %d: %d offset upserts, %d offset deletes, %d group changes in %.1f ms",
            self.url,
            batch_id,
            prepared.offset_upserts.num_rows,
            prepared.offset_deletes.num_rows,
            prepared.group_upserts.num_rows + prepared.group_deletes.num_rows,
            (time.perf_counter() - started) * 1000,
        )
        return True

    def write_snapshot(self, batch_id: int, records: pa.Table) -> bool:
        """Upsert a rebuilt shard's state (its records, ``RECORD_FRAME_SCHEMA``) ahead of batch
        ``batch_id``, in a transaction of its own; False, changing nothing, when that batch was
        already written (a replay).

        A rebuild carries every shard's whole state in its first batch: written shard by shard,
        the driver holds one shard's rows at a time instead of millions. Readers see none of it
        as an answer: the sink is LOADING until the rebuild's batch is written. No history: a
        snapshot is state, not commits.
        """
        self._check_writable()
        prepared = prepare_batch(records)
        written = False

        def apply(tx: Statements) -> bool:
            nonlocal written
            if batch_id <= self._last_batch_id(tx):
                return False
            self._write_state(tx, batch_id, prepared)
            written = True
            return True

        self._write(apply, f"snapshot for batch {batch_id} not written")
        return written

    def write_loaded(self, records: pa.Table) -> None:
        """Upsert a rebuilt shard's state (its records, ``RECORD_FRAME_SCHEMA``) in a transaction
        of its own, from the process that rebuilt it, while the rest of the rebuild goes on.

        Unlike :meth:`write_snapshot` it needs no batch id (a Spark worker does not know it):
        a shard's state loaded from the offsets topic holds everything the sink has of that
        shard, because every batch appends to the topic before it writes the sink, so writing
        it again (a replayed rebuild, a retried task) writes the same rows. Rows are tagged with
        the batch after the last one written: the batch that loads them.
        """
        self._check_writable()
        prepared = prepare_batch(records)

        def apply(tx: Statements) -> bool:
            self._write_state(tx, self._last_batch_id(tx) + 1, prepared)
            return True

        self._write(apply, "rebuilt shard state not written")

    def _last_batch_id(self, tx: Statements) -> int:
        """The last committed batch id, read with the lock that serialises writers."""
        found = tx.execute(self._sql["last_batch"]).fetchone()
        if found is None:
            raise SinkError(f"{self.url}: the coordinator status row is missing")
        return int(found[0])

    def _apply_records(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """Offsets, then group metadata, then (if kept) history; every row tagged ``batch_id``."""
        self._write_state(tx, batch_id, batch)
        if self.keep_history and batch.history.num_rows:
            history = rows(batch.history, (SEQ, *HISTORY_COLUMNS))
            self._write_history(tx, ((batch_id, *row) for row in history), batch.history.num_rows)

    def _write_state(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """The batch's offsets, then its group metadata, every row tagged ``batch_id``."""
        self._write_offsets(tx, batch_id, batch)
        self._write_groups(tx, batch_id, batch)

    def _write_groups(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """Upsert and delete the batch's group metadata rows."""
        if batch.group_upserts.num_rows:
            tx.executemany(
                self._sql["upsert_group"],
                rows(batch.group_upserts, GROUP_UPSERT_COLUMNS, batch_id),
            )
        if batch.group_deletes.num_rows:
            tx.executemany(self._sql["delete_group"], rows(batch.group_deletes, GROUP_KEY_COLUMNS))

    def _write_offsets(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """Upsert and delete the batch's offsets, one statement per row (a backend may bulk)."""
        if batch.offset_upserts.num_rows:
            tx.executemany(
                self._sql["upsert_offset"],
                rows(batch.offset_upserts, OFFSET_UPSERT_COLUMNS, batch_id),
            )
        if batch.offset_deletes.num_rows:
            tx.executemany(
                self._sql["delete_offset"], rows(batch.offset_deletes, OFFSET_KEY_COLUMNS)
            )

    def _write_history(
        self, tx: Statements, history: Iterable[tuple[Any, ...]], count: int
    ) -> None:
        """Insert ``count`` history rows ``(batch_id, seq, *HISTORY_COLUMNS)`` (a backend may
        bulk)."""
        tx.executemany(self._sql["insert_history"], history)

    def _count_commits(self, tx: Statements, progress: BatchProgress, batch: PreparedBatch) -> None:
        """Add the batch's commits to each group's counter; forget the counter of a group whose
        last offset this batch deleted (its rows stay bounded by the groups there are)."""
        if progress.group_commits:
            now = self._clock()
            tx.executemany(
                self._sql["add_group_commits"],
                [
                    (stored_text(group), int(count), now)
                    for group, count in sorted(progress.group_commits.items())
                    if count > 0
                ],
            )
        if batch.offset_deletes.num_rows:
            deleted = set(batch.offset_deletes.column("group_id").to_pylist())
            tx.executemany(self._sql["forget_group_commits"], [(g, g) for g in sorted(deleted)])

    def _record_progress(self, tx: Statements, progress: BatchProgress) -> None:
        tx.execute(self._sql["progress"], progress_values(progress, self._clock()))


def _check_write_args(batch_id: int, progress: BatchProgress) -> None:
    """Validate ``write_batch``'s arguments (Spark batch ids start at 0)."""
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ValueError(f"batch_id must be an int >= 0, got {batch_id!r}")
    if progress.batch_id != batch_id:
        raise ValueError(f"progress is for batch {progress.batch_id}, not batch {batch_id}")


def _log_skipped_batch(url: str, batch_id: int, last_batch_id: int) -> None:
    """Log a batch id at or below the last committed one (returned False, nothing written)."""
    if batch_id == last_batch_id:
        # The normal replay of the last batch after a restart.
        log.info("%s: batch %d already committed, skipped", url, batch_id)
    else:
        log.warning(
            "%s: batch %d is older than the last committed batch %d and was skipped; if the "
            "job's checkpoint was reset, its batch ids restart at 0 and the sink ignores them "
            "until they pass %d",
            url,
            batch_id,
            last_batch_id,
            last_batch_id,
        )
