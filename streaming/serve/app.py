"""``consumer-offsets serve``'s application: its only state is a cache of log-end offsets, its
only write the log-end samples it reads (shared with other servers over the sink)."""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connectors.sinks import Sink, SinkError, open_sink
from streaming.serve import ServeSettings
from streaming.serve.burrow import BurrowApi
from streaming.serve.dashboard import Dashboard
from streaming.serve.lag_frame import frame_of
from streaming.serve.lag_view import LagView
from streaming.serve.log_end_cache import LogEndCache
from streaming.serve.memo import Memo
from streaming.serve.scrape import LagExposition, registry_for
from streaming.serve.snapshot import GroupEvaluator
from streaming.serve.tenant_views import ViewerMiddleware, viewer_in, visible
from streaming.tenants import Tenant

log = logging.getLogger(__name__)


def create_app(settings: ServeSettings, tenants: tuple[Tenant, ...] = ()) -> Starlette:
    """The application over ``settings``' sink; a user named like one of ``tenants`` sees its
    groups only (``tenant_views``). The log-end cache runs while the application does."""
    sink = open_sink(settings.sink_url, read_only=True)
    client_options = settings.kafka_python_options()
    samples: Sink | None = None
    if client_options is not None:  # its only write: the log-end samples it reads
        try:
            samples = open_sink(settings.sink_url)
        except SinkError as exc:
            log.warning(
                "log-end samples kept in memory only (lost on restart, not shared): the sink "
                "cannot be opened for writing: %s",
                exc,
            )
    interval = settings.log_end_interval_s
    ingest_topics = [settings.ingest_topic, *(t.ingest_topic for t in tenants)]
    log_ends = LogEndCache(
        sink, client_options, interval, samples_sink=samples, ingest_topics=ingest_topics
    )
    view = LagView(sink, log_ends, settings.cluster_name)
    registry = registry_for(view)
    # Every group's lags, made at most once per log-end interval and again after each refresh
    # of the log-end offsets: shared by the index's rows and /metrics (streaming.serve.scrape).
    frames = Memo(
        lambda: frame_of(view),
        interval,
        key=lambda: log_ends.generation,
        clock=time.time,
        as_of=lambda f: f.made_ms / 1000,
    )
    evaluator = GroupEvaluator(view, frames.get, settings.evaluation_interval_s, interval)
    lag = LagExposition(
        frames,
        lambda: evaluator.statuses,
        view.cluster,
        settings.granularity,  # type: ignore[arg-type]
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
            # A tenant: its rows of the shared frame, rendered for this scrape.
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
        *BurrowApi(view, [s for s in settings.bootstrap_servers.split(",") if s]).routes(),
        *Dashboard(view, evaluator, frames.get).routes(),
    ]
    # Every request's viewer decided once, before any route; a refused user gets 403.
    named = {tenant.name: tenant for tenant in tenants}
    middleware = [Middleware(ViewerMiddleware, tenants=named)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.view = view
    app.state.evaluator = evaluator
    app.state.lag = lag
    return app
