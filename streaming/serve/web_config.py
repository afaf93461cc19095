"""``serve --web-config-file``: TLS and users, in the shape of Prometheus' exporter-toolkit.

Operators already write this file for their exporters (``--web.config.file``)::

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
      client_ca_file: ca.crt                 # optional: client certificates
      client_auth_type: RequireAndVerifyClientCert
      min_version: TLS12                     # TLS12 (default) or TLS13
    basic_auth_users:
      ops: $2b$10$...    # a bcrypt hash, e.g. from `htpasswd -nBC 10 "" | tr -d ':\\n'`

Relative paths are taken from the file's folder, as exporter-toolkit takes them. Every problem
is a ValueError naming the field. ``RequireAnyClientCert`` (a certificate asked for but not
verified) has no equivalent in Python's TLS and is refused rather than weakened.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import yaml

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
_BCRYPT_PREFIXES: Final = ("$2a$", "$2b$", "$2y$")


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
    """What ``--web-config-file`` says: TLS (None: plain HTTP) and users (empty: no login)."""

    tls: TlsServerConfig | None = None
    #: user name → bcrypt hash.
    basic_auth_users: Mapping[str, bytes] = field(default_factory=dict)

    def __repr__(self) -> str:  # never print the hashes
        return f"WebConfig(tls={self.tls!r}, basic_auth_users={sorted(self.basic_auth_users)})"


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check a web config file; ValueError naming the field that is wrong."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"web config {file}: cannot read it: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"web config {file}: not YAML: {exc}") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ValueError(f"web config {file}: expected a mapping at the top level")
    unknown = sorted(set(data) - {"tls_server_config", "basic_auth_users", "http_server_config"})
    if unknown:
        raise ValueError(f"web config {file}: unknown fields {', '.join(unknown)}")
    tls = data.get("tls_server_config")
    users = data.get("basic_auth_users") or {}
    return WebConfig(
        tls=None if tls is None else _tls(file, tls),
        basic_auth_users=_users(file, users),
    )


def _tls(file: Path, section: Any) -> TlsServerConfig:
    if not isinstance(section, dict):
        raise ValueError(f"web config {file}: tls_server_config must be a mapping")
    known = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version"}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(f"web config {file}: tls_server_config: unknown fields {unknown}")

    def path_of(name: str, required: bool) -> Path | None:
        value = section.get(name)
        if value is None or value == "":
            if required:
                raise ValueError(f"web config {file}: tls_server_config.{name} is required")
            return None
        found = Path(str(value))
        found = found if found.is_absolute() else file.parent / found
        if not found.is_file():
            raise ValueError(f"web config {file}: tls_server_config.{name}: no file {found}")
        return found

    auth = str(section.get("client_auth_type") or "NoClientCert")
    if auth not in CLIENT_AUTH_TYPES:
        raise ValueError(
            f"web config {file}: tls_server_config.client_auth_type {auth!r} is not supported; "
            f"use one of {', '.join(CLIENT_AUTH_TYPES)}"
        )
    version = str(section.get("min_version") or "TLS12")
    if version not in MIN_VERSIONS:
        raise ValueError(
            f"web config {file}: tls_server_config.min_version {version!r}: use TLS12 or TLS13"
        )
    client_ca = path_of("client_ca_file", required=False)
    if auth != "NoClientCert" and client_ca is None:
        raise ValueError(
            f"web config {file}: tls_server_config.client_ca_file is required with "
            f"client_auth_type {auth}"
        )
    cert, key = path_of("cert_file", True), path_of("key_file", True)
    assert cert is not None and key is not None
    return TlsServerConfig(cert, key, client_ca, auth, version)


def _users(file: Path, section: Any) -> dict[str, bytes]:
    if not isinstance(section, dict):
        raise ValueError(f"web config {file}: basic_auth_users must map user names to hashes")
    users = {}
    for name, hashed in section.items():
        if not isinstance(name, str) or not name or ":" in name:
            raise ValueError(f"web config {file}: basic_auth_users: bad user name {name!r}")
        if not isinstance(hashed, str) or not hashed.startswith(_BCRYPT_PREFIXES):
            raise ValueError(
                f"web config {file}: basic_auth_users.{name} must be a bcrypt hash ($2b$…)"
            )
        users[name] = hashed.encode()
    return users
