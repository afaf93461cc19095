"""The export/import CSV format (no services)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from streaming.cli.csv_io import CsvOffset, read_csv, read_csv_file, write_csv
from streaming.cli.errors import UsageError


def test_csv_round_trip_keeps_awkward_metadata() -> None:
    rows = [
        CsvOffset("g", "t", 0, 5, 3, 'has, comma and "quotes"\nand a newline'),
        CsvOffset("g", "t", 1, 6),
        CsvOffset("h,i", "u", 0, 0, -1, ""),
    ]
    buffer = io.StringIO()
    assert write_csv(rows, buffer) == 3
    assert buffer.getvalue().splitlines()[0] == "group,topic,partition,offset,leader_epoch,metadata"
    buffer.seek(0)
    assert read_csv(buffer) == rows


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty file"),
        ("group,topic,partition,offset\n", "expected header"),
        ("group,topic,partition,offset,leader_epoch,metadata\ng,t,x,1,,\n", "line 2: partition"),
        ("group,topic,partition,offset,leader_epoch,metadata\ng,t,0,-1,,\n", "line 2: .* >= 0"),
        ("group,topic,partition,offset,leader_epoch,metadata\ng,t,0\n", "line 2: expected 6"),
        (
            "group,topic,partition,offset,leader_epoch,metadata\ng,t,0,1,,\ng,t,0,2,,\n",
            "line 3.*line 2",
        ),
    ],
)
def test_bad_import_files_name_the_line(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        read_csv(io.StringIO(text))


def test_empty_leader_epoch_and_blank_lines_are_allowed() -> None:
    text = "group,topic,partition,offset,leader_epoch,metadata\ng,t,0,1,,\n\n"
    assert read_csv(io.StringIO(text)) == [CsvOffset("g", "t", 0, 1, -1, "")]


def test_files_are_read_by_name_and_a_missing_one_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "offsets.csv"
    path.write_text("group,topic,partition,offset,leader_epoch,metadata\ng,t,0,1,,\n")
    assert read_csv_file(str(path)) == [CsvOffset("g", "t", 0, 1)]
    with pytest.raises(UsageError, match="cannot read"):
        read_csv_file(str(tmp_path / "missing.csv"))
