"""Kafka's primitive wire types, read and written naming the field of every failure.

Integers are big-endian and signed. Non-flexible: string = int16 length + UTF-8 (-1 = null), bytes =
int32 length, array = int32 count. Flexible ("compact"): unsigned varint of length + 1 (0 = null),
and every struct ends with tagged fields (varint count; per field varint tag, varint size, data),
which readers skip and writers never write.
"""

from __future__ import annotations

import operator
import struct
from typing import NoReturn

from state.coordinator.rules import INT64_MAX, MAX_RECORD_STRING_BYTES

#: First flexible version of both value types (OffsetCommitValue and GroupMetadataValue).
FLEXIBLE_VERSION = 4

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN = -INT64_MAX - 1

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

#: An empty tagged-field section.
NO_TAGGED_FIELDS = b"\x00"


class RecordFormatError(ValueError):
    """Not a valid record key or value; the message names type, version and field."""


def check_int(ctx: str, name: str, value: object, lo: int, hi: int) -> int:
    """``value`` as an int (not a bool) in ``[lo, hi]``; else ``ValueError`` naming the field."""
    if isinstance(value, bool):
        raise ValueError(f"{ctx}: {name} must be an integer, got bool")
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{ctx}: {name} must be an integer, got {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{ctx}: {name}={v} is out of range [{lo}, {hi}]")
    return v


def check_str(ctx: str, name: str, value: object, nullable: bool = False) -> bytes | None:
    """The UTF-8 bytes of string ``value`` (None for a null ``nullable`` one); ``ValueError``
    naming the field for a null, a non-string, invalid Unicode or over
    ``MAX_RECORD_STRING_BYTES``."""
    if value is None:
        if nullable:
            return None
        raise ValueError(f"{ctx}: {name} must not be null")
    if not isinstance(value, str):
        raise ValueError(f"{ctx}: {name} must be a string, got {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{ctx}: {name} is not encodable as UTF-8: {e.reason}") from None
    if len(raw) > MAX_RECORD_STRING_BYTES:
        raise ValueError(f"{ctx}: {name} is {len(raw)} bytes, more than {MAX_RECORD_STRING_BYTES}")
    return raw


def check_bytes(ctx: str, name: str, value: object) -> bytes:
    """``value`` as bytes; ``ValueError`` naming the field if not bytes-like or too long."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ValueError(f"{ctx}: {name} must be bytes, got {type(value).__name__}")
    raw = bytes(value)
    if len(raw) > INT32_MAX:
        raise ValueError(f"{ctx}: {name} is longer than {INT32_MAX} bytes")
    return raw


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint of ``n >= 0``: 7 bits a byte, least significant first."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write_string(out: list[bytes], raw: bytes | None, flexible: bool) -> None:
    """Append a (compact if ``flexible``) string; None is null."""
    if flexible:
        out.append(b"\x00" if raw is None else uvarint(len(raw) + 1))
    else:
        out.append(INT16.pack(-1 if raw is None else len(raw)))
    if raw:
        out.append(raw)


def write_bytes(out: list[bytes], raw: bytes, flexible: bool) -> None:
    """Append a non-null (compact if ``flexible``) bytes field to ``out``."""
    out.append(uvarint(len(raw) + 1) if flexible else INT32.pack(len(raw)))
    if raw:
        out.append(raw)


def write_array_len(out: list[bytes], n: int, flexible: bool) -> None:
    """Append the count of a non-null (compact if ``flexible``) array of ``n`` elements."""
    out.append(uvarint(n + 1) if flexible else INT32.pack(n))


def read_version(data: object, what: str, max_version: int | None = None) -> tuple[bytes, int]:
    """(``data`` as bytes, the int16 version that starts it). ``RecordFormatError`` naming
    ``what`` for null, under 2 bytes or a version outside ``0..max_version``; ``TypeError`` for
    data not bytes-like (a caller's bug)."""
    if data is None:
        raise RecordFormatError(f"{what}: is null")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"{what}: expected bytes, got {type(data).__name__}")
    buf = bytes(data)
    if len(buf) < 2:
        raise RecordFormatError(f"{what}: version: needs 2 bytes, got {len(buf)}")
    version = INT16.unpack_from(buf)[0]
    if max_version is not None and not 0 <= version <= max_version:
        raise RecordFormatError(
            f"{what}: version: unsupported version {version} (known 0-{max_version})"
        )
    return buf, version


class Reader:
    """A cursor over one struct's bytes; failures raise ``RecordFormatError`` naming ``ctx``
    (type and version) and the field."""

    __slots__ = ("buf", "ctx", "end", "pos")

    def __init__(self, buf: bytes, pos: int, ctx: str) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.ctx = ctx

    def fail(self, field: str, msg: str) -> NoReturn:
        raise RecordFormatError(f"{self.ctx}: {field}: {msg}")

    def _need(self, n: int, field: str) -> None:
        if self.pos + n > self.end:
            self.fail(
                field,
                f"truncated: needs {n} bytes at offset {self.pos}, {self.end - self.pos} left",
            )

    def _int(self, kind: struct.Struct, field: str) -> int:
        self._need(kind.size, field)
        v = kind.unpack_from(self.buf, self.pos)[0]
        self.pos += kind.size
        return v  # type: ignore[no-any-return]

    def int16(self, field: str) -> int:
        return self._int(INT16, field)

    def int32(self, field: str) -> int:
        return self._int(INT32, field)

    def int64(self, field: str) -> int:
        return self._int(INT64, field)

    def uvarint(self, field: str) -> int:
        """Kafka's unsigned varint: at most 5 bytes, at most int32 (as Kafka reads it)."""
        buf, pos, end = self.buf, self.pos, self.end
        value = 0
        for shift in range(0, 35, 7):
            if pos >= end:
                self.fail(field, f"truncated varint at offset {pos}")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                if value > INT32_MAX:
                    self.fail(field, f"varint {value} exceeds int32")
                self.pos = pos
                return value
        self.fail(field, f"varint longer than 5 bytes at offset {self.pos}")

    def _length(self, field: str, flexible: bool, nullable: bool) -> int:
        """Length of a string or bytes field; -1 means null (only if ``nullable``)."""
        n = self.uvarint(field) - 1 if flexible else self.int16(field)
        if n < 0:
            # Only -1 is the null marker; Kafka never writes other negative lengths.
            if n != -1:
                self.fail(field, f"negative length {n}")
            if not nullable:
                self.fail(field, "non-nullable string is null")
        return n

    def _text(self, field: str, n: int) -> str:
        """Read ``n`` bytes of strict UTF-8."""
        self._need(n, field)
        start = self.pos
        self.pos = start + n
        try:
            return self.buf[start : self.pos].decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail(field, f"invalid UTF-8: {e.reason}")

    def string(self, field: str, flexible: bool = False) -> str:
        """Read a non-null (compact if ``flexible``) string."""
        n = self._length(field, flexible, nullable=False)
        if n > MAX_RECORD_STRING_BYTES:
            self.fail(field, f"string length {n} exceeds {MAX_RECORD_STRING_BYTES}")
        return self._text(field, n)

    def nullable_string(self, field: str, flexible: bool = False) -> str | None:
        """Read a (compact if ``flexible``) string that may be null."""
        n = self._length(field, flexible, nullable=True)
        if n == -1:
            return None
        if n > MAX_RECORD_STRING_BYTES:
            self.fail(field, f"string length {n} exceeds {MAX_RECORD_STRING_BYTES}")
        return self._text(field, n)

    def bytes_(self, field: str, flexible: bool = False) -> bytes:
        """Read a non-null (compact if ``flexible``) bytes field."""
        n = self.uvarint(field) - 1 if flexible else self.int32(field)
        if n < 0:
            self.fail(field, "non-nullable bytes is null" if n == -1 else f"negative length {n}")
        self._need(n, field)
        start = self.pos
        self.pos = start + n
        return self.buf[start : self.pos]

    def array_count(self, field: str, flexible: bool) -> int:
        """Read the element count of a non-null (compact if ``flexible``) array."""
        n = self.uvarint(field) - 1 if flexible else self.int32(field)
        if n < 0:
            self.fail(field, "non-nullable array is null" if n == -1 else f"negative count {n}")
        # Each element takes a byte or more: a larger count is corrupt (and must not drive a loop).
        if n > self.end - self.pos:
            self.fail(field, f"count {n} exceeds the {self.end - self.pos} bytes left")
        return n

    def tagged_fields(self, field: str) -> None:
        """Skip a tagged-field section."""
        count = self.uvarint(field)
        for _ in range(count):
            self.uvarint(field + " tag")
            size = self.uvarint(field + " size")
            self._need(size, field + " data")
            self.pos += size

    def finish(self) -> None:
        """Fail if bytes are left after the struct (a misread layout)."""
        if self.pos != self.end:
            self.fail("end", f"{self.end - self.pos} trailing bytes after offset {self.pos}")
