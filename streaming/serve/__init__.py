"""``consumer-offsets serve``: Prometheus metrics, Burrow's v3 API and a dashboard over the
sink (read-only), made by ``streaming.serve.app.create_app`` from :class:`ServeSettings`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connectors.kafka.admin import DEFAULT_INGEST_TOPIC, LOG_END_INTERVAL_S
from connectors.kafka.client_options import kafka_python_options
from connectors.secrets import hide_in_logs, secret_values

#: The values of ``ServeSettings.granularity``.
GRANULARITIES = ("partition", "topic")


@dataclass(frozen=True)
class ServeSettings:
    """``serve``'s settings: the ``[serve]`` table of a configuration file, then
    ``CONSUMER_OFFSETS_SERVE_*`` environment variables, then flags (``--log-end-interval`` and
    ``--evaluation-interval`` set the ``_s`` fields)."""

    #: The sink to serve, the job's or the mirror's; unset: the --config file's top-level (the
    #: job's) sink_url, else the job's default sink.
    sink_url: str
    #: The cluster to read log-end offsets (lag) from; unset: the file's top-level (the job's)
    #: bootstrap_servers, else the log-end offsets the sink stores, which a mirror keeps.
    bootstrap_servers: str = ""
    #: Kafka client options for that cluster, in the Java client's names; unset: the file's
    #: top-level kafka_options.
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    #: The job's ingest topic, whose partitions an open transaction holds /metrics shows (the
    #: [[tenants]]' too); unset: the file's top-level (the job's) ingest_topic.
    ingest_topic: str = DEFAULT_INGEST_TOPIC
    #: The address to listen on.
    host: str = "127.0.0.1"
    #: The port to listen on.
    port: int = 8000
    #: The cluster's name in Burrow's API (/v3/kafka/NAME).
    cluster_name: str = "local"
    #: Seconds between two reads of the log-end offsets.
    log_end_interval_s: float = LOG_END_INTERVAL_S
    #: /metrics' lag series: "partition", or "topic" (per group and topic: fewer series).
    granularity: str = "partition"
    #: Seconds between two evaluations of every group's Burrow status and the dashboard's index.
    evaluation_interval_s: float = 30.0
    #: A TOML file of the job's [[tenants]] (its configuration file will do): a user named like
    #: a tenant sees only the groups its rules let it DESCRIBE; unset: the configuration file's
    #: own [[tenants]].
    tenants: str | None = None
    #: TLS and users, as Prometheus exporters' web config file (tls_server_config,
    #: basic_auth_users with bcrypt hashes); unset: plain HTTP, no users.
    web_config_file: str | None = None

    def __post_init__(self) -> None:
        hide_in_logs(secret_values(self.kafka_options))
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0-65535, got {self.port}")
        if self.log_end_interval_s <= 0:
            raise ValueError(f"log_end_interval_s must be > 0, got {self.log_end_interval_s}")
        if self.evaluation_interval_s <= 0:
            raise ValueError(f"evaluation_interval_s must be > 0, got {self.evaluation_interval_s}")
        if self.granularity not in GRANULARITIES:
            raise ValueError(
                f"granularity must be one of {', '.join(GRANULARITIES)}, got {self.granularity!r}"
            )

    def kafka_python_options(self) -> dict[str, Any] | None:
        """kafka-python's options for the log-end offsets' cluster; None without
        ``bootstrap_servers`` (the sink's stored log-end offsets are read, a mirror's)."""
        if not self.bootstrap_servers:
            return None
        return kafka_python_options(self.bootstrap_servers, self.kafka_options)
