"""``consumer-offsets serve``: Prometheus metrics, Burrow's v3 API and a dashboard over the
sink (read-only)."""

from streaming.serve.app import ServeConfig, create_app

__all__ = ["ServeConfig", "create_app"]
