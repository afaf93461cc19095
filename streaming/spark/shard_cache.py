"""Decoded shard states kept in a Python worker between micro-batches, found by the blob's stamp.

Decoding costs in proportion to the state, and the worker that encoded a blob usually decodes it
next. ``encode`` names each blob with 64 random bits (``state.shard.blob_stamp``) and keeps the
state under that name; ``decode`` returns it when the blob's stamp names one, else decodes. A
stamp names one state, never reused, so correctness never depends on the cache.

Bounded to ``max_bytes`` of decoded columns (0 keeps nothing), or one state alone when that is
larger: decoding a state that large at every call costs more than holding it (a 5M-key shard:
~0.75 s a call, against ~0.4 GB held beside a call of another shard). Shards are called in turn,
so LRU would evict each just before its next call: a state is admitted only while there is room,
only entries idle for ``idle_s`` make room, and a shard's new state takes its old one's place.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from state.shard import ShardState, blob_stamp, decode_state, encode_state_kept, state_nbytes

#: The default bound of decoded shard states per Python worker (``JobConfig.state_cache_mb``).
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


def new_stamp() -> int:
    """A new name for a state: 64 random bits, never 0 (0 names nothing)."""
    return secrets.randbits(64) or 1


class DecodedShards:
    """A map from blob stamp to the decoded state, bounded in bytes of columns (or one state)."""

    def __init__(
        self,
        max_bytes: int = DEFAULT_MAX_BYTES,
        idle_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes, self.idle_s, self._clock = max_bytes, idle_s, clock
        # stamp -> (state, its bytes, when last used), least recently used first.
        self._entries: OrderedDict[int, tuple[ShardState, int, float]] = OrderedDict()
        self._bytes = 0
        # Spark may run a worker's tasks on threads of one process; keep the map consistent.
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def decode(self, blob: bytes) -> ShardState:
        """The state ``blob`` encodes: the kept one when its stamp names one, else decoded."""
        kept = self.kept(blob_stamp(blob))
        if kept is not None:
            return kept
        self.misses += 1
        # The state this worker kept of the shard shares its base with the blob's unless a
        # base rewrite compacted it: decoding then skips the base.
        return decode_state(blob, self._kept_of_shard)

    def _kept_of_shard(self, shard: int) -> ShardState | None:
        with self._lock:
            return next((s for s, _, _ in self._entries.values() if s.shard_id == shard), None)

    def kept(self, stamp: int) -> ShardState | None:
        """The state kept under ``stamp`` (a hit), or None (0 names nothing)."""
        if not stamp:
            return None
        with self._lock:
            entry = self._entries.get(stamp)
            if entry is None:
                return None
            self._entries[stamp] = (entry[0], entry[1], self._clock())
            self._entries.move_to_end(stamp)
            self.hits += 1
            return entry[0]

    def encode(self, state: ShardState, shard: int) -> bytes:
        """``state``'s blob under a new stamp, keeping ``state`` for the blob's next decode (and
        dropping what this worker kept for ``shard`` before: Spark's store holds its newest)."""
        stamp = new_stamp()
        blob, state = encode_state_kept(state, stamp)
        self.keep(stamp, state, shard)
        return blob

    def keep(self, stamp: int, state: ShardState, shard: int) -> None:
        """Keep ``state`` under ``stamp`` (which must name it alone, see the module's docstring)
        while there is room or nothing else is kept, in place of what this worker kept for
        ``shard`` before."""
        if not self.max_bytes:
            return
        size = state_nbytes(state)
        now = self._clock()
        with self._lock:
            for old in [s for s, (kept, _, _) in self._entries.items() if kept.shard_id == shard]:
                self._drop(old)
            # Room from entries left idle, oldest first; never from states in use.
            while self._bytes + size > self.max_bytes and self._entries:
                oldest = next(iter(self._entries))
                if now - self._entries[oldest][2] < self.idle_s:
                    break
                self._drop(oldest)
            if self._bytes + size <= self.max_bytes or not self._entries:
                self._entries[stamp] = (state, size, now)
                self._bytes += size

    def _drop(self, stamp: int) -> None:
        _, size, _ = self._entries.pop(stamp)
        self._bytes -= size

    @property
    def nbytes(self) -> int:
        """Bytes of decoded columns kept now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)
