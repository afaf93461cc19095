"""How the sinks store strings: NUL escaped, everything else as it is, and back."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.sinks.text import ESCAPE, original_text, stored_column, stored_text

#: Text that often holds the two characters the escaping is about. No lone surrogates: Kafka's
#: strings travel as UTF-8, which cannot carry them (and Arrow refuses them).
texts = st.text(
    alphabet=st.sampled_from(["a", "é", "😀", "\x00", ESCAPE, "0"])
    | st.characters(exclude_categories=("Cs",))
)


@settings(deadline=None)  # a loaded machine must not fail a pure check
@given(texts)
def test_every_string_comes_back_and_none_is_stored_with_nul(text: str) -> None:
    stored = stored_text(text)
    assert "\x00" not in stored
    assert original_text(stored) == text


@settings(deadline=None)
@given(st.lists(texts | st.none(), max_size=8))
def test_a_column_is_stored_as_its_values_are(values: list[str | None]) -> None:
    column = stored_column(pa.array(values, pa.string()))
    assert column.to_pylist() == [None if v is None else stored_text(v) for v in values]


def test_strings_without_nul_or_the_escape_are_stored_unchanged() -> None:
    for text in ["", "orders", "grüppe-😀", "a\\0b"]:
        assert stored_text(text) == text
    assert stored_text("a\x00b") == f"a{ESCAPE}0b"
    assert stored_text(f"x{ESCAPE}0") == f"x{ESCAPE}{ESCAPE}0"
    assert stored_text(None) is None and original_text(None) is None
