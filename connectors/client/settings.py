"""Where the commit client connects: its topics and kafka-python options, from keywords over a
deployment's configuration over the project's defaults (``connectors.kafka.admin``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from connectors.kafka.admin import (
    DEFAULT_BOOTSTRAP_SERVERS,
    DEFAULT_INGEST_TOPIC,
    DEFAULT_RESPONSES_TOPIC,
)


class ClientConfig(Protocol):
    """What the client reads from a deployment's configuration (``JobConfig`` has these)."""

    @property
    def ingest_topic(self) -> str: ...

    @property
    def responses_topic(self) -> str: ...

    def kafka_python_options(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The resolved topics and kafka-python options (``bootstrap_servers`` a list)."""

    ingest_topic: str
    responses_topic: str
    options: dict[str, Any]


def client_settings(
    config: ClientConfig | None,
    *,
    bootstrap_servers: str | Sequence[str] | None = None,
    ingest_topic: str | None = None,
    responses_topic: str | None = None,
    kafka_options: Mapping[str, Any] | None = None,
    tenant: str | None = None,
) -> ClientSettings:
    """Keywords over ``config`` over the defaults. ``bootstrap_servers`` may be comma-separated;
    ``kafka_options``' dotted names become kafka-python's (``request_timeout_ms``); ``tenant``
    names one of ``config``'s tenants, whose topics become the defaults."""
    if tenant is not None:
        ingest_topic, responses_topic = _tenant_topics(
            config, tenant, ingest_topic, responses_topic
        )
    options: dict[str, Any] = (
        config.kafka_python_options()
        if config is not None
        else {"bootstrap_servers": DEFAULT_BOOTSTRAP_SERVERS.split(",")}
    )
    if bootstrap_servers is not None:
        servers = bootstrap_servers
        options["bootstrap_servers"] = (
            servers.split(",") if isinstance(servers, str) else list(servers)
        )
    if kafka_options:
        options.update({k.replace(".", "_"): v for k, v in kafka_options.items()})
    return ClientSettings(
        ingest_topic=ingest_topic or (config.ingest_topic if config else DEFAULT_INGEST_TOPIC),
        responses_topic=responses_topic
        or (config.responses_topic if config else DEFAULT_RESPONSES_TOPIC),
        options=options,
    )


def _tenant_topics(
    config: ClientConfig | None, name: str, ingest_topic: str | None, responses_topic: str | None
) -> tuple[str, str]:
    """The topics of ``config``'s tenant ``name`` (keywords win); ValueError naming those known."""
    tenants = getattr(config, "tenants", ()) or ()
    for tenant in tenants:
        if tenant.name == name:
            return ingest_topic or tenant.ingest_topic, responses_topic or tenant.responses_topic
    known = ", ".join(t.name for t in tenants) or "none configured"
    raise ValueError(f"tenant {name!r} is not in the configuration's tenants ({known})")
