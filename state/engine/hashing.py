"""Stable 64-bit hashes of strings and offset keys over whole Arrow columns; stored in the state
blob, so part of its format (never change them within a format version).

- ``string_hash(s)``: over the UTF-8 bytes ``b_0..b_{n-1}``, ``h = sum((b_i + 1) * K^(n-1-i))
  mod 2^64``, then ``fmix64(h ^ (n * L))`` (MurmurHash3's 64-bit finalizer).
- ``key_hash(group, topic, partition)``: the high 32 bits of ``string_hash(group)``, then the
  high 32 bits of ``fmix64(string_hash(topic) ^ (partition * P))``, so a group's keys are
  adjacent in hash order.

Equal hashes do not imply equal keys: lookups compare keys, so collisions cost only time."""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

K = np.uint64(0x100000001B3)  # FNV-1a's 64-bit prime: odd, so multiplication is invertible
L = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio
P = np.uint64(0xC2B2AE3D27D4EB4F)  # xxHash64's PRIME64_2

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_S32 = np.uint64(32)
_HIGH32 = np.uint64(0xFFFFFFFF00000000)


def fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer over a uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> _S33)
    x = x * _M1
    x = x ^ (x >> _S33)
    x = x * _M2
    return x ^ (x >> _S33)


#: Up to this many strings, hashing each in Python costs less than the column's ~20 numpy calls
#: (a call hashes its few group ids and topics several times).
_FEW_STRINGS = 16
_MASK = (1 << 64) - 1


@functools.lru_cache(maxsize=4096)
def _one_string_hash(text: str | None) -> int:
    """``string_hash`` of one string (Horner's rule over its bytes), as a Python int; kept for
    the names that come back call after call (a shard's active groups, its topics)."""
    data = b"" if text is None else text.encode()
    k, h = int(K), 0
    for byte in data:
        h = (h * k + byte + 1) & _MASK
    x = h ^ ((len(data) * int(L)) & _MASK)
    x ^= x >> 33
    x = (x * int(_M1)) & _MASK
    x ^= x >> 33
    x = (x * int(_M2)) & _MASK
    return x ^ (x >> 33)


def string_hash(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``string_hash`` of each string, as uint64; nulls hash as ""."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks() if strings.num_chunks != 1 else strings.chunk(0)
    if len(strings) <= _FEW_STRINGS:
        texts = strings.to_numpy(zero_copy_only=False).tolist()
        return np.array([_one_string_hash(t) for t in texts], dtype=np.uint64)
    if not pa.types.is_large_string(strings.type):
        strings = strings.cast(pa.large_string())
    n = len(strings)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    _, offsets_buf, data_buf = strings.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=n + 1, offset=strings.offset * 8)
    if strings.null_count:
        # A null slot may still cover bytes; make it empty.
        valid = np.asarray(strings.is_valid())
        ends = offsets[1:].copy()
        starts = offsets[:-1].copy()
        starts[~valid] = ends[~valid] = 0
    else:
        starts = offsets[:-1]
        ends = offsets[1:]
    lengths = ends - starts
    total = int(lengths.sum())
    h = np.zeros(n, dtype=np.uint64)
    if total:
        data = (
            np.frombuffer(data_buf, dtype=np.uint8)
            if data_buf is not None
            else np.zeros(0, np.uint8)
        )
        nonempty = lengths > 0
        # Gather every string's bytes into one run, remembering where each string ends.
        seg_starts = starts[nonempty]
        seg_lens = lengths[nonempty]
        run_ends = np.cumsum(seg_lens)
        run_starts = run_ends - seg_lens
        pos_in_run = np.arange(total, dtype=np.int64)
        source = pos_in_run + np.repeat(seg_starts - run_starts, seg_lens)
        byte_values = data[source].astype(np.uint64) + np.uint64(1)
        # Exponent of byte i of a string ending at e is e - 1 - i.
        exponents = np.repeat(run_ends - 1, seg_lens) - pos_in_run
        powers = np.cumprod(
            np.concatenate(([np.uint64(1)], np.full(int(seg_lens.max()) - 1, K, np.uint64)))
        )
        h[nonempty] = np.add.reduceat(byte_values * powers[exponents], run_starts)
    return fmix64(h ^ (lengths.astype(np.uint64) * L))


def key_hash(group_hash: np.ndarray, topic_hash: np.ndarray, partition: np.ndarray) -> np.ndarray:
    """``key_hash`` from the string hashes of group and topic and the partition."""
    tp = fmix64(topic_hash ^ (partition.astype(np.int64).astype(np.uint64) * P))
    return (group_hash & _HIGH32) | (tp >> _S32)


def group_hash_range(group_hash: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ``[lo, hi)`` key-hash range of each group's keys; ``hi`` 0 means "to the end"."""
    lo = group_hash & _HIGH32
    hi = lo + np.uint64(1 << 32)  # wraps to 0 for the top range
    return lo, hi
