"""A shard's log as the value-state operator stores it: chunks keyed by the stamp of the state
each applies to, chained from a state to the head's (``value_states.log_chain``)."""

from __future__ import annotations

from streaming.spark.value_states import Head, log_chain

BASE, S1, S2, S3 = 0xB, 0x1, (1 << 64) - 2, 0x3
#: The base, then three calls' chunks: base -> S1 -> S2 -> S3.
LOG = {BASE: (b"c1", S1), S1: (b"c2", S2), S2: (b"c3", S3)}
HEAD = Head(S3, BASE, 3, 6, 100)


def test_a_chain_runs_from_any_state_of_the_log_to_the_heads() -> None:
    assert log_chain(LOG, BASE, HEAD) == [b"c1", b"c2", b"c3"]
    # A worker that kept S2 (its own last call) replays only the other worker's chunk.
    assert log_chain(LOG, S2, HEAD) == [b"c3"]
    assert log_chain(LOG, S3, HEAD) == []


def test_a_state_outside_the_log_reaches_nothing() -> None:
    # A state from before the last base rewrite, or of a batch that never committed.
    assert log_chain(LOG, 0x99, HEAD) is None
    # A chunk missing from the middle breaks the chain.
    assert log_chain({BASE: LOG[BASE], S2: LOG[S2]}, BASE, HEAD) is None


def test_a_cycle_ends_at_the_heads_chunk_count() -> None:
    # Never written so; a corrupt store must fail, not loop.
    looping = {BASE: (b"c1", S1), S1: (b"c2", BASE)}
    assert log_chain(looping, BASE, HEAD) is None
