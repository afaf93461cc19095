"""The columnar record encoders (``state.formats.record_columns``) byte for byte against the
tests' per-record statement of the layouts (``offset_encoders``, held to Kafka's own classes)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from state.coordinator.model import OffsetAndMetadata
from state.formats.record_columns import _FEW_ROWS, offset_commit_keys, offset_commit_values
from tests.state.formats.records.offset_encoders import (
    encode_offset_commit_key,
    encode_offset_commit_value,
)

strings = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            strings,
            strings,
            st.integers(0, 2**31 - 1),
            st.integers(-(2**63), 2**63 - 1),
            st.integers(-(2**31), 2**31 - 1),
            strings,
            st.integers(-(2**63), 2**63 - 1),
            st.none() | st.integers(0, 2**62),
            st.booleans(),
        ),
        max_size=20,
    )
)
def test_columnar_record_encoding_matches_the_record_codecs(rows: list[tuple]) -> None:
    groups, topics, parts, offsets, epochs, metas, commits, expires, tombs = (
        (list(c) for c in zip(*rows, strict=True)) if rows else ([],) * 9
    )
    key_columns = (
        pa.array(groups, pa.string()),
        pa.array(topics, pa.string()),
        np.array(parts, dtype=np.int32),
    )
    want_keys = [
        encode_offset_commit_key(g, t, p) for g, t, p in zip(groups, topics, parts, strict=True)
    ]
    value_columns = (
        np.array(offsets, dtype=np.int64),
        np.array(epochs, dtype=np.int32),
        pa.array(metas, pa.string()),
        np.array(commits, dtype=np.int64),
        np.array([-1 if e is None else e for e in expires], dtype=np.int64),
        np.array(tombs, dtype=bool),
    )
    want = [
        None if tomb else encode_offset_commit_value(OffsetAndMetadata(o, e, m, c, x))
        for o, e, m, c, x, tomb in zip(offsets, epochs, metas, commits, expires, tombs, strict=True)
    ]
    assert offset_commit_keys(*key_columns).to_pylist() == want_keys
    assert offset_commit_values(*value_columns).to_pylist() == want
    # Past _FEW_ROWS rows the columns are encoded by Arrow's kernels instead of row by row.
    times = _FEW_ROWS // max(len(rows), 1) + 1
    many_keys = [
        pa.concat_arrays([c] * times) if isinstance(c, pa.Array) else np.tile(c, times)
        for c in key_columns
    ]
    many_values = [
        pa.concat_arrays([c] * times) if isinstance(c, pa.Array) else np.tile(c, times)
        for c in value_columns
    ]
    assert offset_commit_keys(*many_keys).to_pylist() == want_keys * times
    assert offset_commit_values(*many_values).to_pylist() == want * times
