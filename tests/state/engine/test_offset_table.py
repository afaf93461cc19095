"""The columnar offsets table and dictionaries when hashes collide (which real keys almost never
do, so the generic tests would not reach these paths)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from state.engine.groups import StringDict
from state.engine.hashing import string_hash
from state.engine.offset_rows import Rows
from state.engine.offset_table import NEVER, OffsetTable


def rows(keys: list[tuple[int, int, int, int]], offset: int = 0) -> Rows:
    """Rows for (khash, gcode, tcode, partition) keys, sorted by khash."""
    k = np.array(keys, dtype=np.int64).reshape(-1, 4)
    n = len(k)
    r = Rows(
        khash=k[:, 0].astype(np.uint64),
        gcode=k[:, 1].astype(np.int32),
        tcode=k[:, 2].astype(np.int32),
        partition=k[:, 3].astype(np.int32),
        offset=np.arange(n, dtype=np.int64) + offset,
        leader_epoch=np.full(n, -1, np.int32),
        metadata=pa.array([""] * n, pa.large_string()),
        commit_ts=np.zeros(n, np.int64),
        expire_ts=np.full(n, -1, np.int64),
        deadline=np.arange(n, dtype=np.int64) + 100,
    )
    return r.sorted_by_key()


def offsets_of(table: OffsetTable) -> dict[tuple[int, int, int], int]:
    live = table.live_rows()
    return {
        (int(g), int(t), int(p)): int(o)
        for g, t, p, o in zip(live.gcode, live.tcode, live.partition, live.offset, strict=True)
    }


def test_colliding_keys_are_told_apart() -> None:
    # Three keys share hash 7, in the base and then in the delta.
    base = rows([(7, 0, 0, 0), (7, 0, 0, 1), (7, 1, 0, 0), (9, 2, 0, 0)])
    table = OffsetTable.from_base(base)
    loc = table.locate(
        np.array([7, 7, 7, 7], np.uint64),
        np.array([1, 0, 0, 2], np.int32),
        np.zeros(4, np.int32),
        np.array([0, 1, 0, 0], np.int32),
    )
    assert loc.live.tolist() == [True, True, True, False]
    assert sorted(base.offset[loc.base[:3]].tolist()) == sorted(
        [base.offset[i] for i in range(3) if base.khash[i] == 7]
    )

    # Overwrite one colliding key, delete another, add a fourth with the same hash.
    update = rows([(7, 0, 0, 1), (7, 1, 0, 0), (7, 3, 3, 3)], offset=50)
    tomb = np.array([False, False, False])
    tomb[update.gcode == 1] = True
    table, existed = table.write(update, tomb)
    assert sorted(existed.tolist()) == [False, True, True]
    got = offsets_of(table)
    assert (1, 0, 0) not in got and got[(3, 3, 3)] >= 50 and got[(0, 0, 1)] >= 50
    assert len(got) == 4 == len(table)
    assert offsets_of(table.compact()) == got


def test_due_rows_and_min_deadline_skip_superseded_base_rows() -> None:
    table = OffsetTable.from_base(rows([(1, 0, 0, 0), (2, 0, 0, 1), (3, 0, 0, 2)]))
    assert table.min_deadline() == 100
    # Supersede the earliest row with a later deadline.
    moved = rows([(1, 0, 0, 0)])
    moved = Rows(**{**moved.__dict__, "deadline": np.array([500], np.int64)})
    table, _ = table.write(moved, np.array([False]))
    assert table.min_deadline() == 101
    assert sorted(table.due(101).partition.tolist()) == [1]
    assert sorted(table.due(500).partition.tolist()) == [0, 1, 2]
    gone, _ = table.write(table.live_rows().sorted_by_key(), np.ones(3, dtype=bool))
    assert gone.min_deadline() == NEVER and len(gone) == 0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 300), st.integers(0, 2**32), st.booleans())
def test_min_deadline_is_the_smallest_live_deadline(
    superseded: int, seed: int, tombs: bool
) -> None:
    # More base rows than Rows.earliest keeps, deadlines shuffled: superseding the first
    # ``superseded`` in deadline order (past the earliest ones too) with later deadlines, or
    # deleting them, must leave min_deadline the smallest deadline of a live row.
    rng = np.random.default_rng(seed)
    n = 200
    base = rows([(i, i, 0, 0) for i in range(n)])
    base = base.with_deadline(rng.permutation(n).astype(np.int64) * 10 + 1_000)
    table = OffsetTable.from_base(base)
    hit = base.take(np.argsort(base.deadline)[: min(superseded, n)]).sorted_by_key()
    table, _ = table.write(
        hit.with_deadline(hit.deadline + 5_000), np.full(len(hit), tombs, dtype=bool)
    )
    live = table.live_rows().deadline
    assert table.min_deadline() == (int(live.min()) if live.size else NEVER)


def test_dictionary_lookup_with_colliding_hashes() -> None:
    names = pa.array(["a", "b", "c"], pa.large_string())
    d = StringDict.build(names, np.array([5, 5, 6], np.uint64))
    query = pa.array(["b", "a", "z", "c"], pa.large_string())
    assert d.lookup(query, np.array([5, 5, 5, 6], np.uint64)).tolist() == [1, 0, -1, 2]


names_strategy = st.lists(
    st.sampled_from(["a", "b", "c", "d", "é", "", "grp-1", "grp-2"]), max_size=40
)


@settings(max_examples=200, deadline=None)
@given(names_strategy, names_strategy, st.integers(1, 4))
def test_dictionary_lookups_and_codes_follow_first_appearance(
    existing: list[str], query: list[str], buckets: int
) -> None:
    # Against the plain statement: first appearance gives the code.
    known = list(dict.fromkeys(existing))
    query_array = pa.array(query, pa.large_string())
    expected = [known.index(q) if q in known else -1 for q in query]

    # Hashes squeezed into a few buckets: most lookups meet collisions.
    def squeezed(values: list[str]) -> np.ndarray:
        return np.array([len(v.encode()) % buckets for v in values], np.uint64)

    colliding = StringDict.build(pa.array(known, pa.large_string()), squeezed(known))
    assert colliding.lookup(query_array, squeezed(query)).tolist() == expected

    d = StringDict.build(
        pa.array(known, pa.large_string()), string_hash(pa.array(known, pa.large_string()))
    )
    assert d.lookup(query_array, string_hash(query_array)).tolist() == expected
    grown, codes = d.encode(query_array)
    order = known + [q for q in dict.fromkeys(query) if q not in known]
    assert codes.tolist() == [order.index(q) for q in query]
    assert grown.names.to_pylist() == order
    everything = pa.array(order, pa.large_string())
    assert grown.lookup(everything, string_hash(everything)).tolist() == list(range(len(order)))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.none() | st.text(max_size=30), max_size=12))
def test_string_hash_of_few_strings_is_the_columns_hash(texts: list[str | None]) -> None:
    # Few strings are hashed one by one in Python, more over the column: the same stored hash.
    few = pa.array(texts, pa.large_string())
    many = pa.array(texts * 3 + ["x"] * 20, pa.large_string())
    assert string_hash(few).tolist() == string_hash(many).tolist()[: len(texts)]
