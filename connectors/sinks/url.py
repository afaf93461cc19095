"""Sink URLs, as strings: what a URL names, its secrets masked, a relative SQLite path made
absolute."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

_SECRET_QUERY_KEYS: Final = frozenset({"password", "passfile", "sslpassword"})
_CONNINFO_SECRET_RE: Final = re.compile(
    r"\b(password|sslpassword)(\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE
)
#: The sink URLs this module takes, as error messages name them.
ACCEPTED_FORMS: Final = (
    "sqlite:///relative/path.db, sqlite:////absolute/path.db or "
    "postgresql://user:password@host:port/database"
)
#: Sink options that may also be given as URL query parameters (they are not passed on).
_URL_OPTIONS: Final = frozenset({"table_prefix", "keep_history", "read_only", "schema"})


def _split_url(url: str) -> tuple[str, str, str, str]:
    """``scheme://``, authority, path, and ``?query#fragment`` of a URL, verbatim: joined they
    give back the input (``urlunsplit`` turns ``sqlite:////abs`` into ``sqlite://abs``)."""
    head, sep, rest = url.partition("://")
    ends = [i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0]
    authority_end = min(ends, default=len(rest))
    authority, remainder = rest[:authority_end], rest[authority_end:]
    tail_start = min(
        (i for i in (remainder.find("?"), remainder.find("#")) if i >= 0), default=len(remainder)
    )
    return head + sep, authority, remainder[:tail_start], remainder[tail_start:]


def _with_query(url: str, pairs: Sequence[tuple[str, str]]) -> str:
    """``url`` with its query replaced by ``pairs`` (dropped when empty)."""
    base, hash_, fragment = url.partition("#")
    base = base.partition("?")[0]
    return base + (f"?{urlencode(pairs, safe='*')}" if pairs else "") + hash_ + fragment


def redact_url(url: str) -> str:
    """``url`` with its password (userinfo, query parameter, or libpq key/value connection
    string) replaced by ``***``; never raises."""
    if "://" not in url:
        return _CONNINFO_SECRET_RE.sub(r"\1\2***", url)
    scheme, authority, path, tail = _split_url(url)
    if "@" in authority:
        userinfo, host = authority.rsplit("@", 1)
        if ":" in userinfo:
            authority = f"{userinfo.split(':', 1)[0]}:***@{host}"
    redacted = scheme + authority + path + tail
    query = tail.partition("#")[0].partition("?")[2]
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k.lower() in _SECRET_QUERY_KEYS for k, _ in pairs):
        masked = [(k, "***" if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in pairs]
        redacted = _with_query(redacted, masked)
    return redacted


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"sink option {name} must be a boolean, got {raw!r}")


@dataclass(frozen=True, slots=True)
class SinkTarget:
    """What a sink URL names. ``address``: the SQLite file, or the PostgreSQL URL as a libpq
    connection string without the sink options."""

    backend: Literal["sqlite", "postgresql"]
    address: str
    table_prefix: str
    keep_history: bool
    read_only: bool
    schema: str | None = None


def absolute_sink_url(url: str) -> str:
    """``url`` with a relative SQLite path made absolute, for a process that may start elsewhere
    (a Spark Python worker); any other URL as it is. ValueError like :func:`parse_sink_url`."""
    if parse_sink_url(url).backend != "sqlite":
        return url
    scheme, authority, path, tail = _split_url(url)
    relative = unquote(path[1:])
    if os.path.isabs(relative):
        return url
    return f"{scheme}{authority}/{quote(os.path.abspath(relative))}{tail}"


def parse_sink_url(
    url: str,
    *,
    table_prefix: str | None = None,
    keep_history: bool | None = None,
    read_only: bool | None = None,
) -> SinkTarget:
    """A sink URL's backend, address and options (:data:`ACCEPTED_FORMS`; libpq's query
    parameters pass on). The options may be query parameters too; keyword arguments that are
    not None win. ValueError, the URL redacted, for a URL it cannot take."""
    safe = redact_url(url)
    if not url.strip():
        raise ValueError(f"no sink URL given: expected {ACCEPTED_FORMS}")
    if "://" not in url:
        # A plain path is the likeliest mistake: say which URL it means.
        path = url if os.path.isabs(url) else url.removeprefix("./")
        hint = f"sqlite:///{quote(path)}" if url.endswith((".db", ".sqlite", ".sqlite3")) else ""
        raise ValueError(
            f"sink URL {safe!r} is not a URL"
            + (f" (for that SQLite file: {hint})" if hint else "")
            + f": expected {ACCEPTED_FORMS}"
        )
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"malformed sink URL {safe}: expected {ACCEPTED_FORMS}") from exc
    scheme = parts.scheme.lower()
    query = parse_qsl(parts.query, keep_blank_values=True)
    sink_opts = {k: v for k, v in query if k in _URL_OPTIONS}
    passthrough = [(k, v) for k, v in query if k not in _URL_OPTIONS]
    prefix = table_prefix if table_prefix is not None else sink_opts.get("table_prefix", "")

    def flag(name: str, given: bool | None) -> bool:
        return given if given is not None else _parse_bool(name, sink_opts.get(name, "false"))

    history, ro = flag("keep_history", keep_history), flag("read_only", read_only)
    if scheme == "sqlite":
        if parts.netloc:
            raise ValueError(
                f"sink URL {safe}: SQLite URLs have no host; use sqlite:///relative/path.db "
                "or sqlite:////absolute/path.db (three slashes, then the path)"
            )
        if passthrough or "schema" in sink_opts:
            names = sorted({k for k, _ in passthrough} | ({"schema"} & sink_opts.keys()))
            raise ValueError(f"sink URL {safe}: unknown SQLite options {names}")
        path = unquote(parts.path[1:])  # "sqlite:///" + path: drop the separator slash
        if not path:
            raise ValueError(f"sink URL {safe} names no database file: expected {ACCEPTED_FORMS}")
        return SinkTarget("sqlite", path, prefix, history, ro)
    if scheme in {"postgresql", "postgres"}:
        conninfo = _with_query(url, passthrough)
        return SinkTarget("postgresql", conninfo, prefix, history, ro, sink_opts.get("schema"))
    raise ValueError(
        f"unsupported sink URL scheme {parts.scheme!r} in {safe}: "
        f"expected {ACCEPTED_FORMS} (or postgres://)"
    )
