"""The ``export``/``import`` file format: CSV with a header, one committed offset a line.

Columns (:data:`CSV_COLUMNS`): group, topic, partition, offset, leader_epoch, metadata. The
``csv`` module quotes metadata holding commas, quotes or newlines, so any metadata round-trips.

``import`` also reads the CSV of Kafka's ``kafka-consumer-groups.sh --reset-offsets --export``
(what its ``--from-file`` reads): no header, ``topic,partition,offset`` for one group (named
with ``--group``) or ``group,topic,partition,offset`` for several.
"""

from __future__ import annotations

import csv
import itertools
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Final

from streaming.cli.errors import UsageError
from streaming.cli.validation import check_topic

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


#: What each form of Kafka's export gives, in its column order.
_KAFKA_FORMS: Final = {3: "topic,partition,offset", 4: "group,topic,partition,offset"}


def read_csv(source: IO[str], name: str = "input", group: str | None = None) -> list[CsvOffset]:
    """Parse an export file: this tool's, whose header is :data:`CSV_COLUMNS` (``leader_epoch``
    and ``metadata`` may be empty), or Kafka's headerless ``topic,partition,offset`` (the
    rows of ``group``, required then) or ``group,topic,partition,offset``. Raises
    :class:`UsageError` naming the line at fault, including for a topic name Kafka cannot
    have and a partition listed twice for one group (which offset wins would be a guess)."""
    reader = csv.reader(source)
    header = next(reader, None)
    if header is None:
        raise UsageError(f"{name}: empty file (expected a header {','.join(CSV_COLUMNS)})")
    if tuple(h.strip() for h in header) == CSV_COLUMNS:
        width, lines = len(CSV_COLUMNS), iter(reader)
    elif len(header) in _KAFKA_FORMS:
        width = len(header)
        # Kafka writes no header; one naming Kafka's columns is taken as such.
        named = ",".join(h.strip().lower() for h in header) == _KAFKA_FORMS[width]
        lines = iter(reader) if named else itertools.chain([header], reader)
        if width == 3 and group is None:
            raise UsageError(
                f"{name}: Kafka's one-group export (topic,partition,offset): name its group "
                "with --group"
            )
    else:
        raise UsageError(
            f"{name}: line 1: expected header {','.join(CSV_COLUMNS)}, or Kafka's export "
            f"({' or '.join(_KAFKA_FORMS.values())})"
        )
    if group is not None and width != 3:
        raise UsageError(f"{name}: names its groups; --group is for Kafka's topic,partition,offset")
    rows: list[CsvOffset] = []
    seen: dict[tuple[str, str, int], int] = {}
    for values in lines:
        line = reader.line_num
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != width:
            raise UsageError(f"{name}: line {line}: expected {width} columns")
        if width == 3:
            values = [group or "", *values, "", ""]
        elif width == 4:
            values = [*values, "", ""]
        row_group, topic, partition, offset, epoch, metadata = values
        if not topic:
            raise UsageError(f"{name}: line {line}: topic must not be empty")
        check_topic(topic, f"{name}: line {line}: topic")
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
        key = (row_group, topic, p)
        if key in seen:
            raise UsageError(
                f"{name}: line {line}: {row_group} {topic}-{p} already given on line {seen[key]}"
            )
        seen[key] = line
        rows.append(CsvOffset(row_group, topic, p, o, e, metadata))
    return rows


def read_csv_file(path: str, group: str | None = None) -> list[CsvOffset]:
    """:func:`read_csv` of the file at ``path`` (``-``: stdin); a file that cannot be read is
    a :class:`UsageError` too."""
    try:
        if path == "-":
            return read_csv(sys.stdin, "stdin", group)
        with open(path, newline="", encoding="utf-8") as handle:
            return read_csv(handle, path, group)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
