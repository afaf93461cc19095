"""Section timings of the job's state function, for the benchmarks; the product has none.

Put this folder on the Python workers' ``PYTHONPATH`` with :data:`PROFILE_DIR_ENV` set (the
benchmark sets both before Spark starts) and Python runs this module in each worker at start:
it wraps the shard call's functions, and each call appends one JSON line of seconds per section
to ``<dir>/sections-<pid>.jsonl`` (``tests.bench.bench_e2e.read_sections``). A section's time
excludes the sections it calls: ``handle`` is ``state.shard.handle_messages`` without
``load_shard``; ``adapter`` is the call's own (reading Spark's frames into one); ``state_server``
the round trips to the JVM's state server (``ValueState``/``ListState`` calls, a list read whole;
``state_bytes_read`` counts the bytes they return); ``decode_base``/``replay_log`` and
``encode_base``/``encode_log_chunk`` what reading and writing a shard's stored state costs in
Python beyond them.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

PROFILE_DIR_ENV = "CONSUMER_OFFSETS_PROFILE_DIR"

#: The running call's sections (None: not in a call) and its open sections' child times.
_sections: dict[str, float] | None = None
_open: list[float] = []


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if _sections is None:
            return fn(*args, **kwargs)
        started = time.perf_counter()
        _open.append(0.0)
        try:
            return fn(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - started
            children = _open.pop()
            if _sections is not None:
                _sections[name] = _sections.get(name, 0.0) + elapsed - children
            if _open:
                _open[-1] += elapsed

    return timed


def _timed_state_call(method: Callable[..., Any]) -> Callable[..., Any]:
    """A state variable's method as a ``state_server`` section; a list read whole inside it."""

    def read_whole(*args: Any, **kwargs: Any) -> Any:
        found = method(*args, **kwargs)
        rows = list(found) if isinstance(found, Iterator) else [found] if found else []
        if _sections is not None:
            read = sum(len(v) for row in rows for v in row if isinstance(v, bytes | bytearray))
            _sections["state_bytes_read"] = _sections.get("state_bytes_read", 0.0) + read
        return iter(rows) if isinstance(found, Iterator) else found

    return _timed("state_server", functools.wraps(method)(read_whole))


def _timed_read(read: Callable[..., Any]) -> Callable[..., Any]:
    """A store's ``read``, also counting calls whose state this worker kept (no decoding)."""
    timed = _timed("decode_state", read)

    @functools.wraps(read)
    def counted(self: Any, shards: Any) -> Any:
        hits = shards.hits
        state = timed(self, shards)
        if _sections is not None:
            _sections["state_kept"] = float(shards.hits - hits)
        return state

    return counted


def _timed_handle(handle: Callable[..., Any]) -> Callable[..., Any]:
    timed = _timed("handle", handle)

    @functools.wraps(handle)
    def counted(*args: Any, **kwargs: Any) -> Any:
        out = timed(*args, **kwargs)
        if _sections is not None:
            _sections["rows"] = out.stats["input_rows"]
            _sections["state_keys"] = out.stats["state_keys"]
        return out

    return counted


def _profiled_call_maker(make: Callable[..., Any], profile_dir: str) -> Callable[..., Any]:
    """``make_shard_call`` whose calls each write their sections as one JSON line."""

    @functools.wraps(make)
    def make_profiled(settings: Any) -> Callable[..., Iterator[Any]]:
        call = make(settings)

        def profiled(shard: int, frames: Any, store: Any) -> Iterator[Any]:
            global _sections
            _sections = sections = {}
            emit = 0.0
            timed = _timed("adapter", lambda: list(call(shard, frames, store)))
            rows = timed()
            _sections = None
            for row in rows:
                # The time Spark takes the row (old profiles' "emit").
                started = time.perf_counter()
                yield row
                emit += time.perf_counter() - started
            sections["emit"] = emit
            sections["pid"] = os.getpid()
            path = os.path.join(profile_dir, f"sections-{os.getpid()}.jsonl")
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(sections) + "\n")

        return profiled

    return make_profiled


def install(profile_dir: str, stores: tuple[type, ...] = ()) -> None:
    """Wrap the shard call's functions in this process, and the stores' (beside the job's own,
    ``stores``); each call writes under ``profile_dir``."""
    from pyspark.sql.streaming.stateful_processor import ListState, ValueState

    from streaming.spark import processor, shard_cache, value_states

    if getattr(processor.make_shard_call, "__wrapped__", None) is not None:
        return
    for state_class in (ValueState, ListState):
        for name in ("get", "update", "appendValue", "clear"):
            if hasattr(state_class, name):
                setattr(state_class, name, _timed_state_call(getattr(state_class, name)))
    shard_cache.decode_state = _timed("decode_base", shard_cache.decode_state)
    shard_cache.encode_state_kept = _timed("encode_base", shard_cache.encode_state_kept)
    value_states.replay_log_chunks_on = _timed("replay_log", value_states.replay_log_chunks_on)
    value_states.encode_log_chunk = _timed("encode_log_chunk", value_states.encode_log_chunk)
    processor.handle_messages = _timed_handle(processor.handle_messages)
    processor.load_shard = _timed("load_shard", processor.load_shard)
    processor.write_loaded = _timed("write_loaded", processor.write_loaded)
    processor.output_table = _timed("output_table", processor.output_table)
    processor.encode_output = _timed("encode_output", processor.encode_output)
    for store in (value_states.ValueStateStore, *stores):
        store.read = _timed_read(store.read)
        store.write = _timed("encode_state", store.write)
    make = _profiled_call_maker(processor.make_shard_call, profile_dir)
    processor.make_shard_call = value_states.make_shard_call = make


if os.environ.get(PROFILE_DIR_ENV):
    install(os.environ[PROFILE_DIR_ENV])
