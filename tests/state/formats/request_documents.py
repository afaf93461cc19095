"""Hypothesis strategies for raw ingest messages: valid requests and adversarial near-misses.

Documents are built as ``Obj`` trees (an object is a list of key/value pairs, so a key can repeat)
and written by ``dumps``, which can escape keys and non-ASCII text and pretty-print, so the bytes
reach what ``json.dumps`` of a dict cannot: repeated keys at any level, keys spelled with
``\\u`` escapes, NaN and other raw tokens, lone surrogates escaped or as invalid UTF-8. Values
come from ``tests.state.strategies`` (requests of every api) and ``tests.conformance.generators``
(the edges of each field).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from state.formats.request_codec import encode_request
from tests.conformance.generators import (
    GROUP_KINDS,
    INVALID_TOPICS,
    LEADER_EPOCHS,
    METADATA,
    OFFSETS,
    RETENTIONS,
)
from tests.state.strategies import commits, requests


@dataclass(frozen=True)
class Escaped:
    """An object key written with its first character as a ``\\u`` escape: the same key."""

    key: str


class Obj(list[tuple[str | Escaped, Any]]):
    """A JSON object as its (key, value) pairs in order; a key may repeat."""


@dataclass(frozen=True)
class Raw:
    """A JSON token written verbatim (NaN, ``1E400``, ``-0``...), valid JSON or not."""

    text: str


def to_obj(value: Any) -> Any:
    """A parsed JSON value (dicts) as an ``Obj`` tree."""
    if isinstance(value, dict):
        return Obj((k, to_obj(v)) for k, v in value.items())
    if isinstance(value, list):
        return [to_obj(v) for v in value]
    return value


def dumps(value: Any, ascii_only: bool = False, pretty: bool = False) -> str:
    """``value`` as JSON text (``json.dumps`` for scalars), ``Obj`` pairs in their order."""
    colon, comma = (" : ", ",\n  ") if pretty else (":", ",")

    def text(v: Any) -> str:
        if isinstance(v, Raw):
            return v.text
        if isinstance(v, Obj):
            return "{" + comma.join(key(k) + colon + text(x) for k, x in v) + "}"
        if isinstance(v, list):
            return "[" + comma.join(text(x) for x in v) + "]"
        return json.dumps(v, ensure_ascii=ascii_only)

    def key(k: str | Escaped) -> str:
        if isinstance(k, Escaped):
            rest = json.dumps(k.key[1:], ensure_ascii=ascii_only)[1:]
            return f'"{_escape(k.key[0])}{rest}'
        return json.dumps(k, ensure_ascii=ascii_only)

    return text(value)


def _escape(char: str) -> str:
    """``char`` as a JSON ``\\u`` escape (a surrogate pair beyond the BMP)."""
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _key_name(k: str | Escaped) -> str:
    return k.key if isinstance(k, Escaped) else k


# --- valid OffsetCommit documents ---------------------------------------------------------------

#: Strings a request may carry: plain, empty, colons (the fast path counts colons), escapes,
#: multi-byte and astral characters, NUL, long ones.
texts = st.sampled_from(
    [
        "",
        "t",
        "topic-1",
        "host:9092",
        "a:b:c",
        'q"uote',
        "line\nbreak",
        "back\\slash",
        "é€😀𝄞",
        *INVALID_TOPICS,
    ]
) | st.text(max_size=12)
group_ids = st.sampled_from([kind("tag") for kind in GROUP_KINDS.values()]) | texts
int32s = st.sampled_from(LEADER_EPOCHS) | st.integers(-(2**31), 2**31 - 1)
int64s = st.sampled_from(OFFSETS + RETENTIONS) | st.integers(-(2**63), 2**63 - 1)
metadata = st.sampled_from(METADATA) | texts


@st.composite
def partition_objects(draw: st.DrawFn) -> Obj:
    obj = Obj([("partitionIndex", draw(int32s)), ("committedOffset", draw(int64s))])
    if draw(st.booleans()):
        obj.append(("committedLeaderEpoch", draw(int32s)))
    if draw(st.booleans()):
        obj.append(("committedMetadata", draw(metadata)))  # null included
    return _shuffled(draw, obj)


@st.composite
def topic_objects(draw: st.DrawFn) -> Obj:
    parts = draw(st.lists(partition_objects(), min_size=0, max_size=4))
    return _shuffled(draw, Obj([("name", draw(texts)), ("partitions", parts)]))


@st.composite
def commit_objects(draw: st.DrawFn) -> Obj:
    """A valid OffsetCommit document: required fields, any subset of the optional ones."""
    obj = Obj(
        [
            ("version", 1),
            ("api", "OffsetCommit"),
            ("requestId", draw(texts)),
            ("groupId", draw(group_ids)),
            ("topics", draw(st.lists(topic_objects(), min_size=0, max_size=3))),
        ]
    )
    optional: list[tuple[str, st.SearchStrategy[Any]]] = [
        ("timeoutMs", st.none() | st.integers(0, 2**31 - 1)),
        ("generationId", int32s),
        ("memberId", texts),
        ("groupInstanceId", st.none() | texts),
        ("retentionTimeMs", int64s),
    ]
    for name, values in optional:
        if draw(st.booleans()):
            obj.append((name, draw(values)))
    return _shuffled(draw, obj)


def _shuffled(draw: st.DrawFn, obj: Obj) -> Obj:
    return Obj(draw(st.permutations(obj))) if draw(st.booleans()) else obj


#: Valid requests: the encoder's commits (``tests.state.strategies``), any api, and commit
#: documents spelled every way the format allows.
valid_documents = (
    commits().map(lambda r: to_obj(json.loads(encode_request(r))))
    | requests.map(lambda r: to_obj(json.loads(encode_request(r))))
    | commit_objects()
)


# --- adversarial edits --------------------------------------------------------------------------

#: Values that break a field's type or range, or the JSON itself.
bad_values = (
    st.sampled_from(
        [
            True,
            False,
            None,
            0,
            -1,
            1.0,
            -0.0,
            0.5,
            1e300,
            2**31 - 1,
            2**31,
            -(2**31),
            -(2**31) - 1,
            2**63 - 1,
            2**63,
            -(2**63),
            -(2**63) - 1,
            2**64,
            10**30,
            "",
            "1",
            "x:y",
            "\ud800",
            "\udc00x",
            "x" * 5000,
            "OffsetDelete",
            [],
            Obj(),
            [1],
            Obj([("a", 1), ("a", 2)]),
            Raw("NaN"),
            Raw("-Infinity"),
            Raw("1E400"),
            Raw("-0"),
            Raw("1.0e0"),
            Raw("01"),
        ]
    )
    | st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=6),
        lambda children: st.lists(children, max_size=3)
        | st.lists(st.tuples(st.text(max_size=4), children), max_size=3).map(Obj),
        max_leaves=6,
    )
    # Edits change objects in place: every value drawn is a copy, never a shared constant (an
    # edited constant made later draws differ from earlier ones, which Hypothesis refuses).
).map(copy.deepcopy)


def _objects(value: Any) -> list[Obj]:
    """Every object in a document, outermost first."""
    found = []
    if isinstance(value, Obj):
        found.append(value)
        for _, v in value:
            found += _objects(v)
    elif isinstance(value, list):
        for v in value:
            found += _objects(v)
    return found


@st.composite
def edited(draw: st.DrawFn, doc: Any) -> Any:
    """``doc`` with one edit in one of its objects (chosen at any depth): a value replaced, a key
    removed, repeated (same or other value, maybe escaped), added (unknown) or respelled."""
    objects = _objects(doc)
    if not objects:
        return doc
    obj = draw(st.sampled_from(objects))
    edit = draw(st.sampled_from(["replace", "remove", "repeat", "unknown", "escape", "empty"]))
    if edit == "unknown" or not obj:
        obj.append((draw(st.text(max_size=8)), draw(bad_values)))
        return doc
    i = draw(st.integers(0, len(obj) - 1))
    k, v = obj[i]
    if edit == "replace":
        obj[i] = (k, draw(bad_values))
    elif edit == "remove":
        del obj[i]
    elif edit == "repeat":
        value = v if draw(st.booleans()) else draw(bad_values)
        again = Escaped(_key_name(k)) if draw(st.booleans()) and _key_name(k) else k
        obj.insert(draw(st.integers(0, len(obj))), (again, value))
    elif edit == "escape" and _key_name(k):
        obj[i] = (Escaped(_key_name(k)), v)
    elif edit == "empty":
        obj[i] = (k, [] if isinstance(v, list) else v)
    return doc


@st.composite
def documents(draw: st.DrawFn) -> Any:
    """A valid document with 0 to 3 edits, or any JSON value."""
    if draw(st.integers(0, 9)) == 0:
        return draw(bad_values)
    doc = draw(valid_documents)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        doc = draw(edited(doc))
    return doc


@st.composite
def message_values(draw: st.DrawFn) -> bytes | None:
    """The value of one ingest message: a document written some way, maybe corrupted bytes."""
    doc = draw(documents())
    text = dumps(doc, ascii_only=draw(st.booleans()), pretty=draw(st.integers(0, 4)) == 0)
    # A lone surrogate (unescaped) becomes invalid UTF-8, as a broken producer would write it.
    data = text.encode("utf-8", "surrogatepass")
    corruption = draw(st.sampled_from(["none"] * 8 + ["byte", "cut", "bom", "junk", "null"]))
    if corruption == "byte":
        at = draw(st.integers(0, len(data)))
        bad = draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\x00", b":"]))
        data = data[:at] + bad + data[at:]
    elif corruption == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif corruption == "bom":
        data = b"\xef\xbb\xbf" + data
    elif corruption == "junk":
        data = data + draw(st.sampled_from([b" x", b"\x0b", b"}", b" \n"]))
    elif corruption == "null":
        return draw(st.sampled_from([None, b""]))
    return data


@st.composite
def message_batches(
    draw: st.DrawFn,
) -> list[tuple[int, int, bytes | bytearray | memoryview | None]]:
    """Ingest messages as ``decode_request_messages`` takes them, values in any buffer type."""
    values = draw(st.lists(message_values(), max_size=8))
    start = draw(st.integers(0, 2**40))
    batch: list[tuple[int, int, bytes | bytearray | memoryview | None]] = []
    for i, value in enumerate(values):
        wrap = draw(st.sampled_from([bytes, bytes, bytearray, memoryview]))
        batch.append(
            (start + i, draw(st.integers(0, 2**45)), value if value is None else wrap(value))
        )
    return batch
