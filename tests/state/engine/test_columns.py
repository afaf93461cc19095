"""The engine's column helpers: Arrow to numpy/Python, saturating addition, last write wins."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from state.engine.columns import (
    INT64_MAX,
    arrow_column,
    last_index_per_key,
    last_rows_per_key,
    numpy_column,
    python_list,
    saturating_add,
)


def chunked(name: str, *chunks: list[object], type_: pa.DataType) -> pa.Table:
    return pa.table({name: pa.chunked_array([pa.array(c, type_) for c in chunks], type_)})


# --- arrow_column ------------------------------------------------------------------------------


def test_arrow_column_one_chunk_is_the_chunk_itself() -> None:
    table = chunked("x", [1, 2, 3], type_=pa.int64())
    column = arrow_column(table, "x")
    assert isinstance(column, pa.Array)
    assert column.to_pylist() == [1, 2, 3]
    # No copy: the same buffer as the table's chunk.
    assert column.buffers()[1].address == table["x"].chunk(0).buffers()[1].address


def test_arrow_column_combines_chunks() -> None:
    table = chunked("x", [1, 2], [], [3], type_=pa.int32())
    column = arrow_column(table, "x")
    assert isinstance(column, pa.Array)
    assert column.type == pa.int32()
    assert column.to_pylist() == [1, 2, 3]


def test_arrow_column_without_chunks_is_empty_of_its_type() -> None:
    table = pa.table({"x": pa.chunked_array([], pa.string())})
    column = arrow_column(table, "x")
    assert isinstance(column, pa.Array)
    assert column.type == pa.string()
    assert len(column) == 0


# --- numpy_column ------------------------------------------------------------------------------


def test_numpy_column_is_zero_copy_without_nulls() -> None:
    table = chunked("x", [5, 6, 7], type_=pa.int64())
    values = numpy_column(table, "x")
    assert values.dtype == np.int64
    assert values.tolist() == [5, 6, 7]
    assert values.ctypes.data == table["x"].chunk(0).buffers()[1].address
    # A dtype it already has is not a copy either.
    assert numpy_column(table, "x", np.int64).ctypes.data == values.ctypes.data


def test_numpy_column_casts_to_dtype() -> None:
    table = chunked("x", [1, -2], [3], type_=pa.int32())
    values = numpy_column(table, "x", np.int64)
    assert values.dtype == np.int64
    assert values.tolist() == [1, -2, 3]


def test_numpy_column_fills_nulls_exactly() -> None:
    big = 2**62 + 1  # not representable as float64: must not pass through one
    table = chunked("x", [big, None], [None, 4], type_=pa.int64())
    assert numpy_column(table, "x", np.int64, -1).tolist() == [big, -1, -1, 4]
    assert numpy_column(table, "x", np.int64, 0).tolist() == [big, 0, 0, 4]


def test_numpy_column_fill_without_nulls_keeps_values() -> None:
    table = chunked("x", [1, 2], type_=pa.int64())
    assert numpy_column(table, "x", np.int64, 9).tolist() == [1, 2]


def test_numpy_column_unpacks_bools() -> None:
    table = chunked("b", [True, False], [True], type_=pa.bool_())
    values = numpy_column(table, "b")
    assert values.dtype == np.bool_
    assert values.tolist() == [True, False, True]


def test_numpy_column_empty() -> None:
    table = pa.table({"x": pa.chunked_array([], pa.int64())})
    values = numpy_column(table, "x", np.int64, 0)
    assert values.dtype == np.int64
    assert values.size == 0


# --- python_list -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "type_"),
    [
        ([1, None, 2**62 + 1, -(2**63)], pa.int64()),
        ([1, 2, 3], pa.int32()),
        ([None, None], pa.int64()),
        (["a", None, "ü", ""], pa.string()),
        (["a", None], pa.large_string()),
        ([b"x", None, b""], pa.binary()),
        ([b"\x00\xff", None], pa.large_binary()),
        ([True, None, False], pa.bool_()),
        ([], pa.int64()),
        ([], pa.string()),
        ([], pa.binary()),
    ],
)
def test_python_list_equals_to_pylist(values: list[object], type_: pa.DataType) -> None:
    array = pa.array(values, type_)
    both = pa.chunked_array([array, array], type_)
    for column in (array, both):
        found = python_list(column)
        assert found == column.to_pylist()
        # Python's own types (a memoryview would compare equal to bytes, and fail a producer).
        assert [type(v) for v in found] == [type(v) for v in column.to_pylist()]


def test_python_list_keeps_int64_exact() -> None:
    (value,) = python_list(pa.array([2**63 - 1], pa.int64()))
    assert value == 2**63 - 1 and type(value) is int


# --- saturating_add ----------------------------------------------------------------------------


def test_saturating_add_plain_sums() -> None:
    values = np.array([0, 1, -5, 1_000], dtype=np.int64)
    assert saturating_add(values, 10).tolist() == [10, 11, 5, 1_010]


def test_saturating_add_saturates_at_int64_max() -> None:
    values = np.array([INT64_MAX - 10, INT64_MAX - 9, INT64_MAX, 0], dtype=np.int64)
    result = saturating_add(values, 10)
    assert result.dtype == np.int64
    assert result.tolist() == [INT64_MAX, INT64_MAX, INT64_MAX, 10]


def test_saturating_add_per_row_amounts() -> None:
    values = np.array([INT64_MAX - 1, INT64_MAX - 1, 7, -3], dtype=np.int64)
    amounts = np.array([1, 2, 0, INT64_MAX], dtype=np.int64)
    assert saturating_add(values, amounts).tolist() == [
        INT64_MAX,
        INT64_MAX,
        7,
        INT64_MAX - 3,
    ]


def test_saturating_add_huge_amount() -> None:
    values = np.array([1, 0, -1], dtype=np.int64)
    assert saturating_add(values, int(INT64_MAX)).tolist() == [INT64_MAX, INT64_MAX, INT64_MAX - 1]


def test_saturating_add_empty() -> None:
    result = saturating_add(np.zeros(0, np.int64), 5)
    assert result.size == 0


def test_saturating_add_leaves_input_alone() -> None:
    values = np.array([INT64_MAX, 1], dtype=np.int64)
    values.setflags(write=False)  # state arrays are often read-only views of the blob
    assert saturating_add(values, 1).tolist() == [INT64_MAX, 2]
    assert values.tolist() == [INT64_MAX, 1]


# --- last_index_per_key ------------------------------------------------------------------------


def test_last_index_per_key_keeps_the_last_row_of_each_key_in_log_order() -> None:
    group = np.array([0, 1, 0, 0, 1, 2])
    partition = np.array([0, 0, 1, 0, 0, 0], dtype=np.int32)
    # Keys: (0,0) rows 0 and 3; (1,0) rows 1 and 4; (0,1) row 2; (2,0) row 5.
    assert last_index_per_key(group, partition).tolist() == [2, 3, 4, 5]


def test_last_index_per_key_keeps_rewinds() -> None:
    # A later, smaller offset for the same key still wins: the key decides, not the value.
    group = np.array([3, 3, 3])
    offset = np.array([100, 5, 50])
    assert last_index_per_key(group)[0] == 2
    assert offset[last_index_per_key(group)].tolist() == [50]


def test_last_index_per_key_ties_take_the_latest_position() -> None:
    # All rows share one key: only the last stands, whatever the other columns hold.
    keys = (np.zeros(5, np.int64), np.ones(5, np.int64), np.full(5, 7, np.int32))
    assert last_index_per_key(*keys).tolist() == [4]


def test_last_index_per_key_distinct_keys_keep_every_row() -> None:
    group = np.array([5, 1, 3, 2])
    assert last_index_per_key(group).tolist() == [0, 1, 2, 3]


def test_last_index_per_key_compares_every_key_column() -> None:
    # Rows equal on two of three columns are different keys.
    g = np.array([0, 0, 0, 0])
    t = np.array([0, 1, 0, 1])
    p = np.array([0, 0, 1, 0])
    assert last_index_per_key(g, t, p).tolist() == [0, 2, 3]


def test_last_index_per_key_empty() -> None:
    result = last_index_per_key(np.zeros(0, np.int64), np.zeros(0, np.int32))
    assert result.dtype == np.int64
    assert result.size == 0
    assert last_index_per_key().size == 0


def test_last_index_per_key_matches_a_dict() -> None:
    rng = np.random.default_rng(3)
    g = rng.integers(0, 4, 500)
    t = rng.integers(0, 3, 500)
    p = rng.integers(0, 5, 500).astype(np.int32)
    last: dict[tuple[int, int, int], int] = {}
    for i, key in enumerate(zip(g.tolist(), t.tolist(), p.tolist(), strict=True)):
        last[key] = i
    assert last_index_per_key(g, t, p).tolist() == sorted(last.values())


# --- last_rows_per_key -------------------------------------------------------------------------


def test_last_rows_per_key_over_strings() -> None:
    table = pa.table(
        {
            "group": ["a", "b", "a", "a", "b"],
            "topic": ["t", "t", "u", "t", "t"],
            "position": pa.array([10, 11, 12, 13, 14], pa.int64()),
            "offset": [1, 2, 3, 0, 5],
        }
    )
    last = last_rows_per_key(table, ["group", "topic"], "position")
    assert last.column_names == table.column_names
    # (a,t) rewinds to 0 at position 13; (b,t) ends at 14; (a,u) at 12. In position order.
    assert last["position"].to_pylist() == [12, 13, 14]
    assert last["offset"].to_pylist() == [3, 0, 5]


def test_last_rows_per_key_positions_need_not_be_sorted() -> None:
    table = pa.table(
        {"key": ["x", "y", "x"], "position": pa.array([9, 1, 4], pa.int64()), "v": [1, 2, 3]}
    )
    last = last_rows_per_key(table, ["key"], "position")
    assert last["position"].to_pylist() == [1, 9]
    assert last["v"].to_pylist() == [2, 1]


def test_last_rows_per_key_null_keys_are_a_key() -> None:
    table = pa.table(
        {
            "key": pa.array([None, "a", None], pa.string()),
            "position": pa.array([0, 1, 2], pa.int64()),
        }
    )
    assert last_rows_per_key(table, ["key"], "position")["position"].to_pylist() == [1, 2]


def test_last_rows_per_key_empty() -> None:
    table = pa.table({"key": pa.array([], pa.string()), "position": pa.array([], pa.int64())})
    assert last_rows_per_key(table, ["key"], "position").num_rows == 0
