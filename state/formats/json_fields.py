"""Strict reading of ingest JSON: a parser that marks repeated keys (``DuplicateKeys``) and
over-long integers (``HugeInt``) instead of failing, and field readers that raise
``InvalidRequest`` naming the JSON path at fault (e.g. ``topics[0].partitions[2].committedOffset``).
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

from state.coordinator.errors import ErrorCode
from state.formats.records.wire import (
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
)

#: Kafka's integer types of the request fields: (name, min, max).
INT16 = ("int16", INT16_MIN, INT16_MAX)
INT32 = ("int32", INT32_MIN, INT32_MAX)
INT64 = ("int64", INT64_MIN, INT64_MAX)

#: Sentinel for "field absent, no default": the field is required.
REQUIRED: Any = object()


class InvalidRequest(Exception):
    """An invalid request: the error code to answer and the reason naming the field at fault."""

    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class DuplicateKeys(dict):  # type: ignore[type-arg]
    """A JSON object in which some key appeared more than once."""

    duplicates: list[str]


class HugeInt:
    """A JSON integer too long for any Kafka integer, kept as text for a field check to name."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A dict, or a ``DuplicateKeys`` naming the repeated keys (rejected when read, so that the
    error can still carry the request id)."""
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
    """An int, or ``HugeInt`` past 21 characters (out of int64, and clear of Python's digit
    limit)."""
    return int(text) if len(text) <= 21 else HugeInt(text)


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


_decoder = json.JSONDecoder(
    object_pairs_hook=_object_pairs, parse_int=_parse_int, parse_constant=_reject_constant
)


def parse_json(text: str) -> Any:
    """Parse JSON ``text``: ``ValueError`` if not JSON (NaN and Infinity included),
    ``RecursionError`` if nested too deeply."""
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
    """Raise INVALID_REQUEST for the field at ``path``."""
    raise InvalidRequest(ErrorCode.INVALID_REQUEST, f"{path}: {msg}")


def field_path(prefix: str, key: str | int) -> str:
    """The JSON path of ``key`` (object key or array index) under ``prefix``."""
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
    """Whether ``value`` encodes as UTF-8 (a JSON escape can spell a lone surrogate)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_field(obj: dict[str, Any], key: str, prefix: str, default: Any) -> Any:
    """Field ``key`` of ``obj``, ``default`` when absent ("missing" if ``REQUIRED``)."""
    value = obj.get(key, default)
    if value is REQUIRED:  # JSON cannot hold the sentinel: the field is absent
        reject(field_path(prefix, key), "missing")
    return value


def read_text(value: object, prefix: str, key: str | int, expected: str = "a string") -> str:
    """``value`` if it is a string valid as UTF-8, else INVALID_REQUEST naming the field."""
    if type(value) is not str:
        reject(field_path(prefix, key), f"expected {expected}, got {json_type(value)}")
    if not is_valid_text(value):
        reject(field_path(prefix, key), "string contains an unpaired surrogate")
    return value


def read_str(obj: dict[str, Any], key: str, prefix: str, default: Any = REQUIRED) -> str:
    """A string field; absent gives ``default``."""
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
    """An integer field of Kafka type ``kind`` (name, min, max); absent gives ``default``."""
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
    """An array field; absent gives ``default``."""
    value = read_field(obj, key, prefix, default)
    if type(value) is not list:
        reject(field_path(prefix, key), f"expected an array, got {json_type(value)}")
    return value
