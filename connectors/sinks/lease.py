"""The deployment lease: one job (or mirror) of a deployment writes; its epoch fences the rest.

One row per deployment name (``epoch``, ``holder``, ``renewed_at_ms``, ``expires_at_ms``, times
from the database's clock). A holder also keeps a lock tied to its process or session on its
epoch (SQLite: a POSIX record lock on byte ``epoch`` of a file beside the sink file; PostgreSQL:
the session advisory lock ``(name key, epoch)``), which the system drops when the process or its
connection dies. A contender takes the lease when it is free, expired, already its own, or when
it can take its holder's epoch lock (the holder is dead): a dead holder is replaced at once, a
paused or partitioned one after ``expires_at_ms``. Locking per epoch keeps a holder that took
over by expiry (while the paused one still holds its old lock) from looking dead.

Once acquired, every write transaction of this sink first checks that the row still carries
its epoch (``SinkCore._check_fence``) and otherwise rolls back with :class:`LeaseLost`. The
check holds off a takeover until the write commits, never the holder's own renewal: on
PostgreSQL it locks the row FOR KEY SHARE, which a renewal's UPDATE passes and a contender's
FOR UPDATE does not (a contender skips a locked row: a holder at work is alive); SQLite has one
writer at a time, so there a holder's write renews the lease as it commits.

The processes waiting to take a lease over register as its standbys (one row each, a heartbeat
every second, unfenced), so operators see whether a takeover is ready.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from typing import Final, get_args

from connectors.sinks.core import Fence, SinkCore, Statements
from connectors.sinks.values import Lease, LeaseLost, SinkError, Standby, StandbyState

_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: A standby's row not refreshed for this long is deleted (its process is gone): the table's
#: bound.
STANDBY_KEPT_MS: Final = 60_000
#: A standby is listed while its heartbeat is this recent (it refreshes it every second).
STANDBY_FRESH_MS: Final = 5_000


def lease_holder() -> str:
    """This process's holder id: ``host:pid/`` and a random instance id (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}/{secrets.token_hex(4)}"


class Leases(SinkCore):
    """Acquire, renew and release a deployment's lease; a backend supplies the epoch locks."""

    def _lock_epoch(self, tx: Statements, name: str, epoch: int) -> bool:
        """Take (or keep) the process's or session's lock on ``epoch`` without waiting."""
        raise NotImplementedError

    def _unlock_epoch(self, name: str, epoch: int) -> None:
        """Give up the lock on ``epoch`` if this sink holds it."""
        raise NotImplementedError

    def lease(self, name: str) -> Lease | None:
        """Deployment ``name``'s lease row; None before anyone asked for it. A plain read:
        a read-only sink answers too."""
        found = self._run("read_lease", (name,))
        return Lease(name, *found[0]) if found else None

    def leases(self) -> list[Lease]:
        """Every deployment's lease row, by name (a plain read)."""
        return [Lease(*row) for row in self._run("leases")]

    def register_standby(self, name: str, holder: str, state: StandbyState) -> None:
        """Record ``holder`` as a standby of deployment ``name`` in ``state``, its heartbeat
        now in the sink's clock, and delete ``name``'s rows older than
        :data:`STANDBY_KEPT_MS`. Not fenced: a standby holds no lease."""
        self._check_writable()
        if state not in get_args(StandbyState):
            raise ValueError(f"standby state must be one of {get_args(StandbyState)}: {state!r}")

        def register(tx: Statements) -> bool:
            tx.execute(self._sql["register_standby"], (name, holder, state))
            tx.execute(self._sql["expire_standbys"], (name, STANDBY_KEPT_MS))
            return True

        self._on_connection(
            lambda conn: self._transaction(conn, register),
            f"cannot register standby of {name}",
            retry=lambda: True,  # idempotent
        )

    def drop_standby(self, name: str, holder: str) -> None:
        """Forget ``holder`` as a standby of ``name`` (it took the lease, or stops)."""
        self._check_writable()
        self._run("drop_standby", (name, holder), action=f"cannot drop standby of {name}")

    def standbys(self, name: str) -> list[Standby]:
        """Deployment ``name``'s standbys whose heartbeat is at most :data:`STANDBY_FRESH_MS`
        old, by holder (a plain read)."""
        found = self._run("standbys", (name, STANDBY_FRESH_MS))
        return [Standby(name, *row) for row in found]

    def deployments(self) -> list[tuple[Lease, list[Standby]]]:
        """Every deployment's lease row (the job's ``job``, a mirror's ``mirror``) with its
        fresh standbys (:meth:`standbys`)."""
        return [(lease, self.standbys(lease.name)) for lease in self.leases()]

    def acquire_lease(self, name: str, holder: str, ttl_ms: int) -> Lease | None:
        """Take deployment ``name``'s lease for ``holder`` until ``ttl_ms`` from now when it is
        free, expired, ``holder``'s already (epoch kept) or its holder is dead (epoch bumped);
        from then on this sink's writes are fenced by that epoch. None when another holds it."""
        self._check_writable()
        if not _NAME_RE.match(name):
            raise ValueError(f"lease name must match {_NAME_RE.pattern}, got {name!r}")
        locked: list[int] = []
        taken: list[int] = []

        def take(tx: Statements) -> bool:
            tx.execute(self._sql["insert_lease"], (name,))
            row = tx.execute(self._sql["lease_for_update"], (name,)).fetchone()
            if row is None:
                return False  # locked: its holder is writing or renewing (PostgreSQL)
            epoch, current, _, expires, now = row
            if current == holder:
                new = epoch
            elif current and expires > now and not self._try_lock(tx, name, epoch, locked):
                return False  # held by a live holder (its epoch lock is held)
            else:
                new = epoch + 1
            if not self._try_lock(tx, name, new, locked):
                return False  # another contender is taking it now
            tx.execute(self._sql["take_lease"], (new, holder, ttl_ms, name))
            taken.append(new)
            return True

        committed = False
        try:
            self._write(take, f"cannot acquire lease {name}")
            committed = True
        finally:
            for epoch in locked:  # keep only the lock of the epoch taken
                if not (committed and epoch in taken):
                    self._unlock_epoch(name, epoch)
        if not taken:
            return None
        self._fence = Fence(name, taken[0], holder, ttl_ms)
        return self.lease(name)

    def fence_writes(self, name: str, epoch: int, holder: str, ttl_ms: int | None = None) -> None:
        """Fence this sink's writes by a lease another sink holds for this deployment (the
        holder's writer, or a Spark worker of it writing rebuilt state): they roll back with
        LeaseLost once ``epoch`` is not the row's. Takes no lock; with ``ttl_ms``, where writes
        hold renewals off (SQLite), each write renews the lease as it commits."""
        self._fence = Fence(name, epoch, holder, ttl_ms)

    def renew_lease(self, ttl_ms: int) -> Lease:
        """Extend the held lease to ``ttl_ms`` from now; LeaseLost when its epoch is not ours
        any more (the holder must stop writing), or when the lock on its epoch, dropped with a
        lost connection, cannot be taken again (a contender holds it: it found this holder
        dead and is taking over)."""
        fence = self._held_fence()

        def renew(tx: Statements) -> bool:
            if not self._lock_epoch(tx, fence.name, fence.epoch):  # after a reconnection
                raise LeaseLost(
                    f"{self.url}: lease {fence.name} epoch {fence.epoch}: its epoch lock is"
                    " held by another process (taking over): stop writing"
                )
            self._renew_in(tx, fence._replace(ttl_ms=ttl_ms))
            return True

        self._on_connection(lambda conn: self._transaction(conn, renew), "cannot renew lease")
        found = self.lease(fence.name)
        assert found is not None
        return found

    def release_lease(self) -> None:
        """Free the held lease (a clean stop), so a standby takes it at once; writes are not
        fenced any more. Nothing when no lease is held or it was lost."""
        fence, self._fence = self._fence, None
        if fence is None:
            return

        def release(tx: Statements) -> bool:
            tx.execute(self._sql["release_lease"], (fence.name, fence.epoch, fence.holder))
            return True

        try:
            self._on_connection(
                lambda conn: self._transaction(conn, release), "cannot release lease"
            )
        finally:
            self._unlock_epoch(fence.name, fence.epoch)

    def _try_lock(self, tx: Statements, name: str, epoch: int, locked: list[int]) -> bool:
        got = self._lock_epoch(tx, name, epoch)
        if got:
            locked.append(epoch)
        return got

    def _held_fence(self) -> Fence:
        if self._fence is None:
            raise SinkError(f"{self.url}: no lease is held")
        return self._fence
