"""Tables, timestamps, JSON records and the progress line (no services)."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from streaming.cli.output import (
    GROUP_ID,
    Progress,
    attributes,
    format_table,
    format_timestamp,
    short_metadata,
)


def test_tables_align_columns_and_show_missing_values_as_dashes() -> None:
    table = format_table(
        ("GROUP", "PARTITION", "LAG"), [("payments", 0, 12345), ("g", 10, None), ("x\ny", 1, 0)]
    )
    assert table.splitlines() == [
        "GROUP     PARTITION  LAG",
        "payments  0          12345",
        "g         10         -",
        "x\\ny      1          0",
    ]
    assert format_table(("A",), []) == "A"
    with pytest.raises(ValueError, match="cells"):
        format_table(("A", "B"), [(1,)])


def test_timestamps_are_iso_8601_utc_with_milliseconds() -> None:
    assert format_timestamp(1_500) == "1970-01-01T00:00:01.500Z"
    assert format_timestamp(-1) is None


def test_long_metadata_is_cut_for_a_table_cell() -> None:
    assert short_metadata("x" * 40) == "x" * 40
    assert short_metadata("x" * 41) == "x" * 37 + "..."


def test_json_records_keep_key_order_and_rename_the_group() -> None:
    entry = SimpleNamespace(group_id="g", topic="t", partition=0)
    record = attributes(entry, ("group", "topic", "partition"), GROUP_ID)
    assert list(record.items()) == [("group", "g"), ("topic", "t"), ("partition", 0)]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    progress = Progress("importing", 3, quiet)
    progress.update(1)
    progress.finish()
    assert quiet.getvalue() == ""
    terminal = FakeTerminal()
    progress = Progress("importing", 3, terminal)
    progress.update(1)
    progress.update(3)
    progress.finish()
    assert "\rimporting: 1/3" in terminal.getvalue()
    assert "\rimporting: 3/3" in terminal.getvalue()
    assert terminal.getvalue().endswith("\r")
