"""A value made again at most once per interval, shared by every reader in between.

A reader gets the last value while it is younger than ``max_age_s`` (from when its making began,
or ``as_of(value)``) and ``key()`` is unchanged; else it is made again, once, however many ask.
With ``stale_s`` a reader gets it up to ``max_age_s + stale_s`` old while a thread makes the
next; past that it waits: a write shows in every answer that starts that long after it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


class Memo(Generic[T]):
    """``make()``'s value, made again when ``max_age_s`` old or when ``key()`` changes."""

    def __init__(
        self,
        make: Callable[[], T],
        max_age_s: float,
        key: Callable[[], object] = lambda: None,
        stale_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        as_of: Callable[[T], float] | None = None,
    ) -> None:
        if max_age_s < 0 or stale_s < 0:
            raise ValueError(f"ages must be >= 0, got {max_age_s} and {stale_s}")
        self._make, self._key, self._clock, self._as_of = make, key, clock, as_of
        self.max_age_s, self.stale_s = max_age_s, stale_s
        self._changed = threading.Condition()
        self._value: T | None = None
        self._made = False
        self._made_at = 0.0
        self._made_key: object = None
        self._making = False
        #: Values made so far.
        self.made = 0

    def get(self) -> T:
        """The value, made now when there is none or it is too old (see the module)."""
        with self._changed:
            while True:
                age = self._clock() - self._made_at
                if self._made and age < self.max_age_s and self._key() == self._made_key:
                    return self._value  # type: ignore[return-value]
                if self._made and self.stale_s and age < self.max_age_s + self.stale_s:
                    if not self._making:
                        self._making = True
                        threading.Thread(target=self._remake, name="memo", daemon=True).start()
                    return self._value  # type: ignore[return-value]
                if not self._making:
                    self._making = True
                    break
                self._changed.wait()
        return self._made_now()

    def join(self) -> None:
        """Wait until no value is being made."""
        with self._changed:
            while self._making:
                self._changed.wait()

    def _made_now(self) -> T:
        """Make the value (``_making`` is set by the caller) and keep it."""
        try:
            started, key = self._clock(), self._key()
            value = self._make()
        except BaseException:
            with self._changed:
                self._making = False
                self._changed.notify_all()
            raise
        with self._changed:
            made_at = started if self._as_of is None else self._as_of(value)
            self._value, self._made, self._made_at, self._made_key = value, True, made_at, key
            self._making = False
            self.made += 1
            self._changed.notify_all()
        return value

    def _remake(self) -> None:
        try:
            self._made_now()
        except Exception as exc:  # the next reader tries again; past the bound it sees it
            log.warning("not made again (retried by the next request): %s", exc)
