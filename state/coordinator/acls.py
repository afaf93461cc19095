"""Kafka's ACLs for the offset APIs, as its ``StandardAuthorizer`` decides them.

A tenant's rules are ``AclBinding``s without principal (the tenant) and host (any). A matching DENY
of the operation or ``ALL`` denies; else a matching ALLOW of the operation, ``ALL`` or one implying
it (READ, WRITE, DELETE and ALTER imply DESCRIBE) allows; else denied (Kafka's
``allow.everyone.if.no.acl.found`` false). ``KafkaApis`` asks: OffsetCommit READ on the group and
each topic; TxnOffsetCommit WRITE on the transactional id first, then as OffsetCommit;
OffsetDelete DELETE on the group, READ on each topic; DeleteGroups DELETE on the group;
OffsetFetch and DescribeGroups DESCRIBE on the group (and each fetched topic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from state.coordinator.model import TopicPartition
from state.coordinator.requests import TxnOffsetCommitRequest

#: A LITERAL resource name matching every name (Kafka's ``ResourcePattern.WILDCARD_RESOURCE``).
WILDCARD_RESOURCE = "*"


class ResourceType(Enum):
    """The resources whose ACLs the offset APIs check (Kafka's ``ResourceType``)."""

    GROUP = "GROUP"
    TOPIC = "TOPIC"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"


class PatternType(Enum):
    """How a binding's ``resource_name`` matches (Kafka's ``PatternType``)."""

    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class AclOperation(Enum):
    """The operations the offset APIs ask for, and ``ALL`` (Kafka's ``AclOperation``); WRITE and
    ALTER only imply DESCRIBE here."""

    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"


class AclPermissionType(Enum):
    """ALLOW or DENY (Kafka's ``AclPermissionType``)."""

    ALLOW = "ALLOW"
    DENY = "DENY"


#: Operations an ALLOW of the key's operation allows.
_IMPLIES: Mapping[AclOperation, frozenset[AclOperation]] = {
    op: frozenset({op, AclOperation.DESCRIBE})
    if op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER)
    else frozenset({op})
    for op in AclOperation
}

#: The operations that mean something on a TRANSACTIONAL_ID (``AclEntry.supportedOperations``).
TRANSACTIONAL_ID_OPERATIONS: frozenset[AclOperation] = frozenset(
    {AclOperation.ALL, AclOperation.WRITE, AclOperation.DESCRIBE}
)

#: The fields of a binding, as the configuration spells them (Kafka's AclBinding names).
BINDING_FIELDS = (
    "resource_type",
    "pattern_type",
    "resource_name",
    "operation",
    "permission_type",
)


def _enum_field(kind: type[Enum], name: str, raw: Any, where: str) -> Any:
    """``raw`` as a member of ``kind`` (case-insensitive), or a ValueError naming the field."""
    if isinstance(raw, kind):
        return raw
    try:
        return kind(str(raw).upper())
    except ValueError:
        accepted = ", ".join(m.value for m in kind)  # type: ignore[attr-defined]
        raise ValueError(f"{where}{name}: {raw!r} is not one of {accepted}") from None


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One rule: ``permission_type`` ``operation`` on the ``resource_type`` resources that
    ``resource_name`` matches by ``pattern_type``."""

    resource_type: ResourceType
    pattern_type: PatternType
    resource_name: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        if not isinstance(self.resource_name, str) or not self.resource_name:
            raise ValueError("resource_name: must be a non-empty string")
        if self.pattern_type is PatternType.PREFIXED and self.resource_name == WILDCARD_RESOURCE:
            # Kafka refuses it too: "*" is a wildcard only as a LITERAL name.
            raise ValueError("resource_name: '*' is a wildcard only with pattern_type LITERAL")
        if (
            self.resource_type is ResourceType.TRANSACTIONAL_ID
            and self.operation not in TRANSACTIONAL_ID_OPERATIONS
        ):
            # No API asks for it: such a rule would never match, a mistake in the configuration.
            raise ValueError(
                f"operation: {self.operation.value} is not an operation on TRANSACTIONAL_ID "
                "(WRITE, DESCRIBE or ALL)"
            )

    @staticmethod
    def parse(data: Mapping[str, Any], where: str = "") -> AclBinding:
        """A binding from its configuration table (Kafka's AclBinding field names; enum values in
        any case). Errors name the field, prefixed with ``where``."""
        unknown = sorted(set(data) - set(BINDING_FIELDS))
        if unknown:
            raise ValueError(f"{where}unknown keys {unknown} (known: {', '.join(BINDING_FIELDS)})")
        missing = [name for name in BINDING_FIELDS if name not in data]
        if missing:
            raise ValueError(f"{where}missing {', '.join(missing)}")
        try:
            return AclBinding(
                resource_type=_enum_field(
                    ResourceType, "resource_type", data["resource_type"], where
                ),
                pattern_type=_enum_field(PatternType, "pattern_type", data["pattern_type"], where),
                resource_name=data["resource_name"],
                operation=_enum_field(AclOperation, "operation", data["operation"], where),
                permission_type=_enum_field(
                    AclPermissionType, "permission_type", data["permission_type"], where
                ),
            )
        except ValueError as error:
            message = str(error)
            raise ValueError(message if message.startswith(where) else where + message) from None

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding's pattern covers the resource ``name`` of ``resource_type``."""
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (WILDCARD_RESOURCE, name)

    def as_dict(self) -> dict[str, str]:
        """The binding as its configuration table."""
        return {name: getattr(self, name).value if name != "resource_name" else self.resource_name
                for name in BINDING_FIELDS}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Authorizer:
    """One principal's bindings, deciding as Kafka's ``StandardAuthorizer`` (module docstring)."""

    bindings: tuple[AclBinding, ...] = ()

    @staticmethod
    def of(bindings: Iterable[AclBinding]) -> Authorizer:
        return Authorizer(tuple(bindings))

    def authorize(self, resource_type: ResourceType, name: str, operation: AclOperation) -> bool:
        """Whether ``operation`` on resource ``name`` of ``resource_type`` is allowed."""
        allowed = False
        for binding in self.bindings:
            if not binding.matches(resource_type, name):
                continue
            if binding.permission_type is AclPermissionType.DENY:
                if binding.operation in (operation, AclOperation.ALL):
                    return False
            elif binding.operation is AclOperation.ALL or operation in _IMPLIES[binding.operation]:
                allowed = True
        return allowed


def authorized_txn_partitions(
    authorizer: Authorizer | None, request: TxnOffsetCommitRequest
) -> frozenset[TopicPartition]:
    """The partitions of ``request`` that ``authorizer`` (None: the operators', no rules) lets a
    TxnOffsetCommit commit, as ``KafkaApis.handleTxnOffsetCommitRequest`` checks it: none
    without WRITE on its transactional id or READ on its group, else those on a topic it may
    READ. Each topic is decided once (a request may name thousands of its partitions)."""
    named = (TopicPartition(p.topic, p.partition) for p in request.partitions)
    if authorizer is None:
        return frozenset(named)
    if not authorizer.authorize(
        ResourceType.TRANSACTIONAL_ID, request.transactional_id, AclOperation.WRITE
    ) or not authorizer.authorize(ResourceType.GROUP, request.group_id, AclOperation.READ):
        return frozenset()
    readable = {
        topic: authorizer.authorize(ResourceType.TOPIC, topic, AclOperation.READ)
        for topic in {p.topic for p in request.partitions}
    }
    return frozenset(tp for tp in named if readable[tp.topic])
