"""What a ``serve`` user may see, as Kafka's ListGroups and OffsetFetch answer its principal
(:class:`Viewer`): no user or an operator, every group; a tenant's user, the groups and topics
its rules let it DESCRIBE (other groups 404, figures over its topics only); anyone else, 403."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
from starlette.responses import PlainTextResponse

from state.coordinator.acls import AclOperation, Authorizer, ResourceType
from state.coordinator.model import TopicPartition
from streaming.serve.evaluation import GroupStatus
from streaming.serve.lag_frame import LagFrame
from streaming.serve.lag_view import LagView
from streaming.tenants import Tenant


class _OfTopic(Protocol):
    @property
    def topic_partition(self) -> TopicPartition: ...


P = TypeVar("P", bound=_OfTopic)


@dataclass
class Viewer:
    """One request's view: ``authorizer`` None and not ``refused``: everything."""

    authorizer: Authorizer | None = None
    #: A user who is neither a tenant nor an operator: sees nothing (403).
    refused: bool = False
    _groups: dict[str, bool] = field(default_factory=dict, repr=False)
    _topics: dict[str, bool] = field(default_factory=dict, repr=False)

    @property
    def sees_all(self) -> bool:
        return self.authorizer is None and not self.refused

    def may_see_group(self, group: str) -> bool:
        """DESCRIBE on the group (decided once per group and viewer)."""
        return self._describes(ResourceType.GROUP, group, self._groups)

    def may_see_topic(self, topic: str) -> bool:
        """DESCRIBE on the topic: its offsets inside a visible group, its log-end offsets."""
        return self._describes(ResourceType.TOPIC, topic, self._topics)

    def _describes(self, resource_type: ResourceType, name: str, seen: dict[str, bool]) -> bool:
        if self.refused:
            return False
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

    def partitions(self, partitions: Iterable[P]) -> list[P]:
        """The ones of a visible group's ``partitions`` whose topic is visible, in order."""
        return [p for p in partitions if self.may_see_topic(p.topic_partition.topic)]

    def frame(self, frame: LagFrame) -> tuple[LagFrame, frozenset[str]]:
        """The rows and listings of ``frame`` this viewer may see, and the visible groups that
        had rows hidden (to evaluate again)."""
        if self.sees_all:
            return frame, frozenset()
        names = frame.groups.to_pylist()
        shown_groups = np.array([self.may_see_group(g) for g in names], bool)
        shown_topics = np.array([self.may_see_topic(t) for t in frame.topics.to_pylist()], bool)
        keep = shown_groups[frame.group_index] & shown_topics[frame.topic_index]
        # Every per-row column, whatever the frame holds, keeps the same rows.
        changes: dict[str, Any] = {
            f.name: value[keep]
            for f in fields(frame)
            if isinstance(value := getattr(frame, f.name), np.ndarray)
            and value.shape[:1] == (frame.rows,)
        }
        for name, codes in (("groups", frame.group_index), ("topics", frame.topic_index)):
            kept = np.unique(codes[keep])  # sorted: rows stay sorted by group
            changes[name] = getattr(frame, name).take(pa.array(kept, pa.int64()))
            index = f"{name[:-1]}_index"
            changes[index] = np.searchsorted(kept, changes[index]).astype(np.int64)
        dropped = shown_groups[frame.group_index] & ~keep  # a visible group's hidden topic
        hidden = np.bincount(frame.group_index[dropped], minlength=len(names))
        partial = {names[k]: int(n) for k, n in enumerate(hidden) if n}
        changes["listings"] = [
            replace(g, partitions=g.partitions - partial[g.group_id])
            if g.group_id in partial
            else g
            for g in frame.listings
            if self.may_see_group(g.group_id)
        ]
        return replace(frame, **changes), frozenset(partial)


def group_status(view: LagView, viewer: Viewer, group: str) -> GroupStatus:
    """Burrow's evaluation of ``group`` over the partitions ``viewer`` may see."""
    return view.status_of(group, viewer.partitions(view.partitions(group)))


def visible(
    view: LagView,
    viewer: Viewer,
    frame: LagFrame,
    statuses: Mapping[str, str],
    reasons: Mapping[str, str],
) -> tuple[LagFrame, dict[str, str], dict[str, str]]:
    """``frame``, ``statuses`` and ``reasons`` as ``viewer`` may see them (a group with hidden
    topics evaluated again over its visible ones)."""
    shown, partial = viewer.frame(frame)
    again = {g: group_status(view, viewer, g) for g in partial}
    return (
        shown,
        {**statuses, **{g: s.status.name for g, s in again.items()}},
        {**reasons, **{g: s.reason for g, s in again.items()}},
    )


def viewer_in(scope: Mapping[str, Any]) -> Viewer:
    """The request's viewer (:class:`ViewerMiddleware`); RuntimeError without one."""
    viewer = scope.get("viewer")
    if not isinstance(viewer, Viewer):
        raise RuntimeError("no viewer in the request: the app runs without ViewerMiddleware")
    return viewer


class ViewerMiddleware:
    """Decides each request's :class:`Viewer` once (``scope["viewer"]``, from the
    ``scope["user"]`` and ``scope["operator"]`` of basic authentication); 403 if refused."""

    def __init__(self, app: Any, tenants: Mapping[str, Tenant]) -> None:
        self.app = app
        self.tenants = dict(tenants)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan; the app has no websocket route
            await self.app(scope, receive, send)
            return
        tenant = self.tenants.get(scope.get("user", ""))
        if tenant is not None:
            viewer = Viewer(tenant.authorizer)
        else:  # no users at all, or an operator: everything; any other user: nothing
            viewer = Viewer(refused="user" in scope and scope.get("operator") is not True)
        if viewer.refused:
            body = "403 Forbidden: this user is neither a tenant nor an operator\n"
            await PlainTextResponse(body, 403)(scope, receive, send)
            return
        await self.app({**scope, "viewer": viewer}, receive, send)
