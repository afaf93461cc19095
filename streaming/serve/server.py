"""Running the app on uvicorn: plain HTTP, or TLS, users and headers from a web config file that
is read again as it changes (``web_config.WatchedWebConfig``), without a restart."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import socket
import ssl
import sys
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from streaming.serve.basic_auth import BasicAuthMiddleware
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


def secured_app(app: Any, web: WebConfig | Callable[[], WebConfig]) -> Any:
    """``app`` behind the web config's basic authentication and headers; ``web`` is a config,
    or what answers the current one (:class:`WatchedWebConfig`)."""
    return BasicAuthMiddleware(app, web if callable(web) else lambda: web)


class WebServer(uvicorn.Server):
    """uvicorn's server for ``app`` with ``web``'s TLS, users and headers. Its file is looked at
    once a second from uvicorn's own tick; when it (or the certificate or key it names) changed
    and still reads well, the users, operators and headers apply to the next request and the
    certificate and key are loaded into the running TLS context, so the next handshake gets
    them. ``client_ca_file``, ``client_auth_type`` and ``min_version`` apply at start only (a
    WARNING says so when they change). Once listening, one line on stderr says where."""

    def __init__(
        self, app: Any, host: str, port: int, web: WebConfig, log_level: str = "warning"
    ) -> None:
        self.web = WatchedWebConfig(web)
        options = web.tls.uvicorn_options() if web.tls else {}
        config = uvicorn.Config(
            secured_app(app, self.web), host=host, port=port, log_level=log_level, **options
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
    """A socket listening on ``host``:``port``; OSError in one line saying why not (the CLI's
    exit 1)."""
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
    app: Any, host: str, port: int, web: WebConfig, log_level: str = "warning"
) -> None:
    """Serve until SIGINT/SIGTERM (then return: exit 0); says at start how it listens when
    anyone could read it. OSError when it cannot listen, RuntimeError when the application
    does not start (both exit 1)."""
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
    server = WebServer(app, host, port, web, log_level)
    with listen(host, port) as sock:
        try:
            server.run(sockets=[sock])
        except SystemExit:  # uvicorn's way to say the application's start-up failed
            raise RuntimeError("the application did not start (its error is above)") from None
