"""HTTP basic authentication for ``serve``, against bcrypt hashes (``web_config``).

An ASGI middleware in front of every route: no or wrong credentials answer 401 with a
``WWW-Authenticate`` challenge, as exporter-toolkit does. bcrypt is slow on purpose (~50-100 ms
at cost 10), so the check runs in a worker thread and a user's last verified password is
remembered as a SHA-256 digest (one entry per configured user): a scrape every few seconds does
not cost a bcrypt each time, and a wrong password is never remembered.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
from collections.abc import Mapping
from typing import Any

import anyio.to_thread
import bcrypt

log = logging.getLogger(__name__)

Scope = dict[str, Any]


class BasicAuthMiddleware:
    """Let a request through only with the credentials of a user in ``users`` (name → bcrypt
    hash); the user's name is put in ``scope["user"]`` for the routes."""

    def __init__(self, app: Any, users: Mapping[str, bytes], realm: str = "consumer-offsets"):
        self.app = app
        self._users = dict(users)
        self._challenge = f'Basic realm="{realm}", charset="UTF-8"'.encode()
        self._verified: dict[str, bytes] = {}

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        user = await self._authenticate(_authorization(scope))
        if user is None:
            await _unauthorized(send, self._challenge)
            return
        await self.app({**scope, "user": user}, receive, send)

    async def _authenticate(self, header: bytes | None) -> str | None:
        credentials = _credentials(header)
        if credentials is None:
            return None
        name, password = credentials
        hashed = self._users.get(name)
        if hashed is None:
            # Same cost as a known user, so the answer's time does not tell names apart.
            await anyio.to_thread.run_sync(bcrypt.checkpw, password, _DUMMY_HASH)
            return None
        digest = hashlib.sha256(hashed + b"\0" + password).digest()
        remembered = self._verified.get(name)
        if remembered is not None and hmac.compare_digest(remembered, digest):
            return name
        if await anyio.to_thread.run_sync(bcrypt.checkpw, password, hashed):
            self._verified[name] = digest
            return name
        return None


#: A bcrypt hash of nothing anyone types, checked for unknown user names.
_DUMMY_HASH = bcrypt.hashpw(b"\0unknown user\0", bcrypt.gensalt(rounds=10))


def _authorization(scope: Scope) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == b"authorization":
            return bytes(value)
    return None


def _credentials(header: bytes | None) -> tuple[str, bytes] | None:
    """(user, password) of a ``Basic`` Authorization header; None when absent or malformed."""
    if not header:
        return None
    scheme, _, token = header.partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    name, sep, password = decoded.partition(b":")
    if not sep:
        return None
    try:
        return name.decode("utf-8"), password
    except UnicodeDecodeError:
        return None


async def _unauthorized(send: Any, challenge: bytes) -> None:
    body = b"401 Unauthorized\n"
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"www-authenticate", challenge),
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
