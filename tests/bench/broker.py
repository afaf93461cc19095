"""The broker a benchmark runs against."""

from __future__ import annotations

from collections.abc import Callable

from connectors.kafka.local import LocalKafkaCluster
from connectors.runtime import runtime_dir


def bench_broker(
    bootstrap: str | None, echo: Callable[[str], None] = print
) -> tuple[str, LocalKafkaCluster | None]:
    """``bootstrap`` when given; else a one-node broker in ``.runtime/kafka-bench/`` (started,
    or the one already running there). Returns the bootstrap servers and the cluster this run
    must stop: None for a broker it was given or found running."""
    if bootstrap is not None:
        return bootstrap, None
    cluster = LocalKafkaCluster(runtime_dir() / "kafka-bench")
    started = cluster.start(nodes=1, port=None, echo=echo)
    return started.config.bootstrap_servers, None if started.reused else cluster
