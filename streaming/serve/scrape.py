"""The lag families of ``/metrics`` as the scrapes get them: made from the shared frame of every
group's lags at most once per log-end interval, kept as text and, once a scraper has asked for
it (Prometheus does), gzipped too, so a scrape writes bytes it already has: the compressed lag
families, then the few lines of the job's progress compressed on a copy of the compressor
(one gzip stream, as every client reads it).

The text is at most two log-end intervals old (``streaming.serve.memo``): it is made again
when the log-end offsets are refreshed, while scrapes get the last one; a scrape that would
get text older than that waits for the next. So that scrapes further apart than that (every
15 to 60 s is usual) do not each wait for a new text, a thread keeps it made while someone
scrapes (:data:`WARM_S` after the last scrape).
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.serve.exposition import Granularity, render
from streaming.serve.lag_frame import LagFrame
from streaming.serve.memo import Memo

log = logging.getLogger(__name__)

#: Seconds after the last scrape the text is still kept made.
WARM_S = 600.0
#: zlib's fastest level: the text is repetitive (labels), so it still shrinks some thirtyfold.
_GZIP_LEVEL = 1


@dataclass(frozen=True)
class Gzipped:
    """A gzip stream begun: ``head`` compresses the text so far, :meth:`ended` ends it."""

    head: bytes
    compressor: Any

    @classmethod
    def of(cls, text: bytes) -> Gzipped:
        compressor = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return cls(compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH), compressor)

    def ended(self, more: bytes) -> bytes:
        """The whole stream: the text, then ``more`` (the compressor itself is left as is)."""
        tail = self.compressor.copy()
        return self.head + tail.compress(more) + tail.flush()


@dataclass(eq=False)
class Exposition:
    """The lag families made from ``frame``; ``gzipped`` when asked for (kept once made)."""

    frame: LagFrame
    text: bytes
    gzipped: Gzipped | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def zipped(self) -> Gzipped:
        with self._lock:
            if self.gzipped is None:
                self.gzipped = Gzipped.of(self.text)
            return self.gzipped


class LagExposition:
    """The lag families' text of ``frames``' latest frame, kept between scrapes."""

    def __init__(
        self,
        frames: Memo[LagFrame],
        statuses: Callable[[], Mapping[str, str]],
        cluster: str,
        granularity: Granularity,
        interval_s: float,
        refreshes: Callable[[], object],
    ) -> None:
        self._frames, self._statuses = frames, statuses
        self._cluster, self._granularity = cluster, granularity
        #: Whether a scraper asked for gzip: every later text is gzipped as it is made.
        self.gzip_wanted = False
        self._interval_s = interval_s
        self._scraped_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._made = Memo(
            self._make,
            interval_s,
            key=refreshes,
            stale_s=interval_s,
            clock=time.time,
            as_of=lambda e: e.frame.made_ms / 1000,
        )

    def _make(self) -> Exposition:
        frame = self._frames.get()
        text = render(frame, self._statuses(), self._cluster, self._granularity)
        return Exposition(frame, text, Gzipped.of(text) if self.gzip_wanted else None)

    def _scraped(self) -> Exposition:
        self._scraped_at = time.monotonic()
        if self._thread is None:
            self._thread = threading.Thread(target=self._keep, name="lag-text", daemon=True)
            self._thread.start()
        return self._made.get()

    def text(self, more: bytes = b"") -> bytes:
        """The lag families, then ``more``."""
        return self._scraped().text + more

    def text_of(
        self, select: Callable[[LagFrame], tuple[LagFrame, Mapping[str, str]]], more: bytes = b""
    ) -> bytes:
        """The lag families of what ``select`` keeps of the latest frame, with the statuses it
        gives (a tenant's view: made for this scrape, not kept), then ``more``."""
        frame, statuses = select(self._scraped().frame)
        return render(frame, statuses, self._cluster, self._granularity) + more

    def gzipped(self, more: bytes = b"") -> bytes:
        """:meth:`text` gzipped (compressed now for the first scraper that asks)."""
        self.gzip_wanted = True
        return self._scraped().zipped().ended(more)

    def _keep(self) -> None:
        """While scraped: the text made again as it ages, so that no scrape waits for it."""
        while not self._stop.wait(self._interval_s / 2):
            scraped = self._scraped_at
            if scraped is not None and time.monotonic() - scraped < WARM_S:
                try:
                    self._made.get()
                except Exception as exc:  # the next scrape makes it and sees the error
                    log.warning("lag families not made: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def join(self) -> None:
        """Wait for a text being made (tests)."""
        self._made.join()
