"""Fixtures of the sink tests: every backend (``backends``)."""

from tests.connectors.sinks.backends import backend, make_sink, sink

__all__ = ["backend", "make_sink", "sink"]
