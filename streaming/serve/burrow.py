"""Burrow's v3 HTTP API over the sink, same routes and JSON shapes, so Burrow's clients and
dashboards (burrow-dashboard, Burrower, burrow_exporter) work unchanged.

Every answer carries Burrow's envelope: ``error``, ``message`` and ``request`` (``url``,
``host``). Unknown clusters and groups answer 404 with ``error: true``, as Burrow does. One
cluster per server: the sink's (``--cluster-name``). A user named like a tenant sees only the
groups and topics its rules let it DESCRIBE; the others answer 404 (``tenant_views``).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from streaming.serve.lag_view import LagView
from streaming.serve.tenant_views import viewer_of
from streaming.tenants import Tenant

_HOST = socket.gethostname()


def _answer(request: Request, message: str, status_code: int = 200, **body: Any) -> JSONResponse:
    payload = {"error": status_code >= 400, "message": message, **body}
    payload["request"] = {"url": request.url.path, "host": _HOST}
    return JSONResponse(payload, status_code=status_code)


class BurrowApi:
    """The routes, bound to one view of the sink."""

    def __init__(
        self, view: LagView, servers: list[str], tenants: Mapping[str, Tenant] | None = None
    ) -> None:
        self.view = view
        self.servers = servers
        #: Tenants by name: a user named like one sees its groups only (``tenant_views``).
        self.tenants = dict(tenants or {})

    def routes(self) -> list[Route]:
        base = "/v3/kafka"
        return [
            Route("/burrow/admin", self.admin),
            Route(base, self.clusters),
            Route(base + "/{cluster}", self.cluster),
            Route(base + "/{cluster}/consumer", self.consumers),
            Route(base + "/{cluster}/consumer/{group}", self.consumer),
            Route(base + "/{cluster}/consumer/{group}/status", self.status),
            Route(base + "/{cluster}/consumer/{group}/lag", self.lag),
            Route(base + "/{cluster}/topic", self.topics),
            Route(base + "/{cluster}/topic/{topic}", self.topic),
        ]

    async def admin(self, request: Request) -> Response:
        return PlainTextResponse("GOOD")

    def _unknown_cluster(self, request: Request) -> JSONResponse | None:
        if request.path_params["cluster"] != self.view.cluster:
            return _answer(request, "cluster not found", 404)
        return None

    def _unknown_group(self, request: Request) -> JSONResponse | None:
        missing = self._unknown_cluster(request)
        group = request.path_params["group"]
        visible = viewer_of(request.scope, self.tenants).may_see_group(group)
        if missing is None and not (visible and self.view.has_group(group)):
            missing = _answer(request, "cluster or consumer not found", 404)
        return missing

    def clusters(self, request: Request) -> Response:
        return _answer(request, "cluster list returned", clusters=[self.view.cluster])

    def cluster(self, request: Request) -> Response:
        if missing := self._unknown_cluster(request):
            return missing
        interval = self.view.log_ends.interval_s
        module = {
            "class-name": "kafka",
            "servers": self.servers,
            "client-profile": {
                "name": "default",
                "client-id": "consumer-offsets-serve",
                "kafka-version": "4.1.1",
                "tls": None,
                "sasl": None,
            },
            "topic-refresh": interval,
            "offset-refresh": interval,
        }
        return _answer(request, "cluster module detail returned", module=module)

    def consumers(self, request: Request) -> Response:
        if missing := self._unknown_cluster(request):
            return missing
        viewer = viewer_of(request.scope, self.tenants)
        groups = viewer.groups(g.group_id for g in self.view.groups())
        return _answer(request, "consumer list returned", consumers=groups)

    def consumer(self, request: Request) -> Response:
        if missing := self._unknown_group(request):
            return missing
        topics: dict[str, list[dict[str, Any]]] = {}
        intervals = self.view.intervals
        for p in self.view.partitions(request.path_params["group"]):
            partitions = topics.setdefault(p.committed.topic, [])
            # Burrow lists partitions by index; a gap (no commit) is an entry with no offsets.
            while len(partitions) <= p.committed.partition:
                partitions.append(
                    {"offsets": [None] * intervals, "owner": "", "client_id": "", "current-lag": 0}
                )
            offsets: list[dict[str, Any] | None] = [o.as_burrow() for o in p.window]
            partitions[p.committed.partition] = {
                "offsets": [None] * (intervals - len(offsets)) + offsets,
                "owner": "",
                "client_id": "",
                "current-lag": p.lag or 0,
            }
        return _answer(request, "consumer detail returned", topics=topics)

    def _status(self, request: Request, only_problems: bool) -> Response:
        if missing := self._unknown_group(request):
            return missing
        evaluated = self.view.status(request.path_params["group"])
        return _answer(
            request, "consumer status returned", status=evaluated.as_burrow(only_problems)
        )

    def status(self, request: Request) -> Response:
        return self._status(request, only_problems=True)

    def lag(self, request: Request) -> Response:
        return self._status(request, only_problems=False)

    def topics(self, request: Request) -> Response:
        if missing := self._unknown_cluster(request):
            return missing
        viewer = viewer_of(request.scope, self.tenants)
        topics = [t for t in self.view.sink.committed_topics() if viewer.may_see_topic(t)]
        return _answer(request, "topic list returned", topics=topics)

    def topic(self, request: Request) -> Response:
        if missing := self._unknown_cluster(request):
            return missing
        topic = request.path_params["topic"]
        if not viewer_of(request.scope, self.tenants).may_see_topic(topic):
            return _answer(request, "topic not found", 404)
        ends = self.view.log_ends.offsets_of(topic)
        if not ends:
            stored = self.view.sink.log_end_offsets([topic])
            ends = {tp.partition: entry.offset for tp, entry in stored.items()}
        if not ends:
            return _answer(request, "topic not found", 404)
        offsets = [ends.get(p, 0) for p in range(max(ends) + 1)]
        return _answer(request, "topic offsets returned", offsets=offsets)
