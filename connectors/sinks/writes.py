"""Writing the compacted offsets: micro-batches and rebuilt shard state."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
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
    prepare_snapshot,
    rows,
)
from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.status import progress_values
from connectors.sinks.text import stored_text
from connectors.sinks.values import BatchProgress, SinkError, SinkWriteError

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
        """Apply one micro-batch (``RECORD_FRAME_SCHEMA``, log order), its ``members`` (a
        mirror's, ``MEMBER_SCHEMA``) and its progress in one transaction; False, changing
        nothing, when ``batch_id`` is at or below the last committed one. ValueError for records
        breaking the frame contract, SinkWriteError when the store fails, LeaseLost when this
        sink's lease was taken over; either way nothing of the batch is kept."""
        if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
            raise ValueError(f"batch_id must be an int >= 0, got {batch_id!r}")
        if progress.batch_id != batch_id:
            raise ValueError(f"progress is for batch {progress.batch_id}, not batch {batch_id}")
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
            self._write_state(tx, batch_id, prepared)
            if self.keep_history and prepared.history.num_rows:
                history = rows(prepared.history, (SEQ, *HISTORY_COLUMNS))
                count = prepared.history.num_rows
                self._write_history(tx, ((batch_id, *row) for row in history), count)
            self._each_row(tx, "upsert_member", member_upserts, MEMBER_KEY_COLUMNS, batch_id)
            self._each_row(tx, "delete_member", member_deletes, MEMBER_KEY_COLUMNS)
            self._count_commits(tx, progress, prepared)
            self._record_progress(tx, progress)
            return True

        # A connection that died while idle is replaced and the batch runs again on a new one:
        # nothing of it reached the server.
        self._write(
            apply,
            f"batch {batch_id} not written (replaying it is safe)",
            retry=lambda: not begun,
            error=SinkWriteError,
        )
        if batch_id == last_batch_id:  # the normal replay of the last batch after a restart
            log.info("%s: batch %d already committed, skipped", self.url, batch_id)
            return False
        if batch_id < last_batch_id:
            log.warning(
                "%s: batch %d is older than the last committed batch %d and was skipped; if the"
                " job's checkpoint was reset, its batch ids restart at 0 and the sink ignores them"
                " until they pass %d",
                *(self.url, batch_id, last_batch_id, last_batch_id),
            )
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
        """Upsert a rebuilt shard's state ahead of batch ``batch_id`` in a transaction of its
        own, without history; False, changing nothing, when that batch was already written."""
        self._check_writable()
        prepared = prepare_snapshot(records)
        written = False

        def apply(tx: Statements) -> bool:
            nonlocal written
            written = batch_id > self._last_batch_id(tx)
            if written:
                self._write_state(tx, batch_id, prepared)
            return written

        self._write(apply, f"snapshot for batch {batch_id} not written")
        return written

    def write_loaded(self, records: pa.Table) -> None:
        """Upsert a rebuilt shard's state from the Spark worker that loaded it, tagged with the
        batch after the last one written (the one loading it). Idempotent: every batch appends
        to the offsets topic before it writes the sink, so a replay writes the same rows."""
        self._check_writable()
        prepared = prepare_snapshot(records)

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

    def _write_state(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """The batch's offsets, then its group metadata, every row tagged ``batch_id``."""
        self._write_offsets(tx, batch_id, batch)
        self._each_row(tx, "upsert_group", batch.group_upserts, GROUP_UPSERT_COLUMNS, batch_id)
        self._each_row(tx, "delete_group", batch.group_deletes, GROUP_KEY_COLUMNS)

    def _write_offsets(self, tx: Statements, batch_id: int, batch: PreparedBatch) -> None:
        """Upsert and delete the batch's offsets, one statement per row (a backend may bulk)."""
        self._each_row(tx, "upsert_offset", batch.offset_upserts, OFFSET_UPSERT_COLUMNS, batch_id)
        self._each_row(tx, "delete_offset", batch.offset_deletes, OFFSET_KEY_COLUMNS)

    def _each_row(
        self, tx: Statements, name: str, table: pa.Table, columns: Sequence[str], *extra: Any
    ) -> None:
        """Statement ``name`` once per row of ``table`` (its ``columns``, then ``extra``)."""
        if table.num_rows:
            tx.executemany(self._sql[name], rows(table, columns, *extra))

    def _write_history(
        self, tx: Statements, history: Iterable[tuple[Any, ...]], count: int
    ) -> None:
        """Insert ``count`` rows ``(batch_id, seq, *HISTORY_COLUMNS)`` (a backend may bulk)."""
        tx.executemany(self._sql["insert_history"], history)

    def _count_commits(self, tx: Statements, progress: BatchProgress, batch: PreparedBatch) -> None:
        """Add the batch's commits to each group's counter; forget the counter of a group whose
        last offset the batch deleted."""
        if progress.group_commits:
            now = self._clock()
            counts = sorted(progress.group_commits.items())
            added = [(stored_text(group), int(n), now) for group, n in counts if n > 0]
            tx.executemany(self._sql["add_group_commits"], added)
        if batch.offset_deletes.num_rows:
            deleted = set(batch.offset_deletes.column("group_id").to_pylist())
            tx.executemany(self._sql["forget_group_commits"], [(g, g) for g in sorted(deleted)])

    def _record_progress(self, tx: Statements, progress: BatchProgress) -> None:
        tx.execute(self._sql["progress"], progress_values(progress, self._clock()))
