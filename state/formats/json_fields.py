"""Strict reading of the JSON of ingest messages: the parser and typed field readers.

The parser (``parse_json``) marks objects with a repeated key (``DuplicateKeys``) and integer
literals too long for any Kafka integer (``HugeInt``) instead of failing, and rejects NaN and
Infinity. The readers check one field each against its Kafka type and raise ``InvalidRequest``
naming the JSON path of the field at fault (e.g. ``topics[0].partitions[2].committedOffset``).
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

from state.coordinator.errors import ErrorCode
from state.formats.records.wire import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

__all__ = [
    "INT32",
    "INT64",
    "REQUIRED",
    "DuplicateKeys",
    "HugeInt",
    "InvalidRequest",
    "as_object",
    "field_path",
    "is_valid_text",
    "json_type",
    "parse_json",
    "read_array",
    "read_field",
    "read_int",
    "read_nullable_str",
    "read_str",
    "read_text",
    "reject",
]

#: Kafka's integer types of the request fields: (name, min, max).
INT32 = ("int32", INT32_MIN, INT32_MAX)
INT64 = ("int64", INT64_MIN, INT64_MAX)

#: Sentinel for "field absent, no default": the field is required.
REQUIRED: Any = object()


class InvalidRequest(Exception):
    """The request is invalid: carries the error code to answer with and the reason, which names
    the field at fault (``decode_request`` turns it into a ``DecodeError``)."""

    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class DuplicateKeys(dict):  # type: ignore[type-arg]
    """A JSON object in which some key appeared more than once."""

    duplicates: list[str]


class HugeInt:
    """A JSON integer too long to be any Kafka integer; kept as text so that a field check can
    name it instead of the whole message failing to parse."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The parser's hook for every JSON object: a dict, or a ``DuplicateKeys`` naming the keys
    that repeat (the object is rejected when read, not while parsing, so that the error can still
    carry the request id)."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    duplicates = []
    for key, _ in pairs:
        if key in seen:
            duplicates.append(key)
        seen.add(key)
    marked = DuplicateKeys(obj)
    marked.duplicates = duplicates
    return marked


def _parse_int(text: str) -> int | HugeInt:
    """The parser's hook for every JSON integer literal: an int, or ``HugeInt`` when too long.

    20 digits and a sign cover int64; longer literals can only be out of range, and leaving them
    as text also keeps Python's int-from-string digit limit from failing the whole parse.
    """
    return int(text) if len(text) <= 21 else HugeInt(text)


def _reject_constant(name: str) -> NoReturn:
    """The parser's hook for NaN and Infinity, which Python accepts but JSON does not have."""
    raise ValueError(f"{name} is not valid JSON")


_decoder = json.JSONDecoder(
    object_pairs_hook=_object_pairs, parse_int=_parse_int, parse_constant=_reject_constant
)


def parse_json(text: str) -> Any:
    """Parse JSON ``text`` with the hooks above. Raises ``ValueError`` for text that is not JSON
    (NaN and Infinity included) and ``RecursionError`` for nesting too deep to parse."""
    return _decoder.decode(text)


def json_type(value: object) -> str:
    """The JSON type of a parsed value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | HugeInt):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__  # not reachable from JSON


def reject(path: str, msg: str) -> NoReturn:
    """Reject the request as INVALID_REQUEST: the field at ``path`` is wrong (``msg``)."""
    raise InvalidRequest(ErrorCode.INVALID_REQUEST, f"{path}: {msg}")


def field_path(prefix: str, key: str | int) -> str:
    """The JSON path of ``key`` (an object key, or an array index) under ``prefix``; built only
    for an error message."""
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else key


def as_object(value: object, path: str) -> dict[str, Any]:
    """``value`` if it is a JSON object without repeated keys; else INVALID_REQUEST at ``path``."""
    if type(value) is dict:
        return value  # type: ignore[return-value]
    if isinstance(value, DuplicateKeys):
        reject(path or "request", f"duplicate key {value.duplicates[0]!r}")
    reject(path, f"expected an object, got {json_type(value)}")


def is_valid_text(value: str) -> bool:
    """Whether ``value`` can be encoded as UTF-8 (JSON escapes can produce lone surrogates,
    which no record or response could carry)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_field(obj: dict[str, Any], key: str, prefix: str, default: Any) -> Any:
    """The value of field ``key`` of ``obj`` (at path ``prefix``), ``default`` when it is absent;
    INVALID_REQUEST "missing" when it is absent and ``default`` is ``REQUIRED``. Every default is
    a valid value of its field, so callers check what this returns whichever it is."""
    value = obj.get(key, default)
    if value is REQUIRED:  # JSON cannot hold the sentinel: the field is absent
        reject(field_path(prefix, key), "missing")
    return value


def read_text(value: object, prefix: str, key: str | int, expected: str = "a string") -> str:
    """``value`` if it is a string that a record or response can carry (valid UTF-8); else
    INVALID_REQUEST naming the field ``key`` under ``prefix``."""
    if type(value) is not str:
        reject(field_path(prefix, key), f"expected {expected}, got {json_type(value)}")
    if not is_valid_text(value):
        reject(field_path(prefix, key), "string contains an unpaired surrogate")
    return value


def read_str(obj: dict[str, Any], key: str, prefix: str, default: Any = REQUIRED) -> str:
    """A string field; absent gives ``default`` (required if none)."""
    return read_text(read_field(obj, key, prefix, default), prefix, key)


def read_nullable_str(obj: dict[str, Any], key: str, prefix: str) -> str | None:
    """An optional string that may be null; absent means null."""
    value = obj.get(key)
    if value is None:
        return None
    return read_text(value, prefix, key, "a string or null")


def read_int(
    obj: dict[str, Any],
    key: str,
    prefix: str,
    kind: tuple[str, int, int],
    default: Any = REQUIRED,
) -> int:
    """An integer field of Kafka type ``kind`` (name, min, max); absent gives ``default``
    (required if none)."""
    value = read_field(obj, key, prefix, default)
    # bool is a subclass of int in Python but not an integer in JSON.
    if type(value) is not int:
        if isinstance(value, HugeInt):
            reject(field_path(prefix, key), f"{value.text} is out of range for {kind[0]}")
        reject(field_path(prefix, key), f"expected an integer, got {json_type(value)}")
    name, lo, hi = kind
    if value < lo or value > hi:
        reject(field_path(prefix, key), f"{value} is out of range for {name}")
    return value


def read_array(obj: dict[str, Any], key: str, prefix: str, default: Any = REQUIRED) -> list[Any]:
    """An array field; absent gives ``default`` (required if none)."""
    value = read_field(obj, key, prefix, default)
    if type(value) is not list:
        reject(field_path(prefix, key), f"expected an array, got {json_type(value)}")
    return value
