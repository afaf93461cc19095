"""What the CLI prints: aligned tables for people (``kafka-consumer-groups.sh`` style),
timestamps, JSON records and errors for ``--json``, a progress line."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TextIO

from connectors.client.errors import OffsetsError, OffsetsRequestError, describe_error
from state.coordinator.model import TopicPartition


def _cell(value: object) -> str:
    """One table cell: None as ``-``, control characters escaped (a row stays one line)."""
    text = "-" if value is None else str(value)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Rows as left-aligned columns two spaces apart, headers first, no trailing spaces."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, expected {len(headers)}")
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(headers), *cells]
    ]
    return "\n".join(lines)


def short_metadata(metadata: str, limit: int = 40) -> str:
    """Commit metadata cut for a table cell (``...`` marks the cut; ``--json`` shows all)."""
    return metadata if len(metadata) <= limit else metadata[: limit - 3] + "..."


def format_timestamp(ms: int | None) -> str | None:
    """Epoch ms as ISO 8601 UTC with milliseconds; None for unknown (-1 or None)."""
    if ms is None or ms < 0:
        return None
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


#: ``renamed`` for the records that call the group ``group_id`` (JSON says ``group``).
GROUP_ID: Final[Mapping[str, str]] = {"group": "group_id"}


def attributes(
    obj: object, keys: Sequence[str], renamed: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``{key: obj.<key>}`` in ``keys`` order (``renamed``: a key's attribute, if other)."""
    renamed = renamed or {}
    return {key: getattr(obj, renamed.get(key, key)) for key in keys}


def error_json(exc: OffsetsError) -> dict[str, Any]:
    """The ``error`` object of a failed Kafka operation (with each partition's error)."""
    data: dict[str, Any] = {
        "code": int(exc.error_code),
        "name": describe_error(exc.error_code).split(" ")[0],
        "message": exc.message or str(exc),
    }
    if isinstance(exc, OffsetsRequestError):
        data["partitions"] = partition_errors(sorted(exc.partitions.items()))
    return data


def partition_errors(codes: Iterable[tuple[TopicPartition, int]]) -> list[dict[str, Any]]:
    """Each partition's error code as JSON: topic, partition, error_code, error (None: none)."""
    return [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "error_code": int(code),
            "error": describe_error(code) if code else None,
        }
        for tp, code in codes
    ]


def error_text(exc: OffsetsError) -> str:
    """A Kafka error as one line naming its code once."""
    if exc.message and describe_error(exc.error_code) in exc.message:
        return exc.message
    return str(exc)


def print_offsets_error(out: TextIO, err: TextIO, json_mode: bool, exc: OffsetsError) -> None:
    """A Kafka error that ended the command: on stderr, and as JSON on stdout with ``--json``."""
    if json_mode:
        out.write(json.dumps({"error": error_json(exc)}, indent=2) + "\n")
    err.write(f"error: {error_text(exc)}\n")


def print_failure(out: TextIO, err: TextIO, json_mode: bool, name: str, message: str) -> None:
    """A failure without a Kafka error code: on stderr, and with ``--json`` an error object
    with ``code`` null on stdout."""
    if json_mode:
        out.write(json.dumps({"error": {"code": None, "name": name, "message": message}}) + "\n")
    err.write(f"error: {message}\n")


class Progress:
    """``label: done/total`` rewritten in place on ``stream``, only when it is a terminal."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty()) and total > 0
        self._width = 0

    def update(self, done: int) -> None:
        if self.enabled:
            text = f"\r{self.label}: {done}/{self.total}"
            self._width = max(self._width, len(text))
            self.stream.write(text)
            self.stream.flush()

    def finish(self) -> None:
        """Erase the line, leaving the cursor where it started."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
