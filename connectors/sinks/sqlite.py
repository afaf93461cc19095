"""The SQLite sink: one database file, its connection and ``BEGIN IMMEDIATE`` transactions.

WAL mode: readers (in other processes, on the same local filesystem, not NFS) and the writer
never block each other, and a reader sees whole batches. ``synchronous=NORMAL`` (the default)
may lose the last committed batches to a power loss, which Spark will not replay: pass
``synchronous="FULL"`` where that matters more than write latency.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from connectors.sinks.base import Sink
from connectors.sinks.core import Statements
from connectors.sinks.values import SinkError, now_ms

_SYNCHRONOUS: Final = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})
# Pages (4 KiB) one incremental vacuum frees: 8 MiB, a few milliseconds of the write lock.
_VACUUM_PAGES: Final = 2048


class SqliteSink(Sink):
    """:class:`Sink` on a SQLite file."""

    dialect_name = "sqlite"
    _driver_error = sqlite3.Error
    writes_hold_off_renewals = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table_prefix: str = "",
        keep_history: bool = False,
        read_only: bool = False,
        busy_timeout_ms: int = 10_000,
        synchronous: str = "NORMAL",
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.path = os.fspath(path)
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {sorted(_SYNCHRONOUS)}: {synchronous!r}")
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._lease_files: dict[str, int] = {}  # lease name → descriptor of its lock file
        super().__init__(
            f"sqlite:///{self.path}",  # an absolute path gives sqlite:////abs/path
            table_prefix=table_prefix,
            keep_history=keep_history,
            read_only=read_only,
            clock=clock,
        )
        self._open()

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                target = Path(self.path).resolve().as_uri() + "?mode=ro"
            else:
                target = self.path
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: no implicit transactions; each batch is an explicit
            # BEGIN IMMEDIATE … COMMIT and each read statement its own snapshot.
            conn = sqlite3.connect(
                target,
                uri=self.read_only,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout_ms / 1000,
            )
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            if not self.read_only:
                # Pages freed by history retention return to the file system in small steps
                # (``reclaim_space``); only a database without tables takes this setting, an
                # older file reuses its free pages for new rows instead.
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    conn.close()
                    raise SinkError(f"{self.url}: cannot enable WAL journal mode (got {mode})")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.Error as exc:
            raise SinkError(f"cannot open sink {self.url}: {exc}") from exc
        return conn

    def _lost(self, conn: sqlite3.Connection) -> bool:
        # A local file does not drop the connection; a failed statement discards it instead.
        return False

    def _bind_list(self, values: Sequence[Any]) -> str:
        return json.dumps(list(values))  # read back by json_each

    def _transaction(self, conn: sqlite3.Connection, body: Callable[[Statements], bool]) -> None:
        """``BEGIN IMMEDIATE`` takes the write lock first, so two writers serialise."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("COMMIT" if body(conn) else "ROLLBACK")
        except BaseException:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            except sqlite3.Error:
                self._discard()  # a connection that cannot roll back is reopened later
            raise

    def _lock_epoch(self, tx: Statements, name: str, epoch: int) -> bool:
        """A POSIX record lock on byte ``epoch`` of ``<sink file>.lease-<name>``: the kernel
        drops it when the process dies (not inherited by forked children, unlike flock). Locks
        are per process: two sinks of one process never exclude each other, and closing any
        descriptor of that file in the process would drop them (only this sink opens it)."""
        with self._lock:
            fd = self._lease_files.get(name)
            if fd is None:
                fd = os.open(f"{self.path}.lease-{name}", os.O_RDWR | os.O_CREAT, 0o644)
                self._lease_files[name] = fd
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, epoch)
        except OSError:
            return False
        return True

    def _unlock_epoch(self, name: str, epoch: int) -> None:
        fd = self._lease_files.get(name)
        if fd is not None:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, epoch)

    def close(self) -> None:
        """Close the connection and the lease files (dropping their locks)."""
        super().close()
        with self._lock:
            for fd in self._lease_files.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._lease_files.clear()

    def reclaim_space(self) -> None:
        """Give up to :data:`_VACUUM_PAGES` free pages back to the file system (a file created
        with ``auto_vacuum = INCREMENTAL``; older files keep them and reuse them for new rows)."""
        self._check_writable()
        # executescript steps the pragma to its end; execute() would free one page.
        vacuum = f"PRAGMA incremental_vacuum({_VACUUM_PAGES});"
        self._on_connection(lambda conn: conn.executescript(vacuum), "cannot reclaim free pages")
