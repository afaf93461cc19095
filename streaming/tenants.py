"""Tenants: teams that share the job, each writing requests to an ingest topic of its own (only
its principal may write it: Kafka stamps no principal on a record) and reading answers from its
own responses topic; each request is checked against the tenant's ACLs. The job's own ingest
topic stays the operators'. The TOML form: ``deploy/config.example.toml``."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from state.coordinator.acls import AclBinding, Authorizer
from state.coordinator.rules import is_valid_topic

#: The keys of a ``[[tenants]]`` table.
TENANT_FIELDS = ("name", "ingest_topic", "responses_topic", "acls")


@dataclass(frozen=True, slots=True)
class Tenant:
    """One tenant: its name (the principal its rules stand for, and its ``serve`` user), the
    topics it writes requests to and reads answers from, and its rules."""

    name: str
    ingest_topic: str
    responses_topic: str
    acls: tuple[AclBinding, ...] = ()

    @property
    def authorizer(self) -> Authorizer:
        """The tenant's rules as an ``Authorizer``."""
        return Authorizer(self.acls)

    def as_dict(self) -> dict[str, Any]:
        """The tenant as its TOML table."""
        return {
            "name": self.name,
            "ingest_topic": self.ingest_topic,
            "responses_topic": self.responses_topic,
            "acls": [binding.as_dict() for binding in self.acls],
        }


def _tenant(data: Any, where: str) -> Tenant:
    if isinstance(data, Tenant):
        return data
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}must be a table with {', '.join(TENANT_FIELDS)}")
    unknown = sorted(set(data) - set(TENANT_FIELDS))
    if unknown:
        raise ValueError(f"{where}unknown keys {unknown} (known: {', '.join(TENANT_FIELDS)})")
    for key in TENANT_FIELDS[:3]:
        value = data.get(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where}{key}: must be a non-empty string")
    for key in ("ingest_topic", "responses_topic"):
        if not is_valid_topic(data[key]):
            raise ValueError(f"{where}{key}: {data[key]!r} is not a valid Kafka topic name")
    acls = data.get("acls", [])
    if not isinstance(acls, Sequence) or isinstance(acls, str):
        raise ValueError(f"{where}acls: must be a list of [[tenants.acls]] tables")
    return Tenant(
        name=data["name"],
        ingest_topic=data["ingest_topic"],
        responses_topic=data["responses_topic"],
        acls=tuple(
            binding
            if isinstance(binding, AclBinding)
            else AclBinding.parse(binding, f"{where}acls[{i}]: ")
            for i, binding in enumerate(acls)
        ),
    )


def parse_tenants(data: Iterable[Any], reserved_topics: Iterable[str] = ()) -> tuple[Tenant, ...]:
    """Tenants from their TOML tables (or ``Tenant`` values): names and topics unique, none of
    ``reserved_topics``; a ValueError names the tenant and field."""
    tenants = tuple(_tenant(item, f"tenants[{i}]: ") for i, item in enumerate(data))
    seen_names: set[str] = set()
    seen_topics = set(reserved_topics)
    for i, tenant in enumerate(tenants):
        if tenant.name in seen_names:
            raise ValueError(f"tenants[{i}]: name: {tenant.name!r} is used by another tenant")
        seen_names.add(tenant.name)
        for key in ("ingest_topic", "responses_topic"):
            topic = getattr(tenant, key)
            if topic in seen_topics:
                raise ValueError(
                    f"tenants[{i}]: {key}: {topic!r} is already the job's or another tenant's"
                )
            seen_topics.add(topic)
    return tenants


def load_tenants(path: str | Path, *, only_tenants: bool = True) -> list[dict[str, Any]]:
    """The ``[[tenants]]`` tables of the TOML file at ``path``; with ``only_tenants`` False
    other keys are ignored (the job's configuration file will do)."""
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    unknown = sorted(set(data) - {"tenants"})
    if unknown and only_tenants:
        raise ValueError(f"{path}: unknown keys {unknown}: a tenants file holds [[tenants]] only")
    tenants = data.get("tenants", [])
    if not isinstance(tenants, list):
        raise ValueError(f"{path}: tenants: must be [[tenants]] tables")
    return tenants
