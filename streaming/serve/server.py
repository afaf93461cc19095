"""Running the app on uvicorn: plain HTTP, or TLS, users and headers from a web config file
(``web_config``), read again as it changes. Basic authentication as Prometheus' exporter-toolkit
does it: 401 with a challenge; bcrypt checks run one at a time (a flood of wrong passwords costs
one core, not the server), verdicts are remembered, an unknown user costs what a known one does."""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import functools
import hashlib
import ipaddress
import logging
import socket
import ssl
import sys
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Final

import anyio
import anyio.to_thread
import bcrypt
import uvicorn
from starlette.responses import PlainTextResponse

from streaming.serve.web_config import MIN_VERSIONS, TlsServerConfig, WatchedWebConfig, WebConfig

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebServer(uvicorn.Server):
    """uvicorn's server for ``app`` with ``web``'s TLS, users and headers, its files looked at
    once a second; once listening, one line on stderr says where."""

    def __init__(
        self,
        app: Any,
        host: str,
        port: int,
        web: WebConfig,
        log_level: str = "warning",
        tenants: Collection[str] = (),
    ) -> None:
        self.web = WatchedWebConfig(web, tenants=tenants)
        options = web.tls.uvicorn_options() if web.tls else {}
        config = uvicorn.Config(
            BasicAuthMiddleware(app, self.web), host=host, port=port, log_level=log_level, **options
        )
        config.load()
        if web.tls is not None and config.ssl is not None:
            # uvicorn has no setting for it.
            config.ssl.minimum_version = MIN_VERSIONS[web.tls.min_version]
        super().__init__(config)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            # uvicorn raises the signal again once stopped (SIGINT: KeyboardInterrupt, exit 130;
            # SIGTERM: killed); a stop asked for is a clean stop here: exit 0.
            self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            scheme = "https" if self.config.ssl else "http"
            where = f"[{host}]" if ":" in host else host
            print(
                f"serving on {scheme}://{where}:{port}/ "
                "(dashboard /, metrics /metrics, Burrow /v3/kafka)",
                file=sys.stderr,
                flush=True,
            )

    async def on_tick(self, counter: int) -> bool:
        before = self.web.current
        changed = self.web.refresh()
        if changed is not None:
            _reload_tls(self.config.ssl, before.tls, changed.tls)
        return await super().on_tick(counter)


def _reload_tls(
    context: ssl.SSLContext | None, before: TlsServerConfig | None, now: TlsServerConfig | None
) -> None:
    """The new certificate and key into the running ``context`` (new handshakes get them)."""
    if context is None or before is None or now is None:
        if before != now:
            log.warning("web config: tls_server_config added or removed: serve must restart")
        return
    at_start = ("client_ca_file", "client_auth_type", "min_version")
    if any(getattr(before, name) != getattr(now, name) for name in at_start):
        log.warning(
            "web config: tls_server_config's %s apply when serve restarts (the certificate and "
            "key are loaded now)",
            ", ".join(at_start),
        )
    try:
        context.load_cert_chain(now.cert_file, now.key_file)
    except (OSError, ssl.SSLError) as exc:  # changed again since it was read
        log.error("web config: the new certificate does not load (%s); serving the one before", exc)


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port``; OSError in one line saying why not."""
    try:
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        return socket.create_server(address, family=family)
    except OSError as exc:
        used = exc.errno == errno.EADDRINUSE
        reason = f"port {port} is in use" if used else (exc.strerror or str(exc))
        raise OSError(f"cannot listen on {host}:{port}: {reason}") from None


def serve_forever(
    app: Any,
    host: str,
    port: int,
    web: WebConfig,
    log_level: str = "warning",
    tenants: Collection[str] = (),
) -> None:
    """Serve until SIGINT/SIGTERM (``tenants``: the tenants' names, their users); OSError when
    it cannot listen, RuntimeError when the application does not start."""
    if web.tls is None and not is_loopback(host):
        log.warning(
            "serving plain HTTP on %s:%d: anyone who reaches it reads every group's offsets; "
            "give --web-config-file with tls_server_config and basic_auth_users",
            host,
            port,
        )
    elif not web.basic_auth_users and not is_loopback(host):
        log.warning("serving on %s:%d without users: every client reads every group", host, port)
    if web.http2:
        log.warning("http_server_config.http2: serve speaks HTTP/1.1 only; clients fall back to it")
    server = WebServer(app, host, port, web, log_level, tenants)
    with listen(host, port) as sock:
        try:
            server.run(sockets=[sock])
        except SystemExit:  # uvicorn's way to say the application's start-up failed
            raise RuntimeError("the application did not start (its error is above)") from None


Scope = dict[str, Any]

#: Verdicts remembered (an LRU: a flood adds ~16 a second, a scraper's entry stays).
VERDICTS: Final = 1024


class BasicAuthMiddleware:
    """Let a request through only with a user's credentials (``scope["user"]`` and
    ``scope["operator"]`` set); without users in ``web()`` every request passes."""

    def __init__(self, app: Any, web: Callable[[], WebConfig]):
        self.app = app
        self._web = web
        self._challenge = {"WWW-Authenticate": 'Basic realm="consumer-offsets", charset="UTF-8"'}
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
        user = await self._authenticate(web, scope)
        if user is None:
            refused = PlainTextResponse("401 Unauthorized\n", 401, self._challenge)
            await refused(scope, receive, send)
            return
        await self.app({**scope, "user": user, "operator": user in web.operators}, receive, send)

    async def _authenticate(self, web: WebConfig, scope: Scope) -> str | None:
        credentials = _credentials(scope)
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
    """bcrypt's verdict; an unknown user (``hashed`` None) costs a dummy hash's check."""
    try:
        matches = bcrypt.checkpw(password, hashed or _dummy_hash(highest_cost))
    except ValueError:  # longer than bcrypt's 72 bytes: a wrong password like any other
        return False
    return matches and hashed is not None


@functools.cache
def _dummy_hash(cost: int) -> bytes:
    """A bcrypt hash of nothing anyone types, at ``cost``."""
    return bcrypt.hashpw(b"\0unknown user\0", bcrypt.gensalt(rounds=cost))


def _with_headers(send: Any, headers: Mapping[str, str]) -> Any:
    """``send`` adding ``headers`` to the response's start (exporter-toolkit sets them first)."""
    extra = [(name.lower().encode(), value.encode()) for name, value in headers.items()]

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)

    return sending


def _credentials(scope: Scope) -> tuple[str, bytes] | None:
    """(user, password) of the ``Basic`` Authorization header; None when absent or malformed."""
    header = next((bytes(v) for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
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
