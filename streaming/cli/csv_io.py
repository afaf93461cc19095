"""The ``export``/``import`` file format: CSV with a header, one committed offset a line.

Columns (:data:`CSV_COLUMNS`): group, topic, partition, offset, leader_epoch, metadata. The
``csv`` module quotes metadata holding commas, quotes or newlines, so any metadata round-trips.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Final

from streaming.cli.errors import UsageError

#: Columns of ``export`` and ``import`` files, in order.
CSV_COLUMNS: Final = ("group", "topic", "partition", "offset", "leader_epoch", "metadata")


@dataclass(frozen=True, slots=True)
class CsvOffset:
    """One line of an export/import file."""

    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


def write_csv(rows: Iterable[CsvOffset], out: IO[str]) -> int:
    """Write the header and ``rows``; returns the number of rows."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    n = 0
    for r in rows:
        writer.writerow([r.group, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata])
        n += 1
    return n


def read_csv(source: IO[str], name: str = "input") -> list[CsvOffset]:
    """Parse an export file: the header must be :data:`CSV_COLUMNS` (``leader_epoch`` and
    ``metadata`` may be empty). Raises :class:`UsageError` naming the line at fault, including
    for a partition listed twice for one group (which offset wins would be a guess)."""
    reader = csv.reader(source)
    header = next(reader, None)
    if header is None:
        raise UsageError(f"{name}: empty file (expected a header {','.join(CSV_COLUMNS)})")
    if tuple(h.strip() for h in header) != CSV_COLUMNS:
        raise UsageError(f"{name}: line 1: expected header {','.join(CSV_COLUMNS)}")
    rows: list[CsvOffset] = []
    seen: dict[tuple[str, str, int], int] = {}
    for values in reader:
        line = reader.line_num
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != len(CSV_COLUMNS):
            raise UsageError(f"{name}: line {line}: expected {len(CSV_COLUMNS)} columns")
        group, topic, partition, offset, epoch, metadata = values
        if not group or not topic:
            raise UsageError(f"{name}: line {line}: group and topic must not be empty")
        try:
            p = int(partition)
            o = int(offset)
            e = int(epoch) if epoch.strip() else -1
        except ValueError:
            raise UsageError(
                f"{name}: line {line}: partition, offset and leader_epoch must be integers"
            ) from None
        if p < 0 or o < 0:
            raise UsageError(f"{name}: line {line}: partition and offset must be >= 0")
        key = (group, topic, p)
        if key in seen:
            raise UsageError(
                f"{name}: line {line}: {group} {topic}-{p} already given on line {seen[key]}"
            )
        seen[key] = line
        rows.append(CsvOffset(group, topic, p, o, e, metadata))
    return rows


def read_csv_file(path: str) -> list[CsvOffset]:
    """:func:`read_csv` of the file at ``path`` (``-``: stdin); a file that cannot be read is
    a :class:`UsageError` too."""
    try:
        if path == "-":
            return read_csv(sys.stdin, "stdin")
        with open(path, newline="", encoding="utf-8") as handle:
            return read_csv(handle, path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
