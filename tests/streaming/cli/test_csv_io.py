"""The export/import CSV format (no services)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from streaming.cli.commands.transfer import CsvOffset, read_csv, read_csv_file, write_csv
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
        ("group,topic\n", "expected header"),
        ("g,bad topic!,0,1\n", "line 1: topic 'bad topic!' can never exist"),
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


def test_kafkas_reset_offsets_export_is_read_in_both_forms() -> None:
    # kafka-consumer-groups.sh --reset-offsets --export: one group, then several groups.
    one = read_csv(io.StringIO("orders,0,42\norders,1,17\n"), group="payments")
    assert one == [CsvOffset("payments", "orders", 0, 42), CsvOffset("payments", "orders", 1, 17)]
    several = read_csv(io.StringIO("g1,orders,0,5\ng2,orders,0,6\n"))
    assert several == [CsvOffset("g1", "orders", 0, 5), CsvOffset("g2", "orders", 0, 6)]
    named = read_csv(io.StringIO("topic,partition,offset\norders,2,9\n"), group="g")
    assert named == [CsvOffset("g", "orders", 2, 9)]


def test_kafkas_one_group_export_needs_its_group() -> None:
    with pytest.raises(UsageError, match="name its group with --group"):
        read_csv(io.StringIO("orders,0,42\n"))
    with pytest.raises(UsageError, match="--group is for Kafka's"):
        read_csv(io.StringIO("g1,orders,0,5\n"), group="g")
    with pytest.raises(UsageError, match="line 2: partition and offset must be >= 0"):
        read_csv(io.StringIO("orders,0,42\norders,-1,1\n"), group="g")
