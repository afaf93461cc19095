"""The dashboard: every group with its status and total lag at ``/``, and a group's page with
each partition's committed offset, log-end offset, lag and a lag-over-time chart. Rendered on
the server (Jinja2, inline SVG): no script and no external asset, so it works offline."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from connectors.client.liveness import liveness
from connectors.sinks import SinkError, redact_url
from connectors.sinks.log_end_samples import LogEndSample, offset_time_ms
from streaming.serve.chart import chart_legend, lag_chart
from streaming.serve.lag_frame import LagFrame
from streaming.serve.lag_view import LagView, PartitionView
from streaming.serve.snapshot import GroupEvaluator, summarise
from streaming.serve.tenant_views import viewer_in, visible

#: Commits per partition drawn in the chart.
CHART_COMMITS = 100
#: Groups per page of the index.
PAGE_SIZE = 50

_templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
)


@dataclass(frozen=True)
class GroupRow:
    group_id: str
    status: str
    partitions: int
    members: int | None
    total_lag: int
    #: The largest lag in seconds of its partitions; None when unknown.
    max_lag_seconds: float | None = None
    #: Whether that figure is only a lower bound.
    bounded: bool = False
    #: Why the status: its rule and since when ("" before the evaluator's first pass).
    reason: str = ""


def _committed_at(ms: int) -> str:
    if ms < 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _seconds_series(
    p: PartitionView, points: list[LogEndSample], now: int
) -> list[tuple[int, int]]:
    """The partition's lag in seconds at each of its commits (the commit's time minus when the
    log end passed its offset, from the sampled table) and now."""
    series = {}
    offsets = [point.offset for point in points]
    for commit in p.window:
        found = offset_time_ms(points, commit.offset, offsets)
        if found is not None:
            series[commit.timestamp_ms] = max(0, commit.timestamp_ms - found[0]) // 1000
    if p.time_lag is not None:
        series[now] = p.time_lag.lag_ms // 1000
    return sorted(series.items())


class Dashboard:
    """The pages, bound to one view; a tenant's user sees its groups only and, in them, its
    topics only (the index lists them with figures over those topics, any other group's page
    is 404: ``tenant_views``)."""

    def __init__(
        self, view: LagView, evaluator: GroupEvaluator, frames: Callable[[], LagFrame]
    ) -> None:
        self.view = view
        self.evaluator = evaluator
        #: Every group's lags now (shared with the evaluator and ``/metrics``).
        self.frames = frames

    def routes(self) -> list[Route]:
        return [Route("/", self.index), Route("/group/{group:path}", self.group)]

    def _page(self, name: str, status_code: int = 200, **context: object) -> HTMLResponse:
        try:
            # ACTIVE only while the heartbeat is fresh, else NOT RESPONDING (last seen ...).
            status = liveness(self.view.sink.status()).describe()
        except SinkError:
            status = "no status"
        page = _templates.get_template(name).render(
            cluster=self.view.cluster,
            sink=redact_url(self.view.sink.url),
            sink_status=status,
            **context,
        )
        return HTMLResponse(page, status_code=status_code)

    def index(self, request: Request) -> Response:
        """Every group, largest lag in seconds first, :data:`PAGE_SIZE` a page (``?page=``),
        filtered by a substring of the group id (``?q=``): the evaluator's last pass, so a
        load reads nothing per group."""
        query = request.query_params.get("q", "")
        try:
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            page = 1
        viewer = viewer_in(request.scope)
        if viewer.sees_all:
            every = self.evaluator.rows()
        else:  # a tenant: its rows of the current lags, made for this page
            every = summarise(
                *visible(
                    self.view,
                    viewer,
                    self.frames(),
                    self.evaluator.statuses,
                    self.evaluator.reasons,
                )
            )
        found = [r for r in every if query in r.group_id] if query else every
        pages = max(1, -(-len(found) // PAGE_SIZE))
        page = min(page, pages)
        shown = found[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        rows = [
            GroupRow(
                r.group_id,
                r.status or "…",
                r.partitions,
                r.members,
                r.total_lag,
                r.max_lag_seconds,
                r.bounded,
                r.reason,
            )
            for r in shown
        ]
        return self._page(
            "index.html",
            groups=rows,
            query=query,
            page=page,
            pages=pages,
            matching=len(found),
            total=len(every),
        )

    def _lag_series(self, p: PartitionView, now: int) -> list[tuple[int, int]]:
        """The partition's lag over time: at each of its commits (against the log-end offset
        seen then) and at each log-end offset the server saw (against the commit in force)."""
        commits = p.window
        points = {o.timestamp_ms: o.lag for o in commits if o.lag is not None}
        times = [o.timestamp_ms for o in commits]
        for at, log_end in self.view.log_ends.series(p.topic_partition):
            i = bisect.bisect_right(times, at)
            if i:
                points[at] = max(0, log_end - commits[i - 1].offset)
        if p.lag is not None:
            points[now] = p.lag
        return sorted(points.items())

    def group(self, request: Request) -> Response:
        group_id = request.path_params["group"]
        viewer = viewer_in(request.scope)
        if not (viewer.may_see_group(group_id) and self.view.has_group(group_id)):
            return self._page(
                "index.html",
                status_code=404,
                groups=[],
                query="",
                page=1,
                pages=1,
                matching=0,
                total=0,
            )
        now = int(time.time() * 1000)
        partitions = viewer.partitions(self.view.partitions(group_id, window=CHART_COMMITS))
        status = self.view.status_of(group_id, partitions, now)
        by_partition = {(s.topic, s.partition): s for s in status.partitions}
        series = {
            f"{p.committed.topic}-{p.committed.partition}": self._lag_series(p, now)
            for p in partitions
        }
        seconds = {
            f"{p.committed.topic}-{p.committed.partition}": _seconds_series(
                p, self.view.log_ends.points(p.topic_partition), now
            )
            for p in partitions
        }
        rows = [(p, by_partition[(p.committed.topic, p.committed.partition)]) for p in partitions]
        return self._page(
            "group.html",
            group=group_id,
            status=status,
            partitions=partitions,
            rows=rows,
            chart=lag_chart(series, f"lag of {group_id} over time"),
            legend=chart_legend(series),
            seconds_chart=lag_chart(seconds, f"lag in seconds of {group_id} over time"),
            committed_at=_committed_at,
        )
