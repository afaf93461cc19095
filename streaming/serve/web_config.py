"""``serve --web-config-file``: TLS and users, in the shape of Prometheus' exporter-toolkit::

    tls_server_config:
      cert_file: server.crt                  # relative paths: from the file's folder
      key_file: server.key
      client_ca_file: ca.crt                 # optional: client certificates
      client_auth_type: RequireAndVerifyClientCert
      min_version: TLS12                     # TLS12 (default) or TLS13
    http_server_config:
      headers: {Strict-Transport-Security: max-age=31536000}
    basic_auth_users:
      ops: $2b$10$...    # a bcrypt hash, e.g. from `htpasswd -nBC 10 "" | tr -d ':\\n'`
    operators: [ops]     # ours: users who see every group (others see their tenant's, or nothing)

What exporter-toolkit refuses is refused (a ValueError naming the field), and also a bcrypt cost
below 10 and ``RequireAnyClientCert`` (Python's TLS cannot ask without verifying).
"""

from __future__ import annotations

import logging
import re
import ssl
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import bcrypt
import yaml

log = logging.getLogger(__name__)

#: exporter-toolkit's client_auth_type values this server supports → Python's verify mode.
CLIENT_AUTH_TYPES: Final = MappingProxyType(
    {
        "NoClientCert": ssl.CERT_NONE,
        "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
        "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
    }
)
MIN_VERSIONS: Final = MappingProxyType(
    {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
)
#: The headers exporter-toolkit lets ``http_server_config.headers`` set (web/handler.go's
#: ``extraHTTPHeaders``, names as spelled there) → the values it allows (empty: any).
HEADERS: Final = MappingProxyType(
    {
        "Strict-Transport-Security": (),
        "X-Content-Type-Options": ("nosniff",),
        "X-Frame-Options": ("deny", "sameorigin"),
        "X-XSS-Protection": (),
        "Content-Security-Policy": (),
    }
)
#: The lowest bcrypt cost accepted: htpasswd's and Go's default (~60 ms a check here).
MIN_BCRYPT_COST: Final = 10
_MAKE_A_HASH: Final = "make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n'"
#: $2a$/$2b$/$2y$, a two-digit cost, 22 characters of salt and 31 of hash (bcrypt's base64).
_BCRYPT: Final = re.compile(r"\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}")
_FIELDS: Final = ("tls_server_config", "http_server_config", "basic_auth_users", "operators")


@dataclass(frozen=True)
class TlsServerConfig:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
    client_auth_type: str = "NoClientCert"
    min_version: str = "TLS12"

    @property
    def verify_mode(self) -> ssl.VerifyMode:
        return CLIENT_AUTH_TYPES[self.client_auth_type]

    def uvicorn_options(self) -> dict[str, Any]:
        """uvicorn's ``ssl_*`` settings (the minimum version is set on its context after)."""
        options: dict[str, Any] = {
            "ssl_certfile": str(self.cert_file),
            "ssl_keyfile": str(self.key_file),
            "ssl_cert_reqs": self.verify_mode,
        }
        if self.client_ca_file is not None:
            options["ssl_ca_certs"] = str(self.client_ca_file)
        return options


@dataclass(frozen=True)
class WebConfig:
    """What ``--web-config-file`` says; ``source`` the file it was read from."""

    tls: TlsServerConfig | None = None
    #: user name → bcrypt hash.
    basic_auth_users: Mapping[str, bytes] = field(default_factory=dict)
    #: Users who see every group.
    operators: frozenset[str] = frozenset()
    #: ``http_server_config.headers``: set on every response, 401s included.
    headers: Mapping[str, str] = field(default_factory=dict)
    #: ``http_server_config.http2: true`` was asked for (served as HTTP/1.1 all the same).
    http2: bool = False
    source: Path | None = None

    @property
    def highest_cost(self) -> int:
        """The highest bcrypt cost among the users' hashes: what an unknown user's check costs."""
        return max((int(hashed[4:6]) for hashed in self.basic_auth_users.values()), default=10)

    def __repr__(self) -> str:  # never print the hashes
        return (
            f"WebConfig(tls={self.tls!r}, basic_auth_users={sorted(self.basic_auth_users)}, "
            f"operators={sorted(self.operators)}, headers={sorted(self.headers)})"
        )


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check a web config file; ValueError naming the field that is wrong."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"web config {file}: cannot read it: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"web config {file}: not YAML: {' '.join(str(exc).split())}") from None
    try:
        data = _section("the top level", {} if data is None else data, _FIELDS)
        tls = data.get("tls_server_config")
        users = _users(data.get("basic_auth_users") or {})
        headers, http2 = _http_server(data.get("http_server_config"))
        return WebConfig(
            tls=None if tls is None else _tls(tls, file.parent),
            basic_auth_users=users,
            operators=_operators(data.get("operators"), users),
            headers=headers,
            http2=http2,
            source=file,
        )
    except ValueError as exc:
        raise ValueError(f"web config {file}: {exc}") from None


def _section(where: str, section: Any, known: tuple[str, ...]) -> dict[Any, Any]:
    """``section`` when it is a mapping of ``known`` fields only; else a ValueError."""
    if not isinstance(section, dict):
        raise ValueError(f"{where} must be a mapping")
    unknown = sorted(map(str, set(section) - set(known)))
    if unknown:
        raise ValueError(f"{where}: unknown fields {', '.join(unknown)}")
    return section


def _tls(section: Any, folder: Path) -> TlsServerConfig:
    known = ("cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version")
    _section("tls_server_config", section, known)

    def path_of(name: str, required: bool) -> Path | None:
        value = section.get(name)
        if value is None or value == "":
            if required:
                raise ValueError(f"tls_server_config.{name} is required")
            return None
        found = Path(str(value))
        found = found if found.is_absolute() else folder / found
        if not found.is_file():
            raise ValueError(f"tls_server_config.{name}: no file {found}")
        return found

    auth = str(section.get("client_auth_type") or "NoClientCert")
    if auth not in CLIENT_AUTH_TYPES:
        raise ValueError(
            f"tls_server_config.client_auth_type {auth!r} is not supported; "
            f"use one of {', '.join(CLIENT_AUTH_TYPES)}"
        )
    version = str(section.get("min_version") or "TLS12")
    if version not in MIN_VERSIONS:
        raise ValueError(f"tls_server_config.min_version {version!r}: use TLS12 or TLS13")
    client_ca = path_of("client_ca_file", required=False)
    if auth != "NoClientCert" and client_ca is None:
        raise ValueError(
            f"tls_server_config.client_ca_file is required with client_auth_type {auth}"
        )
    if auth == "NoClientCert" and client_ca is not None:
        # exporter-toolkit: "client CA's have been configured without a Client Auth Policy".
        raise ValueError(
            "tls_server_config.client_ca_file is set but client_auth_type is "
            "NoClientCert, so no client certificate would be verified; set client_auth_type "
            "RequireAndVerifyClientCert (or VerifyClientCertIfGiven), or remove client_ca_file"
        )
    cert, key = path_of("cert_file", True), path_of("key_file", True)
    assert cert is not None and key is not None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"tls_server_config: cert_file {cert} with key_file {key} do not load: {exc}"
        ) from None
    if client_ca is not None:
        try:
            context.load_verify_locations(client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"tls_server_config.client_ca_file {client_ca}: {exc}") from None
    return TlsServerConfig(cert, key, client_ca, auth, version)


def _http_server(section: Any) -> tuple[dict[str, str], bool]:
    """``http_server_config``: its headers (only those exporter-toolkit allows) and ``http2``."""
    if section is None:
        return {}, False
    _section("http_server_config", section, ("headers", "http2"))
    http2 = section.get("http2", False)
    if not isinstance(http2, bool):
        raise ValueError("http_server_config.http2 must be true or false")
    headers = section.get("headers") or {}
    if not isinstance(headers, dict):
        raise ValueError("http_server_config.headers must be a mapping")
    checked = {}
    for name, value in headers.items():
        where = f"http_server_config.headers.{name}"
        if name not in HEADERS:
            raise ValueError(f"{where}: can not be configured; one of {', '.join(HEADERS)}")
        text = str(value) if isinstance(value, str | int | float) else None
        if text is None or not text.isprintable() or not text.isascii():
            raise ValueError(f"{where}: the value must be text on one line")
        allowed = HEADERS[name]
        if allowed and text not in allowed:
            raise ValueError(f"{where}: {text!r} is not one of {', '.join(allowed)}")
        checked[name] = text
    return checked, http2


def _users(section: Any) -> dict[str, bytes]:
    if not isinstance(section, dict):
        raise ValueError("basic_auth_users must map user names to hashes")
    return {name: _bcrypt_hash(name, hashed) for name, hashed in section.items()}


def _bcrypt_hash(name: Any, hashed: Any) -> bytes:
    """``hashed`` as bcrypt reads it, at a cost of at least :data:`MIN_BCRYPT_COST`; else a
    ValueError naming the user."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"basic_auth_users: bad user name {name!r}")
    where = f"basic_auth_users.{name}"
    form = _BCRYPT.fullmatch(hashed) if isinstance(hashed, str) else None
    if form is None or not _bcrypt_reads(hashed.encode()):
        raise ValueError(f"{where} must be a bcrypt hash that bcrypt reads; {_MAKE_A_HASH}")
    cost = int(form.group(1))
    if cost < MIN_BCRYPT_COST:
        raise ValueError(
            f"{where}: bcrypt cost {cost} is below {MIN_BCRYPT_COST} (quick to crack, and it "
            f"makes a known user answer faster than an unknown one); {_MAKE_A_HASH}"
        )
    return hashed.encode()


def _bcrypt_reads(hashed: bytes) -> bool:
    """Whether bcrypt parses ``hashed`` (its salt's last character, which the pattern cannot
    tell): checked at cost 4, a millisecond, instead of the hash's own."""
    try:
        bcrypt.checkpw(b"", hashed[:4] + b"04" + hashed[6:])
    except ValueError:
        return False
    return True


def _operators(section: Any, users: Mapping[str, bytes]) -> frozenset[str]:
    if section is None:
        return frozenset()
    if not isinstance(section, list) or not all(isinstance(name, str) for name in section):
        raise ValueError("operators must be a list of user names")
    strangers = sorted(set(section) - set(users))
    if strangers:
        raise ValueError(f"operators: {', '.join(strangers)} not in basic_auth_users")
    return frozenset(section)


class WatchedWebConfig:
    """The web config as its files stand: ``current`` is the last that read well; a file that
    became invalid keeps it and logs one ERROR (a typo never opens the server, nor stops it).
    Invalid on a reload too: an empty file (one being written reads so), a file that adds or
    removes ``tls_server_config`` (the listening socket keeps what it started with), and one
    that drops every user (it would open the server to every client) or every user who sees
    anything: the operators and the users named as ``tenants`` (a file cut just after
    ``basic_auth_users:`` or inside it reads so). A config without users or without such a user
    from the start may stay so; to drop them all, restart serve. A file that changed while it
    was read is read again at the next look."""

    def __init__(
        self,
        web: WebConfig,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        tenants: Collection[str] = (),
    ) -> None:
        self.current = web
        #: The tenants' names: the users who see their tenant's groups.
        self._tenants = frozenset(tenants)
        self._interval_s = interval_s
        self._clock = clock
        self._stamp = _stamp(web)
        self._checked = clock()

    def __call__(self) -> WebConfig:
        return self.current

    def refresh(self) -> WebConfig | None:
        """The new config when the files changed (looked at once per ``interval_s`` at most)
        and still read well; None otherwise."""
        source = self.current.source
        now = self._clock()
        if source is None or now - self._checked < self._interval_s:
            return None
        self._checked = now
        stamp = _stamp(self.current)
        if stamp == self._stamp:
            return None
        try:
            web = self._reload(source)
        except ValueError as exc:
            self._stamp = stamp
            log.error("%s; serving with the web config read before", exc)
            return None
        if _stamp(self.current) != stamp:
            return None  # written while read: read again at the next look
        self._stamp = _stamp(web)
        self.current = web
        log.info("web config %s read again: users %s", source, sorted(web.basic_auth_users))
        return web

    def _reload(self, source: Path) -> WebConfig:
        """``source`` read again; ValueError for what a running server cannot take."""
        web = load_web_config(source)
        try:
            empty = source.stat().st_size == 0
        except OSError:
            empty = True  # gone since it was read
        if empty:
            raise ValueError(f"web config {source}: empty or gone (a file being written reads so)")
        if (web.tls is None) != (self.current.tls is None):
            change = "removes" if web.tls is None else "adds"
            raise ValueError(
                f"web config {source}: {change} tls_server_config, which takes a restart of serve"
            )
        if self.current.basic_auth_users and not web.basic_auth_users:
            raise ValueError(
                f"web config {source}: no basic_auth_users, where there were "
                f"{len(self.current.basic_auth_users)}: every client would read every group (a "
                "file being written reads so); removing them all takes a restart of serve"
            )
        if self._seeing(self.current) and not self._seeing(web):
            raise ValueError(
                f"web config {source}: no operator nor tenant among basic_auth_users "
                f"{sorted(web.basic_auth_users)}, where there were "
                f"{sorted(self._seeing(self.current))}: nobody would see a group (a file being "
                "written reads so); removing them all takes a restart of serve"
            )
        return web

    def _seeing(self, web: WebConfig) -> frozenset[str]:
        """The users of ``web`` who see groups: its operators and the tenants' users."""
        return web.operators | self._tenants.intersection(web.basic_auth_users)


def _stamp(web: WebConfig) -> tuple[tuple[int, int] | None, ...]:
    """What tells the files of ``web`` changed: each one's modification time and size."""
    tls = web.tls
    files = [web.source] if tls is None else [web.source, tls.cert_file, tls.key_file]
    if tls is not None and tls.client_ca_file is not None:
        files.append(tls.client_ca_file)
    stamps: list[tuple[int, int] | None] = []
    for file in files:
        try:
            stat = file.stat() if file is not None else None
        except OSError:
            stat = None
        stamps.append(None if stat is None else (stat.st_mtime_ns, stat.st_size))
    return tuple(stamps)
