"""Names and metadata as the sinks store them: every Kafka string, NUL included.

PostgreSQL ``text`` cannot hold NUL, and a Kafka group id, topic or commit metadata may contain
one. Both sinks store such a string with one escape: ``U+FFFF`` (a Unicode noncharacter) is
written twice, and NUL is written as ``U+FFFF`` followed by ``0``. Strings without either —
all but the rarest — are stored as they are, so SQL over the tables reads them unchanged. The
sink's readers take and return the original strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, overload

import pyarrow as pa
import pyarrow.compute as pc

#: The escape character: Unicode's last noncharacter of the Basic Multilingual Plane.
ESCAPE: Final = "\uffff"
_NUL: Final = "\x00"


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
    out = []
    i = 0
    while i < len(stored):
        c = stored[i]
        if c == ESCAPE and i + 1 < len(stored):
            out.append(_NUL if stored[i + 1] == "0" else ESCAPE)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


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
