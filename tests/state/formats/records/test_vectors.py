"""The hand-written wire helpers of ``vectors``, pinned to literal bytes: they are the ground
truth for the other tests."""

from __future__ import annotations

from tests.state.formats.records.vectors import b32, cs, s, uv


def test_wire_helpers_match_literal_bytes() -> None:
    # The helpers above are the ground truth for the other tests; pin them to literal bytes.
    assert s("ab") == b"\x00\x02ab"
    assert s(None) == b"\xff\xff"
    assert uv(0) == b"\x00"
    assert uv(127) == b"\x7f"
    assert uv(128) == b"\x80\x01"
    assert uv(300) == b"\xac\x02"
    assert cs("") == b"\x01"
    assert cs(None) == b"\x00"
    assert b32(b"\x01") == b"\x00\x00\x00\x01\x01"
