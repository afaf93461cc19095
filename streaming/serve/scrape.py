"""The lag families of ``/metrics`` as the scrapes get them: made from the shared frame of every
group's lags at most once per log-end interval, kept as text and, once a scraper has asked for
it (Prometheus does), gzipped too, so a scrape writes bytes it already has: the compressed lag
families, then the few lines of the job's progress compressed on a copy of the compressor
(one gzip stream, as every client reads it).

The text is at most two log-end intervals old (``streaming.serve.memo``): it is made again
when the log-end offsets are refreshed, while scrapes get the last one; a scrape that would
get text older than that waits for the next.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streaming.serve.exposition import Granularity, render
from streaming.serve.lag_frame import LagFrame
from streaming.serve.memo import Memo

#: zlib's fastest level: the text is repetitive (labels), so it still shrinks about tenfold.
_GZIP_LEVEL = 1


@dataclass(frozen=True)
class Gzipped:
    """A gzip stream begun: ``head`` compresses the text so far, ``rest`` ends it."""

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


@dataclass(frozen=True, eq=False)
class Exposition:
    """The lag families made from ``frame``; ``gzipped`` when asked for."""

    frame: LagFrame
    text: bytes
    gzipped: Gzipped | None


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

    def text(self, more: bytes = b"") -> bytes:
        """The lag families, then ``more``."""
        return self._made.get().text + more

    def gzipped(self, more: bytes = b"") -> bytes:
        """:meth:`text` gzipped (compressed now for the first scraper that asks)."""
        self.gzip_wanted = True
        made = self._made.get()
        return (made.gzipped or Gzipped.of(made.text)).ended(more)

    def join(self) -> None:
        """Wait for a text being made (tests)."""
        self._made.join()
