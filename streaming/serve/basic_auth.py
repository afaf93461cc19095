"""HTTP basic authentication and the response headers of the web config (``web_config``), as
Prometheus' exporter-toolkit does them (its web/handler.go).

An ASGI middleware in front of every route, reading the web config as it stands now (it is read
again when its file changes): no or wrong credentials answer 401 with a ``WWW-Authenticate``
challenge; ``http_server_config.headers`` go on every response, 401s included. bcrypt is slow on
purpose (~60 ms at cost 10), so:

- one bcrypt runs at a time: a lock taken *before* a worker thread is asked for, so requests
  waiting for their check hold no thread of the pool the routes run in, and a flood of wrong
  passwords costs one core, not the server;
- every verdict, success or failure, is remembered (an LRU of :data:`VERDICTS` entries keyed by
  a SHA-256 digest of user, hash and password), and a remembered verdict never waits for the
  lock: a scraper's next login costs a dictionary look-up whatever else is being checked;
- an unknown user costs what a known one does (a bcrypt of a dummy hash at the highest cost of
  the configured ones), so the answer's time does not tell names apart;
- a password bcrypt cannot take (over 72 bytes) is a wrong password: 401.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

import anyio
import anyio.to_thread
import bcrypt

from streaming.serve.web_config import WebConfig

Scope = dict[str, Any]

#: Verdicts remembered. Checks run one at a time, so a flood adds at most ~16 a second: a
#: scraper's entry, used every few seconds, is never the least recently used.
VERDICTS: Final = 1024


class BasicAuthMiddleware:
    """Let a request through only with the credentials of a user of ``web()`` (when it names
    users), with ``scope["user"]`` (the name) and ``scope["operator"]`` (whether the config names
    it among ``operators``) for the routes; without users every request passes, with no
    ``"user"`` in its scope."""

    def __init__(self, app: Any, web: Callable[[], WebConfig], realm: str = "consumer-offsets"):
        self.app = app
        self._web = web
        self._challenge = f'Basic realm="{realm}", charset="UTF-8"'.encode()
        self._bcrypt = anyio.Lock()
        self._verdicts: OrderedDict[bytes, bool] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        web = self._web()
        if web.headers:
            send = _with_headers(send, web.headers)
        if not web.basic_auth_users:
            await self.app(scope, receive, send)
            return
        user = await self._authenticate(web, _authorization(scope))
        if user is None:
            await _unauthorized(send, self._challenge)
            return
        await self.app({**scope, "user": user, "operator": user in web.operators}, receive, send)

    async def _authenticate(self, web: WebConfig, header: bytes | None) -> str | None:
        credentials = _credentials(header)
        if credentials is None:
            return None
        name, password = credentials
        hashed = web.basic_auth_users.get(name)
        key = _key(name, hashed, password)
        verdict = self._remembered(key)
        if verdict is None:
            async with self._bcrypt:
                # Another request may have checked the same credentials while this one waited.
                verdict = self._remembered(key)
                if verdict is None:
                    verdict = await anyio.to_thread.run_sync(
                        _check, password, hashed, web.highest_cost
                    )
                    self._remember(key, verdict)
        return name if verdict else None

    def _remembered(self, key: bytes) -> bool | None:
        verdict = self._verdicts.get(key)
        if verdict is not None:
            self._verdicts.move_to_end(key)
        return verdict

    def _remember(self, key: bytes, verdict: bool) -> None:
        self._verdicts[key] = verdict
        if len(self._verdicts) > VERDICTS:
            self._verdicts.popitem(last=False)


def _key(name: str, hashed: bytes | None, password: bytes) -> bytes:
    """The verdict's key: a new hash for the user (or the user gone) is a new key."""
    digest = hashlib.sha256()
    for part in (name.encode(), hashed or b"", password):
        digest.update(len(part).to_bytes(4, "big") + part)
    return digest.digest()


def _check(password: bytes, hashed: bytes | None, highest_cost: int) -> bool:
    """bcrypt's verdict (in a worker thread); an unknown user (``hashed`` None) costs a check
    of a dummy hash at ``highest_cost`` and is refused."""
    try:
        matches = bcrypt.checkpw(password, hashed or _dummy_hash(highest_cost))
    except ValueError:  # longer than bcrypt's 72 bytes: a wrong password like any other
        return False
    return matches and hashed is not None


@functools.cache
def _dummy_hash(cost: int) -> bytes:
    """A bcrypt hash of nothing anyone types, at ``cost`` (made once per cost, under the lock)."""
    return bcrypt.hashpw(b"\0unknown user\0", bcrypt.gensalt(rounds=cost))


def _with_headers(send: Any, headers: Mapping[str, str]) -> Any:
    """``send`` adding ``headers`` to the response's start (exporter-toolkit sets them first)."""
    extra = [(name.lower().encode(), value.encode()) for name, value in headers.items()]

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)

    return sending


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
