"""Burrow's v3 HTTP API over the sink, same routes and JSON shapes, for one cluster (the sink's).
Unknown clusters and groups, and those a tenant may not DESCRIBE, answer 404 as in Burrow."""

from __future__ import annotations

import socket
from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from streaming.serve.lag_view import LagView
from streaming.serve.point_in_time import offsets_as_of, parse_as_of
from streaming.serve.tenant_views import group_status, viewer_in

_HOST = socket.gethostname()


def _answer(request: Request, message: str, status_code: int = 200, **body: Any) -> JSONResponse:
    payload = {"error": status_code >= 400, "message": message, **body}
    payload["request"] = {"url": request.url.path, "host": _HOST}
    return JSONResponse(payload, status_code=status_code)


def _no_group(request: Request) -> JSONResponse:
    """Burrow's answer for a group it does not know (or the viewer may not see)."""
    return _answer(request, "cluster or consumer not found", 404)


def _partition(offsets: list[dict[str, Any] | None], lag: int) -> dict[str, Any]:
    """A consumer's partition as Burrow lists it (no owner: the sink knows no assignment)."""
    return {"offsets": offsets, "owner": "", "client_id": "", "current-lag": lag}


class BurrowApi:
    """The routes, bound to one view of the sink."""

    def __init__(self, view: LagView, servers: list[str]) -> None:
        self.view = view
        self.servers = servers

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
            Route(base + "/{cluster}/consumer/{group}/offsets", self.offsets_as_of),
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
        visible = viewer_in(request.scope).may_see_group(group)
        if missing is None and not (visible and self.view.sink.group_exists(group)):
            missing = _no_group(request)
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
        viewer = viewer_in(request.scope)
        groups = viewer.groups(g.group_id for g in self.view.sink.list_groups())
        return _answer(request, "consumer list returned", consumers=groups)

    def consumer(self, request: Request) -> Response:
        if missing := self._unknown_group(request):
            return missing
        viewer = viewer_in(request.scope)
        committed = viewer.partitions(self.view.partitions(request.path_params["group"]))
        counts = self._partition_counts(Counter(p.committed.topic for p in committed))
        topics: dict[str, list[dict[str, Any]]] = {}
        intervals = self.view.intervals
        for p in committed:
            count = counts[p.committed.topic]
            if p.committed.partition >= count:
                continue  # not a partition of the topic: Burrow drops such a commit
            # Burrow lists partitions by index; a gap (no commit) is an entry with no offsets.
            partitions = topics.setdefault(
                p.committed.topic, [_partition([None] * intervals, 0) for _ in range(count)]
            )
            offsets: list[dict[str, Any] | None] = [o.as_burrow() for o in p.window]
            window = [None] * (intervals - len(offsets)) + offsets
            partitions[p.committed.partition] = _partition(window, p.lag or 0)
        return _answer(request, "consumer detail returned", topics=topics)

    def offsets_as_of(self, request: Request) -> Response:
        """Not Burrow's: ``?as_of=TIME`` (epoch ms, or ISO 8601; no zone: UTC), the offsets the
        group had committed then, from the thinned history (``point_in_time.offsets_as_of``,
        as the group page shows them), each with its commit time and how exact it is. A group
        deleted since (or whose offsets expired) is found by its history."""
        if missing := self._unknown_cluster(request):
            return missing
        group = request.path_params["group"]
        viewer = viewer_in(request.scope)
        if not viewer.may_see_group(group):
            return _no_group(request)
        try:
            at_ms = parse_as_of(request.query_params.get("as_of", ""))
        except ValueError as exc:
            return _answer(request, str(exc), 400)
        found = offsets_as_of(self.view.sink, viewer, group, at_ms)
        if not found and not self.view.sink.group_exists(group):
            return _no_group(request)
        offsets = [
            {
                "topic": a.topic,
                "partition": a.partition,
                "offset": a.offset,
                "metadata": a.metadata,
                "timestamp": a.commit_timestamp_ms,
                "exact": a.exact,
                "exact_as_of": a.exact_as_of_ms,
            }
            for a in found
        ]
        return _answer(request, "consumer offsets as of returned", as_of=at_ms, offsets=offsets)

    def _partition_counts(self, committed: Counter[str]) -> dict[str, int]:
        """Each topic's partition count: from its log-end offsets, else (none read yet) the
        number of its partitions the group committed."""
        known: dict[str, int] = {}
        for tp in self.view.log_end_map(set(committed)):
            known[tp.topic] = max(known.get(tp.topic, 0), tp.partition + 1)
        return {**committed, **known}

    def _status(self, request: Request, only_problems: bool) -> Response:
        if missing := self._unknown_group(request):
            return missing
        evaluated = group_status(self.view, viewer_in(request.scope), request.path_params["group"])
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
        viewer = viewer_in(request.scope)
        topics = [t for t in self.view.sink.committed_topics() if viewer.may_see_topic(t)]
        return _answer(request, "topic list returned", topics=topics)

    def topic(self, request: Request) -> Response:
        if missing := self._unknown_cluster(request):
            return missing
        topic = request.path_params["topic"]
        if not viewer_in(request.scope).may_see_topic(topic):
            return _answer(request, "topic not found", 404)
        ends = self.view.log_ends.offsets_of(topic)
        if not ends:
            stored = self.view.sink.log_end_offsets([topic])
            ends = {tp.partition: entry.offset for tp, entry in stored.items()}
        if not ends:
            return _answer(request, "topic not found", 404)
        offsets = [ends.get(p, 0) for p in range(max(ends) + 1)]
        return _answer(request, "topic offsets returned", offsets=offsets)
