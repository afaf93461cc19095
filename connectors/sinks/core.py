"""What every part of the sink shares: one connection under a lock, the statements, and the
hooks a backend supplies (connect, transactions, what a lost connection looks like)."""

from __future__ import annotations

import contextlib
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar

from connectors.closing import CloseOnExit
from connectors.sinks.statements import statements
from connectors.sinks.tables import define_tables
from connectors.sinks.values import Lease, LeaseLost, SinkError

log = logging.getLogger(__name__)

T = TypeVar("T")


class Statements(Protocol):
    """What a transaction runs statements on: a sqlite3 connection or a psycopg cursor."""

    def execute(self, statement: Any, params: Any = ..., /) -> Any: ...

    def executemany(self, statement: Any, params: Any, /) -> Any: ...


class Fence(NamedTuple):
    """The lease this sink holds: its writes commit only while the row carries ``epoch``.
    With the lease's ``ttl_ms``, where writes hold renewals off (SQLite), each write renews the
    lease to ``ttl_ms`` from its commit; where the store can end a transaction whose client went
    quiet (PostgreSQL), a write is ended once its client sent nothing for ``ttl_ms``."""

    name: str
    epoch: int
    holder: str
    ttl_ms: int | None = None


def lost_message(url: str, fence: Fence, found: Lease | None) -> str:
    """Why ``fence`` no longer holds: the lease row's holder and epoch now."""
    now = f"epoch {found.epoch}, holder {found.holder or '(none)'}" if found else "no lease row"
    return f"{url}: lease {fence.name} epoch {fence.epoch} lost (now {now}): stop writing"


class SinkCore(ABC, CloseOnExit):
    """A backend's constructor calls ``super().__init__`` then ``_open`` (``schema``)."""

    #: The sink's URL with secrets masked: the only form used in messages and logs.
    url: str
    #: Whether ``write_batch`` appends offset records to ``offset_commit_history``.
    keep_history: bool
    #: A read-only sink runs no DDL and refuses every write.
    read_only: bool
    #: "sqlite" or "postgresql": the dialect the statements are compiled for.
    dialect_name: ClassVar[str]
    #: The driver's base exception: what the backend's connection raises.
    _driver_error: ClassVar[type[Exception]]
    #: Whether a write transaction keeps the lease's renewal (another connection) waiting until
    #: it ends: SQLite's single writer. PostgreSQL's fencing check locks the lease row FOR KEY
    #: SHARE, which a renewal's UPDATE does not wait for (a takeover's FOR UPDATE does).
    writes_hold_off_renewals: ClassVar[bool] = False

    def __init__(
        self,
        url: str,
        *,
        table_prefix: str,
        keep_history: bool,
        read_only: bool,
        clock: Callable[[], int],
        schema: str | None = None,
    ) -> None:
        self.url = url
        self.keep_history = keep_history
        self.read_only = read_only
        self._clock = clock
        self._prefix = table_prefix
        self._schema = schema or None
        self._tables = define_tables(table_prefix, self._schema)  # ValueError: a bad prefix
        self._sql = statements(self.dialect_name, table_prefix, self._schema)
        # foreachBatch writes from one driver thread; the same process may read from another.
        self._lock = threading.RLock()
        self._conn: Any = None
        #: Set while this sink holds a deployment lease (``connectors.sinks.lease``).
        self._fence: Fence | None = None
        #: Whether a fenced write, past its fencing check, is in progress where writes hold
        #: renewals off: it holds the write lock, so no takeover can commit meanwhile.
        self.lease_writing = False
        #: How many fenced writes renewed the lease as they committed.
        self.lease_renewals_by_write = 0

    @property
    def fence(self) -> Fence | None:
        """The lease this sink's writes are fenced by; None when unfenced."""
        return self._fence

    @abstractmethod
    def _connect(self) -> Any:
        """A new connection, ready for use; SinkError (URL redacted) when it cannot be made."""

    @abstractmethod
    def _lost(self, conn: Any) -> bool:
        """Whether ``conn`` is known to be dead (the server or the network dropped it)."""

    @abstractmethod
    def _transaction(self, conn: Any, body: Callable[[Statements], bool]) -> None:
        """Run ``body`` in one write transaction on ``conn``: commit when it returns True (when
        False nothing was written); roll back and re-raise on any exception."""

    @abstractmethod
    def _bind_list(self, values: Sequence[Any]) -> Any:
        """``values`` as the one parameter of a list match (``= ANY``, ``json_each``)."""

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

    def _on_connection(
        self,
        use: Callable[[Any], T],
        action: str,
        *,
        retry: Callable[[], bool] = lambda: False,
        error: type[SinkError] = SinkError,
    ) -> T:
        """``use(connection)`` under the lock. A driver error drops the connection (the next
        call opens a fresh one) and raises ``error`` ``"<url>: <action>: <driver message>"``;
        when the connection was lost and ``retry()`` says nothing reached the store, ``use``
        runs once more on a fresh connection."""
        with self._lock:
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    return use(conn)
                except self._driver_error as exc:
                    lost = self._lost(conn)
                    self._discard()
                    if not (lost and attempt == 1 and retry()):
                        raise error(f"{self.url}: {action}: {exc}") from exc
                    log.warning("%s: connection lost; trying again on a new one", self.url)
        raise AssertionError("unreachable")

    def _run(
        self, name: str, params: Sequence[Any] = (), *, action: str = "read failed"
    ) -> list[tuple[Any, ...]]:
        """Statement ``name``'s rows, run on its own (autocommit); run again on a fresh
        connection when the first was lost (reads are idempotent)."""

        def run(conn: Any) -> list[tuple[Any, ...]]:
            with contextlib.closing(conn.cursor()) as cursor:
                cursor.execute(self._sql[name], params)
                return cursor.fetchall() if cursor.description else []

        return self._on_connection(run, action, retry=lambda: True)

    def _read_chunks(
        self, name: str, consume: Callable[[list[tuple[Any, ...]]], None], size: int
    ) -> None:
        """Hand the rows of read ``name`` to ``consume`` ``size`` at a time; run again on a
        fresh connection if it was lost before any row was handed on."""
        handed = False

        def read(conn: Any) -> None:
            nonlocal handed
            with contextlib.closing(conn.cursor()) as cursor:
                cursor.execute(self._sql[name])
                while found := cursor.fetchmany(size):
                    handed = True
                    consume(found)

        self._on_connection(read, "read failed", retry=lambda: not handed)

    def _check_writable(self) -> None:
        if self.read_only:
            raise SinkError(f"{self.url} is open read-only")

    def _write(
        self,
        body: Callable[[Statements], bool],
        action: str,
        *,
        retry: Callable[[], bool] = lambda: False,
        error: type[SinkError] = SinkError,
    ) -> None:
        """Run ``body`` in one write transaction, fenced by the held lease if any; ``error``
        naming ``action`` on failure (run again on a fresh connection when the first was lost
        and ``retry()``), LeaseLost (rolled back) when the lease is lost. Where writes hold
        renewals off, a fenced write that commits renews the lease (:class:`Fence`), and
        :attr:`lease_writing` says meanwhile that the holder is at work."""
        renews = self.writes_hold_off_renewals
        renewed = False

        def fenced(tx: Statements) -> bool:
            nonlocal renewed
            fence = self._check_fence(tx)
            if fence is not None and fence.ttl_ms is not None:
                self._end_when_quiet(tx, fence.ttl_ms)
            if renews and fence is not None:
                self.lease_writing = True
            if not body(tx):
                return False
            if renews and fence is not None and fence.ttl_ms is not None:
                self._renew_in(tx, fence)
                renewed = True
            return True

        try:
            self._on_connection(
                lambda conn: self._transaction(conn, fenced), action, retry=retry, error=error
            )
        finally:
            self.lease_writing = False
        if renewed:
            self.lease_renewals_by_write += 1

    def _end_when_quiet(self, tx: Statements, ttl_ms: int) -> None:
        """Where the store can (PostgreSQL), end ``tx`` and its session once the client sent
        nothing for ``ttl_ms`` inside it: a holder frozen inside a write (SIGSTOP, a debugger)
        then lets go of the lease row and is replaced once its lease expires. SQLite cannot:
        its one write lock stays with the frozen holder until it resumes or dies."""

    def _renew_in(self, tx: Statements, fence: Fence) -> None:
        """Renew ``fence``'s lease to its TTL from now inside ``tx``; LeaseLost, naming the
        row's holder and epoch now, when the row does not carry its epoch and holder."""
        params = (fence.ttl_ms, fence.name, fence.epoch, fence.holder)
        if tx.execute(self._sql["renew_lease"], params).rowcount != 1:
            row = tx.execute(self._sql["read_lease"], (fence.name,)).fetchone()
            found = Lease(fence.name, *row) if row else None
            raise LeaseLost(lost_message(self.url, fence, found))

    def _write_one(self, name: str, params: Sequence[Any], action: str) -> None:
        """Statement ``name`` on its own: in a fenced transaction while a lease is held."""
        if self._fence is None:
            self._run(name, params, action=action)
        else:

            def one(tx: Statements) -> bool:
                tx.execute(self._sql[name], params)
                return True

            self._write(one, action)

    def _check_fence(self, tx: Statements) -> Fence | None:
        """LeaseLost unless the held lease's row still carries its epoch; the row stays locked
        (shared) to the end of ``tx``, so no takeover commits between this check and it. The
        fence checked, None when no lease is held."""
        fence = self._fence
        if fence is None:
            return None
        row = tx.execute(self._sql["lease"], (fence.name,)).fetchone()
        if row is None or row[0] != fence.epoch:
            found = Lease(fence.name, *row[:4]) if row else None
            raise LeaseLost(lost_message(self.url, fence, found))
        return fence
