"""Running the app on uvicorn: plain HTTP, or TLS and users from a web config file."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import uvicorn

from streaming.serve.basic_auth import BasicAuthMiddleware
from streaming.serve.web_config import MIN_VERSIONS, WebConfig

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def secured_app(app: Any, web: WebConfig) -> Any:
    """``app`` behind basic authentication when the web config names users."""
    return BasicAuthMiddleware(app, web.basic_auth_users) if web.basic_auth_users else app


def uvicorn_config(
    app: Any, host: str, port: int, web: WebConfig, log_level: str = "warning"
) -> uvicorn.Config:
    """A loaded uvicorn configuration: TLS settings applied, the minimum TLS version set on its
    context (uvicorn has no setting for it)."""
    options = web.tls.uvicorn_options() if web.tls else {}
    config = uvicorn.Config(
        secured_app(app, web), host=host, port=port, log_level=log_level, **options
    )
    config.load()
    if web.tls is not None and config.ssl is not None:
        config.ssl.minimum_version = MIN_VERSIONS[web.tls.min_version]
    return config


def serve_forever(
    app: Any, host: str, port: int, web: WebConfig, log_level: str = "warning"
) -> None:
    """Serve until SIGINT/SIGTERM; says at start how it listens when anyone could read it."""
    if web.tls is None and not is_loopback(host):
        log.warning(
            "serving plain HTTP on %s:%d: anyone who reaches it reads every group's offsets; "
            "give --web-config-file with tls_server_config and basic_auth_users",
            host,
            port,
        )
    elif not web.basic_auth_users and not is_loopback(host):
        log.warning("serving on %s:%d without users: every client reads every group", host, port)
    uvicorn.Server(uvicorn_config(app, host, port, web, log_level)).run()
