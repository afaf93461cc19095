"""The deployment lease as the job and the mirror hold it (``connectors.sinks.lease``).

A :class:`LeaseKeeper` takes its deployment's lease on a sink of its own (renewals never wait
behind a batch's write), either at once (:meth:`LeaseKeeper.take`, refused with
:class:`LeaseHeld` while a live holder has it) or as a standby (:meth:`LeaseKeeper.wait`: its
registry row refreshed every second, ``acquire_lease`` polled every 200 ms). Once held it renews
every TTL/5 on a daemon thread, and a watchdog ends the process at once on ``LeaseLost`` or when
TTL - 2 s (at least TTL/2) pass on the monotonic clock without a renewal ending: a paused holder,
or one whose renewal hangs on a partitioned network, stops before a standby may take over. A
holder whose renewals fail at once (the sink is down) keeps running: it writes nothing the sink
does not take, every write is fenced, and its first renewal once the sink is back renews or
finds the lease taken. The sinks that write for the holder are fenced with
:meth:`LeaseKeeper.fence`. A holder's own writes never cost it the lease: on PostgreSQL a
renewal does not wait for them; on SQLite, where it must, a write in progress holds the write
lock (no standby can take over meanwhile), counts as a renewal for the watchdog and renews the
lease as it commits.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Final, TypeVar

from connectors.sinks import Lease, LeaseLost, Sink, SinkError, StandbyState, lease_holder

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The deployment names of the job's and the mirror's leases.
JOB_LEASE: Final = "job"
MIRROR_LEASE: Final = "mirror"
#: The exit status of a process that lost its lease (``streaming.cli.errors.EXIT_LEASE_LOST``).
LEASE_LOST_STATUS: Final = 3
#: How often a standby tries to take the lease, and refreshes its registry row.
ACQUIRE_POLL_S: Final = 0.2
REGISTER_EVERY_S: Final = 1.0
#: A holder stops this long before its lease expires when it cannot renew.
EXIT_MARGIN_MS: Final = 2_000


class LeaseHeld(Exception):
    """Another live process holds the lease: this one must not start (or start ``--standby``)."""


def exit_process(lost: LeaseLost) -> None:
    """End this process at once with :data:`LEASE_LOST_STATUS` (Spark's JVM ends with it):
    no clean-up may write after the lease is gone."""
    logging.shutdown()
    os._exit(LEASE_LOST_STATUS)


def give_up_after_ms(ttl_ms: int) -> int:
    """How long a holder keeps running without a successful renewal: TTL - 2 s, at least TTL/2."""
    return max(ttl_ms - EXIT_MARGIN_MS, ttl_ms // 2)


class LeaseKeeper:
    """Lease ``name`` for ``holder`` (default: this process's id) on ``sink`` (a sink of its
    own, which it closes), renewed to ``ttl_ms``; ``on_lost`` is called once, from a daemon
    thread, with the reason when the lease is lost (default: :func:`exit_process`)."""

    def __init__(
        self,
        sink: Sink,
        name: str,
        ttl_ms: int,
        holder: str | None = None,
        on_lost: Callable[[LeaseLost], object] = exit_process,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink = sink
        self.name = name
        self.ttl_ms = ttl_ms
        #: How long the holder runs on without a renewal ending (:func:`give_up_after_ms`).
        self._give_up_s = give_up_after_ms(ttl_ms) / 1000
        self.holder = holder or lease_holder()
        self.lease: Lease | None = None
        self._on_lost = on_lost
        self._clock = clock
        self._stopping = threading.Event()
        self._lost = threading.Event()
        self._renewed_at = 0.0
        #: When the last renewal ended, renewed or refused by a failing sink (never one hanging).
        self._answered_at = 0.0
        self._threads: list[threading.Thread] = []
        #: The sinks fenced by the held lease whose writes hold renewals off (SQLite).
        self._writers: list[Sink] = []
        self._renewals_by_write = 0
        #: The status row's heartbeat while the process starts (:meth:`announce_start`).
        self._beat: _Repeat | None = None
        #: The WARMING row's refresh while a standby warms up (:meth:`warm`).
        self._warming: _Repeat | None = None

    def take(self) -> Lease:
        """Acquire the lease now (free, expired, or its holder dead) and keep it; LeaseHeld,
        with what to do, when a live holder has it."""
        lease = self.sink.acquire_lease(self.name, self.holder, self.ttl_ms)
        if lease is None:
            raise LeaseHeld(self._held_message())
        return self._acquired(lease)

    def register(self, state: StandbyState) -> None:
        """Refresh this standby's registry row (``WARMING`` or ``READY``); not fenced."""
        self.sink.register_standby(self.name, self.holder, state)

    def warm(self) -> None:
        """As a standby warming up: its registry row says WARMING now and every second until
        :meth:`wait` (READY) or :meth:`release`, so it is listed from its first second."""
        self.register("WARMING")
        self._warming = _Repeat(
            lambda: self._safely(
                lambda: self.register("WARMING"), "cannot refresh the standby row"
            ),
            REGISTER_EVERY_S,
            f"lease-{self.name}-warming",
        )

    def announce_start(self) -> None:
        """Once the lease is held, before anything else starts: the sink's status row says
        STARTING (a LOADING one, a rebuild to resume, stays LOADING) with a fresh heartbeat,
        beaten every TTL/5 until :meth:`started`, so the status is true from the first second:
        not STOPPED, not NOT RESPONDING while Spark starts. The beat is a thread of its own:
        the status row is also a batch's, and a renewal must never wait for one."""
        assert self.lease is not None, "take or wait first"
        if self.sink.status().status != "LOADING":
            self.sink.set_status("STARTING", "lease taken: starting Spark")
        self.sink.heartbeat()
        self._beat = _Repeat(
            lambda: self._safely(self.sink.heartbeat, "cannot beat the starting status"),
            self.ttl_ms / 5000,
            f"lease-{self.name}-start-beat",
        )

    def started(self) -> None:
        """The process's own heartbeat runs (its query started): stop the start-up beat, and
        wait for one under way, before any batch writes the status row."""
        beat, self._beat = self._beat, None
        if beat is not None:
            beat.stop(self.ttl_ms / 1000)

    def wait(self, stopped: Callable[[], bool]) -> Lease | None:
        """As a ready standby: poll for the lease until it is ours (kept from then on), or None
        once ``stopped()`` holds. The registry row says READY every second meanwhile."""
        current = self.sink.lease(self.name)
        log.info(
            "standby ready: waiting for lease %s (held by %s, epoch %d)",
            self.name,
            (current.holder if current else "") or "nobody",
            current.epoch if current else 0,
        )
        self._stop_warming()
        registered = float("-inf")
        while not stopped():
            if self._clock() - registered >= REGISTER_EVERY_S:
                self._safely(lambda: self.register("READY"), "cannot refresh the standby row")
                registered = self._clock()
            lease = self._safely(
                lambda: self.sink.acquire_lease(self.name, self.holder, self.ttl_ms),
                "cannot poll the lease",
            )
            if lease is not None:
                self.drop_standby()
                return self._acquired(lease)
            time.sleep(ACQUIRE_POLL_S)
        self.drop_standby()
        return None

    def drop_standby(self) -> None:
        """Remove this process's registry row (it holds the lease, or stops)."""
        self._safely(
            lambda: self.sink.drop_standby(self.name, self.holder), "cannot drop the standby row"
        )

    def fence(self, sink: Sink) -> None:
        """Fence ``sink``'s writes by the held lease: they fail once another holder took it.
        Where its writes hold renewals off, each renews the lease as it commits, and one in
        progress keeps the watchdog quiet (the holder is at work, and holds the write lock)."""
        assert self.lease is not None, "take or wait first"
        sink.fence_writes(self.name, self.lease.epoch, self.holder, self.ttl_ms)
        if sink.writes_hold_off_renewals:
            self._writers.append(sink)

    def fence_token(self) -> tuple[str, int, str, int] | None:
        """(name, epoch, holder, TTL) of the held lease, for Spark workers' sinks (their writes
        renew it on SQLite, and end when their client goes quiet on PostgreSQL, as the
        holder's); None before."""
        return (self.name, self.lease.epoch, self.holder, self.ttl_ms) if self.lease else None

    def release(self) -> None:
        """Stop renewing and free the lease (a clean stop: a standby takes it at once), then
        close the keeper's sink. Nothing is freed once the lease was lost."""
        self._stopping.set()
        self._stop_warming()
        self.started()
        for thread in self._threads:
            thread.join(self.ttl_ms / 1000)
        try:
            if self.lease is not None and not self._lost.is_set():
                self.sink.release_lease()
                log.info("lease %s released (epoch %d)", self.name, self.lease.epoch)
        except SinkError as exc:
            log.warning(
                "lease %s not released (%s): it expires in %d ms", self.name, exc, self.ttl_ms
            )
        finally:
            self.sink.close()

    def _acquired(self, lease: Lease) -> Lease:
        self.lease = lease
        self._renewed_at = self._answered_at = self._clock()
        log.info("lease %s acquired: epoch %d (%s)", self.name, lease.epoch, self.holder)
        for target, role in ((self._renew, "renewal"), (self._watch, "watchdog")):
            thread = threading.Thread(target=target, name=f"lease-{self.name}-{role}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return lease

    def _renew(self) -> None:
        """Every TTL/5: renew; LeaseLost ends the process, other errors are tried again."""
        while not self._stopping.wait(self.ttl_ms / 5000) and not self._lost.is_set():
            if self._writing():
                continue  # the write renews the lease as it commits; a renewal would wait
            try:
                self.lease = self.sink.renew_lease(self.ttl_ms)
                self._renewed_at = self._answered_at = self._clock()
            except LeaseLost as lost:
                self._lose(lost)
            except SinkError as exc:
                now = self._clock()
                if now - self._answered_at < self._give_up_s:  # not after a pause: sink down
                    self._answered_at = now
                if self._writing():
                    continue  # it waited for the holder's own write, which renews on commit
                silent_s = now - self._renewed_at
                log.warning(
                    "lease %s: renewal failed (%s), not renewed for %.1f s; trying again",
                    self.name,
                    exc,
                    silent_s,
                )

    def _watch(self) -> None:
        """Apart from the renewals: end the process when none ended for
        :func:`give_up_after_ms` (the process was paused, or a renewal hangs on the network)."""
        while not self._stopping.wait(0.1) and not self._lost.is_set():
            now = self._clock()
            renewals = sum(sink.lease_renewals_by_write for sink in self._writers)
            if renewals != self._renewals_by_write:
                self._renewals_by_write = renewals
                self._renewed_at = self._answered_at = now
            if self._writing():
                self._answered_at = now  # at work, holding the write lock: nobody takes over
            if now - self._answered_at >= self._give_up_s:
                renewed_s = now - self._renewed_at
                self._lose(LeaseLost(f"not renewed for {renewed_s:.1f} s (TTL {self.ttl_ms} ms)"))

    def _stop_warming(self) -> None:
        warming, self._warming = self._warming, None
        if warming is not None:
            warming.stop(self.ttl_ms / 1000)

    def _writing(self) -> bool:
        """Whether a fenced sink's write holds renewals off now (it holds the write lock)."""
        return any(sink.lease_writing for sink in self._writers)

    def _lose(self, lost: LeaseLost) -> None:
        if self._stopping.is_set() or self._lost.is_set():
            return
        self._lost.set()
        log.error("lease %s lost: %s: exiting", self.name, lost)
        self._on_lost(lost)

    def _held_message(self) -> str:
        found = self.sink.lease(self.name)
        holder, epoch = (found.holder, found.epoch) if found else ("?", 0)
        expires_s = max(0, found.expires_in_ms if found else 0) / 1000
        other = "mirror" if self.name == MIRROR_LEASE else "job"
        return (
            f"lease {self.name} is held by {holder} (epoch {epoch}, expires in {expires_s:.1f} s):"
            f" another {other} of this deployment is active; start this one with --standby to"
            " take over when it stops"
        )

    def _safely(self, call: Callable[[], T], what: str) -> T | None:
        """``call()``, or None with a warning when the sink fails (a standby waits on)."""
        try:
            return call()
        except SinkError as exc:
            log.warning("lease %s: %s: %s", self.name, what, exc)
            return None


class _Repeat:
    """``call()`` every ``every_s`` on a daemon thread named ``name`` until :meth:`stop`."""

    def __init__(self, call: Callable[[], object], every_s: float, name: str) -> None:
        self._stopped = threading.Event()

        def run() -> None:
            while not self._stopped.wait(every_s):
                call()

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Stop, waiting up to ``timeout_s`` for a call under way."""
        self._stopped.set()
        self._thread.join(timeout_s)
