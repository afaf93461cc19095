"""Kafka strings as the sinks store them, NUL included (PostgreSQL ``text`` cannot hold it):
``U+FFFF`` (a noncharacter) is written twice and NUL as ``U+FFFF`` ``0``; any other string, all
but the rarest, as it is. The sink's readers take and return the original strings."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, overload

import pyarrow as pa
import pyarrow.compute as pc

ESCAPE: Final = "\uffff"
_NUL: Final = "\x00"
_ESCAPED: Final = re.compile(ESCAPE + "(.)", re.DOTALL)


@overload
def stored_text(text: str) -> str: ...


@overload
def stored_text(text: None) -> None: ...


def stored_text(text: str | None) -> str | None:
    """``text`` as the sinks store it."""
    if text is None or (_NUL not in text and ESCAPE not in text):
        return text
    return text.replace(ESCAPE, ESCAPE + ESCAPE).replace(_NUL, ESCAPE + "0")


@overload
def original_text(stored: str) -> str: ...


@overload
def original_text(stored: None) -> None: ...


def original_text(stored: str | None) -> str | None:
    """The string :func:`stored_text` stored as ``stored``."""
    if stored is None or ESCAPE not in stored:
        return stored
    return _ESCAPED.sub(lambda m: _NUL if m.group(1) == "0" else ESCAPE, stored)


def original_row(row: Sequence[Any], *texts: int) -> list[Any]:
    """``row`` with the strings at positions ``texts`` as they were before :func:`stored_text`."""
    found = list(row)
    for i in texts:
        found[i] = original_text(found[i])
    return found


def stored_column(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """:func:`stored_text` over a string column (unchanged when nothing needs escaping)."""
    if (
        not pc.any(pc.match_substring(values, _NUL)).as_py()
        and not pc.any(pc.match_substring(values, ESCAPE)).as_py()
    ):
        return values
    escaped = pc.replace_substring(values, ESCAPE, ESCAPE + ESCAPE)
    return pc.replace_substring(escaped, _NUL, ESCAPE + "0")


def original_column(values: pa.Array) -> pa.Array:
    """:func:`original_text` over a string column (unchanged when nothing is escaped)."""
    if not pc.any(pc.match_substring(values, ESCAPE)).as_py():
        return values
    return pa.array([original_text(v) for v in values.to_pylist()], pa.string())
