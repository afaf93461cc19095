"""What every part of the sink shares: its connection, lock, and the backend's hooks."""

from __future__ import annotations

import contextlib
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

from connectors.closing import CloseOnExit
from connectors.sinks.tables import (
    TableNames,
)
from connectors.sinks.values import (
    SinkError,
)

log = logging.getLogger(__name__)


class Statements(Protocol):
    """What a transaction runs statements on: a sqlite3 connection or a psycopg cursor."""

    def execute(self, statement: Any, params: Any = ..., /) -> Any: ...

    def executemany(self, statement: Any, params: Any, /) -> Any: ...


class SinkCore(ABC, CloseOnExit):
    """The connection, its lock and the backend's hooks that every part of the sink shares."""

    #: The sink's URL with secrets masked: the only form used in messages and logs.
    url: str
    #: Whether ``write_batch`` appends offset records to ``offset_commit_history``.
    keep_history: bool
    #: A read-only sink runs no DDL and refuses every write.
    read_only: bool
    #: The driver's base exception: what the backend's connection raises.
    _driver_error: ClassVar[type[Exception]]
    _sql: dict[str, Any]

    def __init__(
        self,
        url: str,
        *,
        table_prefix: str,
        keep_history: bool,
        read_only: bool,
        clock: Callable[[], int],
    ) -> None:
        self.url = url
        self.keep_history = keep_history
        self.read_only = read_only
        self._clock = clock
        self._names = TableNames(table_prefix)
        # One connection per sink, serialised by a lock: foreachBatch writes from one driver
        # thread, but the same process may read (e.g. a status endpoint) from another.
        self._lock = threading.RLock()
        self._conn: Any = None

    # --- the backend's hooks -------------------------------------------------------------------

    @abstractmethod
    def _connect(self) -> Any:
        """A new connection, ready for use; SinkError (URL redacted) when it cannot be made."""

    @abstractmethod
    def _lost(self, conn: Any) -> bool:
        """Whether ``conn`` is known to be dead (the server or the network dropped it)."""

    @abstractmethod
    def _baseline_statements(self) -> list[Any]:
        """DDL creating schema 1's tables if missing (``schema.BASELINE``), in order."""

    @abstractmethod
    def _migration_statements(self, version: int) -> list[Any]:
        """DDL of the step that brings schema ``version - 1`` to ``version``, in order."""

    @abstractmethod
    def _table_exists_query(self, table: str) -> tuple[Any, Sequence[Any]]:
        """A statement and its parameters returning a row only if ``table`` (unquoted, in the
        sink's schema) exists."""

    def _lock_schema(self, tx: Statements) -> None:
        """Serialise concurrent migrations of the same tables inside ``tx`` (and create the
        namespace the tables live in). SQLite's ``BEGIN IMMEDIATE`` already does."""

    @abstractmethod
    def _transaction(self, conn: Any, body: Callable[[Statements], bool]) -> None:
        """Run ``body`` in one write transaction on ``conn``.

        Commits when ``body`` returns True; when it returns False nothing was written and the
        backend may commit or roll back. Rolls back and re-raises on any exception.
        """

    @abstractmethod
    def _run(
        self, statement: Any, params: Sequence[Any] = (), *, action: str = "read failed"
    ) -> list[tuple[Any, ...]]:
        """Run one statement on its own (no batch transaction) and return its rows.

        Takes the lock; raises SinkError ``"<url>: <action>: <driver message>"`` on failure.
        """

    @abstractmethod
    def _read_chunks(
        self, statement: Any, consume: Callable[[list[tuple[Any, ...]]], None], size: int
    ) -> None:
        """Run one read statement (no parameters) and hand its rows to ``consume``, ``size`` at
        a time: a big read holds one chunk of Python rows at a time, not all of them (less
        memory, and less work for the garbage collector). Takes the lock; SinkError as
        :meth:`_run`."""

    @abstractmethod
    def _fetch_partitions(
        self, group_id: str, wanted: Sequence[tuple[str, int]]
    ) -> list[tuple[Any, ...]]:
        """Offset rows (``fetch_group``'s columns) of ``group_id`` for at least the ``wanted``
        (topic, partition) pairs, read in one snapshot; extra rows are ignored."""

    @abstractmethod
    def _history_query(self, conditions: Sequence[str]) -> Any:
        """The history SELECT filtered by ``column = <param>`` for each of ``conditions``,
        newest first, with a final ``LIMIT <param>``."""

    @abstractmethod
    def _recent_history_query(self) -> Any:
        """The history SELECT of one group (param 1) keeping each partition's newest rows up
        to param 2, by topic and partition, newest first within each."""

    @abstractmethod
    def _groups_recent_commits(
        self, group_ids: Sequence[str], per_partition: int
    ) -> list[tuple[Any, ...]]:
        """(group, topic, partition, offset, commit time) of the stored ``group_ids``' history:
        each partition's newest up to ``per_partition``, by group, topic and partition, newest
        first within each; in one snapshot."""

    # --- the connection ------------------------------------------------------------------------

    def _connection(self) -> Any:
        """The open connection, replacing one known to be lost; call with the lock held."""
        conn = self._conn
        if conn is not None and self._lost(conn):
            log.warning("%s: connection lost; reconnecting", self.url)
            self._discard()
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _discard(self) -> None:
        """Drop a connection in an unknown state; the next call opens a fresh one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(self._driver_error):
                conn.close()

    def close(self) -> None:
        """Close the connection; the sink must not be used afterwards."""
        with self._lock:
            self._discard()

    def _check_writable(self) -> None:
        if self.read_only:
            raise SinkError(f"{self.url} is open read-only")

    def _write(self, body: Callable[[Statements], bool], action: str) -> None:
        """Run ``body`` in one write transaction outside the batch path; SinkError
        ``"<url>: <action>: <driver message>"`` on failure."""
        with self._lock:
            conn = self._connection()
            try:
                self._transaction(conn, body)
            except self._driver_error as exc:
                if self._lost(conn):
                    self._discard()
                raise SinkError(f"{self.url}: {action}: {exc}") from exc
