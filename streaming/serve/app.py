"""``consumer-offsets serve``: a read-only HTTP server over the sink the job or the mirror keeps
(Prometheus metrics, Burrow's v3 API, a dashboard). Its only state is a cache of log-end offsets,
and its only write the log-end samples it reads (shared with other servers over the sink)."""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connectors.sinks import Sink, SinkError, open_sink
from streaming.serve.burrow import BurrowApi
from streaming.serve.dashboard import Dashboard
from streaming.serve.evaluation import DEFAULT_INTERVALS
from streaming.serve.exposition import Granularity
from streaming.serve.lag_frame import frame_of
from streaming.serve.lag_view import LagView
from streaming.serve.log_end_cache import DEFAULT_INTERVAL_S, LogEndCache
from streaming.serve.memo import Memo
from streaming.serve.scrape import LagExposition, registry_for
from streaming.serve.snapshot import DEFAULT_EVALUATION_INTERVAL_S, GroupEvaluator
from streaming.serve.tenant_views import ViewerMiddleware, viewer_in, visible
from streaming.tenants import Tenant

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeConfig:
    sink_url: str
    #: Kafka client options (kafka-python's names) for log-end offsets; None reads the sink's
    #: stored ones (a mirror's).
    client_options: Mapping[str, Any] | None = None
    bootstrap_servers: list[str] = field(default_factory=list)
    cluster_name: str = "local"
    log_end_interval_s: float = DEFAULT_INTERVAL_S
    intervals: int = DEFAULT_INTERVALS
    #: ``/metrics``' lag series: per partition, or per group and topic (kminion's option).
    granularity: Granularity = "partition"
    #: Seconds between two evaluations of every group (Burrow's statuses, the index's rows).
    evaluation_interval_s: float = DEFAULT_EVALUATION_INTERVAL_S
    #: The job's tenants: a user named like one sees only what its rules let it DESCRIBE;
    #: an operator every group; any other user nothing (``tenant_views``).
    tenants: tuple[Tenant, ...] = ()


def _samples_sink(config: ServeConfig) -> Sink | None:
    """A writable connection for the log-end samples this server reads from the cluster (its
    only write); None, said once, when the sink refuses writes (lag in seconds then rests on
    this process's own samples)."""
    try:
        return open_sink(config.sink_url)
    except SinkError as exc:
        log.warning(
            "log-end samples kept in memory only (lost on restart, not shared): the sink cannot "
            "be opened for writing: %s",
            exc,
        )
        return None


def create_app(config: ServeConfig) -> Starlette:
    """The application; the log-end cache runs while the application does (its lifespan)."""
    sink = open_sink(config.sink_url, read_only=True)
    samples = _samples_sink(config) if config.client_options is not None else None
    log_ends = LogEndCache(
        sink, config.client_options, config.log_end_interval_s, samples_sink=samples
    )
    view = LagView(sink, log_ends, config.cluster_name, config.intervals)
    registry = registry_for(view)
    # Every group's lags, made at most once per log-end interval and again after each refresh
    # of the log-end offsets: shared by the index's rows and /metrics (streaming.serve.scrape).
    interval = config.log_end_interval_s
    frames = Memo(
        lambda: frame_of(view),
        interval,
        key=lambda: log_ends.generation,
        clock=time.time,
        as_of=lambda f: f.made_ms / 1000,
    )
    evaluator = GroupEvaluator(view, frames.get, config.evaluation_interval_s, interval)
    lag = LagExposition(
        frames,
        lambda: evaluator.statuses,
        view.cluster,
        config.granularity,
        interval,
        lambda: log_ends.generation,
    )

    def metrics(request: Request) -> Response:
        viewer = viewer_in(request.scope)
        gzipped = "gzip" in request.headers.get("accept-encoding", "")
        if viewer.sees_all:
            progress = generate_latest(registry)
            body = lag.gzipped(progress) if gzipped else lag.text(progress)
        else:
            # A tenant: its rows of the shared frame, rendered for this scrape (the kept text
            # and its gzip are every group's).
            progress = generate_latest(registry_for(view, viewer.may_see_group))
            statuses, reasons = evaluator.statuses, evaluator.reasons
            body = lag.text_of(lambda f: visible(view, viewer, f, statuses, reasons)[:2], progress)
            body = gzip.compress(body, compresslevel=1) if gzipped else body
        headers = {"Content-Encoding": "gzip"} if gzipped else None
        return Response(body, media_type=CONTENT_TYPE_LATEST, headers=headers)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        log_ends.start()
        evaluator.start()
        try:
            yield
        finally:
            lag.stop()
            evaluator.stop()
            log_ends.stop()
            sink.close()

    routes = [
        Route("/metrics", metrics),
        *BurrowApi(view, config.bootstrap_servers).routes(),
        *Dashboard(view, evaluator, frames.get).routes(),
    ]
    # Every request's viewer decided once, before any route; a refused user gets 403.
    tenants = {tenant.name: tenant for tenant in config.tenants}
    middleware = [Middleware(ViewerMiddleware, tenants=tenants)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.view = view
    app.state.evaluator = evaluator
    app.state.lag = lag
    return app
