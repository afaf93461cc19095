"""The dashboard: every group with its status and lag at ``/``, and a group's page with lag
charts and its committed offsets over the kept history, as of a time (``?as_of=``); rendered on
the server (Jinja2, inline SVG), so it works offline."""

from __future__ import annotations

import bisect
import html
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from connectors.client.liveness import liveness
from connectors.sinks import Sink, SinkError, redact_url
from connectors.sinks.log_end_samples import LogEndSample, RecordTime, offset_time_ms
from streaming.serve.evaluation import ConsumerOffset
from streaming.serve.lag_frame import LagFrame
from streaming.serve.lag_view import LagView, PartitionView
from streaming.serve.log_end_cache import RecordKey
from streaming.serve.point_in_time import (
    HISTORY_ROWS,
    RESET_PLAN_FILE,
    GroupAsOf,
    KeptRange,
    group_as_of,
    group_history,
    iso_utc,
    parse_as_of,
)
from streaming.serve.snapshot import GroupEvaluator, summarise
from streaming.serve.tenant_views import Viewer, viewer_in, visible

#: Commits per partition drawn in the chart.
CHART_COMMITS = 100
#: Groups per page of the index.
PAGE_SIZE = 50

_templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
)


#: One colour per series, repeated when there are more (colour-blind safe, Okabe-Ito).
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 12, 36


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def chart_legend(series: Mapping[str, object]) -> list[tuple[str, str]]:
    """(label, colour) of each series, as the chart draws them."""
    return [(label, COLOURS[i % len(COLOURS)]) for i, label in enumerate(sorted(series))]


def lag_chart(
    series: Mapping[str, Sequence[tuple[int, int]]],
    title: str,
    span: tuple[int, int] | None = None,
) -> str:
    """An SVG line chart of each series' (time ms, lag) points; a note when there are none.
    ``span``: the first and last time of the x axis (charts side by side share one), which
    must hold every point; else the points' own."""
    points = [p for values in series.values() for p in values]
    if not points:
        return (
            f'<svg role="img" aria-label="{html.escape(title)}" width="{WIDTH}" height="40">'
            '<text x="8" y="24">no lag history yet</text></svg>'
        )
    t0, t1 = span or (min(t for t, _ in points), max(t for t, _ in points))
    top = max(max(lag for _, lag in points), 1)
    width_ms = max(t1 - t0, 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: int) -> float:
        return LEFT + (t - t0) / width_ms * plot_w

    def y(lag: int) -> float:
        return TOP + plot_h - lag / top * plot_h

    parts = [
        f'<svg role="img" aria-label="{html.escape(title)}" class="lag-chart" '
        f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{html.escape(title)}</title>",
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}" '
        'stroke="#888"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#888"/>',
        f'<text x="{LEFT - 6}" y="{TOP + 10}" text-anchor="end" font-size="11">{top:,}</text>',
        f'<text x="{LEFT - 6}" y="{TOP + plot_h}" text-anchor="end" font-size="11">0</text>',
        f'<text x="{LEFT}" y="{HEIGHT - 12}" font-size="11">{_clock(t0)}</text>',
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 12}" text-anchor="end" font-size="11">'
        f"{_clock(t1)} UTC</text>",
    ]
    for i, (label, values) in enumerate(sorted(series.items())):
        colour = COLOURS[i % len(COLOURS)]  # as chart_legend says
        ordered = sorted(values)
        parts.append(_series_line(label, colour, [(x(t), y(lag)) for t, lag in ordered]))
        for t, lag in ordered:
            parts.append(
                f'<circle cx="{x(t):.1f}" cy="{y(lag):.1f}" r="2.5" fill="{colour}">'
                f"<title>{html.escape(label)} {_clock(t)}: lag {lag:,}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _moment(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%m-%d %H:%M")


def history_chart(
    series: Mapping[str, Sequence[tuple[int, int]]],
    ranges: Sequence[KeptRange],
    title: str,
    as_of: int | None = None,
) -> str:
    """An SVG step chart of each series' (commit time ms, committed offset) points over
    ``ranges`` (oldest first, holding every point): each range an equal share of the x axis,
    marked with how the history keeps commits there (``1/min``), so the last minutes read as
    well as the last week; each commit a link to the page as of its time; ``as_of`` a line."""
    points = [p for values in series.values() for p in values]
    if not points or not ranges:
        return (
            f'<svg role="img" aria-label="{html.escape(title)}" width="{WIDTH}" height="40">'
            '<text x="8" y="24">no commit history kept</text></svg>'
        )
    low, high = min(o for _, o in points), max(o for _, o in points)
    span = max(high - low, 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM - 14  # room for the rates
    share = plot_w / len(ranges)
    starts = [r.start_ms for r in ranges]
    now = ranges[-1].end_ms

    def x(t: int) -> float:
        i = max(0, bisect.bisect_right(starts, t) - 1)
        r = ranges[i]
        return LEFT + share * (i + min(max(t - r.start_ms, 0) / max(r.end_ms - r.start_ms, 1), 1))

    def y(offset: int) -> float:
        return TOP + 14 + plot_h - (offset - low) / span * plot_h

    bottom = TOP + 14 + plot_h
    parts = [
        f'<svg role="img" aria-label="{html.escape(title)}" class="history-chart" '
        f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{html.escape(title)}</title>",
        f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#888"/>',
        f'<text x="{LEFT - 6}" y="{TOP + 24}" text-anchor="end" font-size="11">{high:,}</text>',
        f'<text x="{LEFT - 6}" y="{bottom}" text-anchor="end" font-size="11">{low:,}</text>',
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 12}" text-anchor="end" font-size="11">'
        "now (UTC)</text>",
    ]
    for i, r in enumerate(ranges):
        left = LEFT + share * i
        parts.append(
            f'<line x1="{left:.1f}" y1="{TOP}" x2="{left:.1f}" y2="{bottom}" stroke="#bbb" '
            'stroke-dasharray="3,3"/>'
            f'<text x="{left:.1f}" y="{HEIGHT - 12}" font-size="11">{_moment(r.start_ms)}</text>'
            f'<text class="kept" x="{left + share / 2:.1f}" y="{TOP + 8}" text-anchor="middle" '
            f'font-size="11" fill="#777">kept {r.label}</text>'
        )
    for i, (label, values) in enumerate(sorted(series.items())):
        colour = COLOURS[i % len(COLOURS)]  # as chart_legend says
        ordered = sorted(values)
        # The committed offset holds from its commit until the next one: a step each commit.
        steps: list[tuple[int, int]] = []
        for (t, offset), (until, _) in itertools.pairwise([*ordered, (now, 0)]):
            steps += [(t, offset), (until, offset)]
        parts.append(_series_line(label, colour, [(x(t), y(o)) for t, o in steps]))
        for t, offset in ordered:
            parts.append(
                f'<a href="?as_of={iso_utc(t)}#as-of"><circle cx="{x(t):.1f}" '
                f'cy="{y(offset):.1f}" r="2.5" fill="{colour}"><title>{html.escape(label)} '
                f"{_committed_at(t)}: offset {offset:,}</title></circle></a>"
            )
    if as_of is not None and ranges[0].start_ms <= as_of <= now:
        parts.append(
            f'<line class="as-of" x1="{x(as_of):.1f}" y1="{TOP}" x2="{x(as_of):.1f}" '
            f'y2="{bottom}" stroke="#222"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _committed_at(ms: int) -> str:
    if ms < 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _table_seconds(
    commit: ConsumerOffset, points: list[LogEndSample], offsets: list[int]
) -> int | None:
    """The lag in seconds the commit had by the sampled table: its time minus when the log end
    passed its offset, 0 when the newest point, seen after it, had not passed it (the log end
    was at most the commit then); None when the table cannot place it (older than its oldest
    point, or committed after its newest)."""
    found = offset_time_ms(points, commit.offset, offsets)
    if found is not None and not found[1]:
        return max(0, commit.timestamp_ms - found[0]) // 1000
    if found is None and points and commit.timestamp_ms <= points[-1].last_seen_ms:
        return 0
    return None


def _seconds_series(
    p: PartitionView, points: list[LogEndSample], now: int, records: Mapping[RecordKey, RecordTime]
) -> list[tuple[int, int]]:
    """The partition's lag in seconds at each of its commits and now, each exact or left out
    (a bound is never drawn as a figure): by the sampled table, else, for a commit the table
    cannot place, its time minus its record's timestamp (``records``, as ``describe`` times
    the committed offset)."""
    series = {}
    offsets = [point.offset for point in points]
    for commit in p.window:
        seconds = _table_seconds(commit, points, offsets)
        record = records.get(_record_key(p, commit.offset))
        if seconds is None and record is not None and not record.gone:
            seconds = max(0, commit.timestamp_ms - record.timestamp_ms) // 1000
        if seconds is not None:
            series[commit.timestamp_ms] = seconds
    if p.time_lag is not None and not p.time_lag.bounded:
        series[now] = p.time_lag.lag_ms // 1000
    return sorted(series.items())


def _record_key(p: PartitionView, offset: int) -> RecordKey:
    return (p.committed.topic, p.committed.partition, offset)


def _unplaced(p: PartitionView, points: list[LogEndSample]) -> list[RecordKey]:
    """The partition's commits the sampled table cannot place and whose record exists (behind
    the log end): what :func:`_seconds_series` times by their records."""
    offsets = [point.offset for point in points]
    return [
        _record_key(p, commit.offset)
        for commit in p.window
        if _table_seconds(commit, points, offsets) is None
        and p.log_end_offset is not None
        and commit.offset < p.log_end_offset
    ]


def _time_range(*charts: Mapping[str, Sequence[tuple[int, int]]]) -> tuple[int, int] | None:
    """The first and last time of every point of ``charts``: the span they all draw over."""
    times = [t for series in charts for values in series.values() for t, _ in values]
    return (min(times), max(times)) if times else None


def failover_lines(sink: Sink) -> list[str]:
    """Per deployment: the process that writes (holds its lease) and the standbys that would
    take over, as the header says them."""
    try:
        found = sink.deployments()
    except SinkError:
        return []
    lines = []
    for lease, standbys in found:
        if lease.holder and lease.expires_in_ms > 0:
            active = f"active {lease.holder} (epoch {lease.epoch})"
        else:
            active = "no active process (lease " + ("expired)" if lease.holder else "free)")
        waiting = ", ".join(f"{s.holder} {s.state}" for s in standbys) or "none"
        lines.append(f"{lease.name}: {active}; standbys: {waiting}")
    return lines


class Dashboard:
    """The pages, bound to one view; a tenant's user sees its groups and topics only."""

    def __init__(
        self, view: LagView, evaluator: GroupEvaluator, frames: Callable[[], LagFrame]
    ) -> None:
        self.view = view
        self.evaluator = evaluator
        #: Every group's lags now (shared with the evaluator and ``/metrics``).
        self.frames = frames

    def routes(self) -> list[Route]:
        return [Route("/", self.index), Route("/group/{group:path}", self.group)]

    def _page(
        self, name: str, status_code: int = 200, operator: bool = True, **context: object
    ) -> HTMLResponse:
        """Page ``name`` under the header; an ``operator`` sees the deployment's processes."""
        try:
            # ACTIVE only while the heartbeat is fresh, else NOT RESPONDING (last seen ...).
            status = liveness(self.view.sink.status()).describe()
        except SinkError:
            status = "no status"
        page = _templates.get_template(name).render(
            cluster=self.view.cluster,
            sink=redact_url(self.view.sink.url),
            sink_status=status,
            failover=failover_lines(self.view.sink) if operator else [],
            **context,
        )
        return HTMLResponse(page, status_code=status_code)

    def index(self, request: Request) -> Response:
        """Every group, largest lag in seconds first, :data:`PAGE_SIZE` a page (``?page=``),
        filtered by a substring of the group id (``?q=``)."""
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
        return self._page(
            "index.html",
            operator=viewer.sees_all,
            groups=shown,
            query=query,
            page=page,
            pages=pages,
            matching=len(found),
            total=len(every),
        )

    def _lag_series(self, p: PartitionView, now: int) -> list[tuple[int, int]]:
        """The partition's lag at each of its commits and each log-end offset the server saw."""
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
        """A group's page: its lag charts and partitions; its committed offsets over the kept
        history (at most :data:`HISTORY_ROWS` rows read a view); with ``?as_of=TIME`` its
        offsets then and the command to reset it there (400 for a TIME that is neither epoch ms
        nor ISO 8601). 404 for a group the viewer may not DESCRIBE, as for an absent one; a
        group deleted since (or whose offsets expired) is found by its history as of a time."""
        group_id = request.path_params["group"]
        viewer = viewer_in(request.scope)
        exists = self.view.sink.group_exists(group_id)
        if not (viewer.may_see_group(group_id) and (exists or "as_of" in request.query_params)):
            return self._not_found(viewer)
        now = int(time.time() * 1000)
        partitions = viewer.partitions(self.view.partitions(group_id, window=CHART_COMMITS))
        as_of, problem = self._as_of(request, group_id, partitions)
        if not exists and (as_of is None or not as_of.answers):
            return self._not_found(viewer)  # nothing committed then either
        status = self.view.status_of(group_id, partitions, now)
        by_partition = {(s.topic, s.partition): s for s in status.partitions}
        labelled = {f"{p.committed.topic}-{p.committed.partition}": p for p in partitions}
        series = {label: self._lag_series(p, now) for label, p in labelled.items()}
        points = {
            label: self.view.log_ends.points(p.topic_partition) for label, p in labelled.items()
        }
        # The records of commits older than the table: read by the refresh thread (the ones
        # not read yet are left out of the chart until they are).
        records = self.view.log_ends.record_times(
            (key for label, p in labelled.items() for key in _unplaced(p, points[label])),
            charted=True,
        )
        seconds = {
            label: _seconds_series(p, points[label], now, records) for label, p in labelled.items()
        }
        span = _time_range(series, seconds)  # both charts over the same time
        rows = [(p, by_partition[(p.committed.topic, p.committed.partition)]) for p in partitions]
        # At most HISTORY_ROWS rows of history a view, whatever the group's size.
        history = group_history(self.view.sink, viewer, group_id, now)
        return self._page(
            "group.html",
            400 if problem else 200,
            operator=viewer.sees_all,
            group=group_id,
            status=status,
            partitions=partitions,
            rows=rows,
            chart=lag_chart(series, f"lag of {group_id} over time", span),
            legend=chart_legend(series),
            seconds_chart=lag_chart(seconds, f"lag in seconds of {group_id} over time", span),
            committed_at=_committed_at,
            history=history,
            history_chart=history_chart(
                history.series,
                history.ranges,
                f"committed offsets of {group_id}",
                None if as_of is None else as_of.at_ms,
            ),
            history_legend=chart_legend(history.series),
            history_rows=HISTORY_ROWS,
            as_of=as_of,
            reset_plan_file=RESET_PLAN_FILE,
            as_of_problem=problem,
        )

    def _not_found(self, viewer: Viewer) -> Response:
        empty = {"groups": [], "query": "", "page": 1, "pages": 1, "matching": 0, "total": 0}
        return self._page("index.html", 404, viewer.sees_all, **empty)

    def _as_of(
        self, request: Request, group_id: str, partitions: Sequence[PartitionView]
    ) -> tuple[GroupAsOf | None, str]:
        """The page's ``?as_of=TIME`` (epoch ms, or ISO 8601; no zone: UTC) answered as the
        ``offsets?as_of=`` route answers it, or the problem with TIME; None when none asked."""
        text = request.query_params.get("as_of", "")
        if not text.strip():
            return None, ""
        try:
            at_ms = parse_as_of(text)
        except ValueError as exc:
            return None, str(exc)
        now = (p.topic_partition for p in partitions)
        return group_as_of(self.view.sink, viewer_in(request.scope), group_id, at_ms, now), ""


def _series_line(label: str, colour: str, points: list[tuple[float, float]]) -> str:
    """One series of a chart: its line through ``points`` (SVG coordinates), named ``label``."""
    path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
    return (
        f'<polyline class="series" data-series="{html.escape(label)}" fill="none" '
        f'stroke="{colour}" stroke-width="2" points="{path}"/>'
    )
