"""What a ``serve`` user may see: a user named like a tenant sees its groups only.

Kafka filters ListGroups and OffsetFetch by DESCRIBE on the group (and ListOffsets by DESCRIBE
on the topic); ``serve`` does the same with the tenants' rules (``streaming.tenants``,
``state.coordinator.acls``): a user (``--web-config-file``'s ``basic_auth_users``) whose name is
a tenant's sees in ``/metrics``, Burrow's routes and the dashboard only the groups that tenant's
rules let it DESCRIBE (READ, DELETE and ALL imply it), and the topic series only of topics it
may DESCRIBE; any other group answers 404 as if absent. A user with no tenant of its name is an
operator and sees everything, as does every request when ``serve`` has no users.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from state.coordinator.acls import AclOperation, Authorizer, ResourceType
from streaming.tenants import Tenant

__all__ = ["Viewer", "filter_exposition", "viewer_of"]

#: The group (kafka-lag-exporter's ``group``, kafka_exporter's ``consumergroup``) and ``topic``
#: labels of a sample line (label values are escaped: ``\\"``).
_LABEL = re.compile(r'[{,](consumergroup|group|topic)="((?:[^"\\]|\\.)*)"')


def _unescape(value: str) -> str:
    return value.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


@dataclass
class Viewer:
    """One request's view: ``authorizer`` None for an operator (everything)."""

    authorizer: Authorizer | None = None
    _groups: dict[str, bool] = field(default_factory=dict, repr=False)
    _topics: dict[str, bool] = field(default_factory=dict, repr=False)

    @property
    def sees_all(self) -> bool:
        return self.authorizer is None

    def may_see_group(self, group: str) -> bool:
        """DESCRIBE on the group (decided once per group and viewer)."""
        return self._describes(ResourceType.GROUP, group, self._groups)

    def may_see_topic(self, topic: str) -> bool:
        """DESCRIBE on the topic (its log-end offsets)."""
        return self._describes(ResourceType.TOPIC, topic, self._topics)

    def _describes(self, resource_type: ResourceType, name: str, seen: dict[str, bool]) -> bool:
        if self.authorizer is None:
            return True
        allowed = seen.get(name)
        if allowed is None:
            allowed = self.authorizer.authorize(resource_type, name, AclOperation.DESCRIBE)
            seen[name] = allowed
        return allowed

    def groups(self, groups: Iterable[str]) -> list[str]:
        """The visible ones of ``groups``, in their order."""
        return [g for g in groups if self.may_see_group(g)]


def viewer_of(scope: Mapping[str, Any], tenants: Mapping[str, Tenant]) -> Viewer:
    """The view of the request whose ASGI ``scope`` this is: its authenticated user's tenant's
    (``scope["user"]``, set by ``basic_auth``), else an operator's."""
    user = scope.get("user")
    tenant = tenants.get(user) if isinstance(user, str) else None
    return Viewer(tenant.authorizer if tenant is not None else None)


def filter_exposition(text: str, viewer: Viewer) -> str:
    """``/metrics``' text with only the samples ``viewer`` may see: a sample with a ``group``
    label only for a visible group, one with a ``topic`` label (and no group) only for a visible
    topic; comments (HELP, TYPE) and other samples stay."""
    if viewer.sees_all:
        return text
    kept = []
    for line in text.splitlines(keepends=True):
        if line.startswith("#") or "{" not in line:
            kept.append(line)
            continue
        labels = dict(_LABEL.findall(line[: line.rfind("}") + 1]))
        group = labels.get("group", labels.get("consumergroup"))
        if group is not None:
            if viewer.may_see_group(_unescape(group)):
                kept.append(line)
            continue
        topic = labels.get("topic")
        if topic is None or viewer.may_see_topic(_unescape(topic)):
            kept.append(line)
    return "".join(kept)
