"""The job's one typed configuration: defaults < TOML file < environment < command-line flags.

Kafka client options pass through untouched (SASL/SSL included) and are rendered with the
``kafka.`` prefix Spark's Kafka source and sink want. Secrets never reach a log line: ``redacted()``
is what gets printed.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from connectors.kafka.admin import (
    DEFAULT_BOOTSTRAP_SERVERS,
    DEFAULT_DEAD_LETTER_TOPIC,
    DEFAULT_INGEST_TOPIC,
    DEFAULT_OFFSETS_TOPIC,
    DEFAULT_RESPONSES_TOPIC,
)
from connectors.kafka.kafka_python import kafka_python_options
from connectors.secrets import hide_in_logs, redacted_options, secret_values
from connectors.sinks import redact_url
from connectors.sinks.retention import (
    DEFAULT_CHECK_INTERVAL_MS,
    DEFAULT_HISTORY_RETENTION_MS,
    check_history_retention,
)
from state.coordinator.config import DEFAULT_REQUEST_TIMEOUT_MS, CoordinatorConfig
from streaming.tenants import Tenant, load_tenants, parse_tenants

ENV_PREFIX = "CONSUMER_OFFSETS_"

#: The most partitions a new ingest topic gets by default (``JobConfig.ingest_partitions``).
DEFAULT_INGEST_PARTITIONS = 2

#: The values of ``JobConfig.rebuild_sink_writes``.
REBUILD_SINK_WRITERS = ("auto", "executors", "driver")

#: The values of ``JobConfig.state_operator``.
STATE_OPERATORS = ("auto", "value-states", "group-state")

#: A settings dataclass ``load_settings`` builds (``JobConfig``, the mirror's config).
Settings = TypeVar("Settings")


def spark_kafka_options(bootstrap_servers: str, kafka_options: Mapping[str, Any]) -> dict[str, str]:
    """Kafka client options (the Java client's names) for Spark's Kafka source and sink."""
    options = {"kafka.bootstrap.servers": bootstrap_servers}
    options.update({f"kafka.{k}": str(v) for k, v in kafka_options.items()})
    return options


@dataclass(frozen=True)
class JobConfig:
    """Everything the streaming job needs. Field names double as TOML keys, env suffixes
    (``CONSUMER_OFFSETS_BOOTSTRAP_SERVERS``) and CLI flags (``--bootstrap-servers``)."""

    bootstrap_servers: str = DEFAULT_BOOTSTRAP_SERVERS
    #: Extra Kafka client options, e.g. {"security.protocol": "SASL_SSL"}; applied to the Spark
    #: source/sink (prefixed ``kafka.``), the admin client and the shard loaders.
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    ingest_topic: str = DEFAULT_INGEST_TOPIC
    offsets_topic: str = DEFAULT_OFFSETS_TOPIC
    responses_topic: str = DEFAULT_RESPONSES_TOPIC
    dead_letter_topic: str = DEFAULT_DEAD_LETTER_TOPIC
    #: offsets.topic.num.partitions: the coordinator shard count.
    partitions: int = 50
    #: Partitions of the ingest topics the job creates: a divisor of ``partitions`` (a group's
    #: requests go to ``partition_for(group, ingest_partitions)``, so each shard's requests are
    #: on one partition). Spark reads every partition in every micro-batch, a fixed cost per
    #: partition, so fewer are faster for small batches. None: the largest divisor of
    #: ``partitions`` up to ``DEFAULT_INGEST_PARTITIONS``. An existing ingest topic keeps its
    #: count, any divisor of ``partitions`` (one per shard, as before, included).
    ingest_partitions: int | None = None
    #: offsets.topic.replication.factor (Kafka's default 3); the embedded default config uses 1.
    replication_factor: int = 3
    min_insync_replicas: int = 2
    #: compression.type of the offsets topic (the producer side also compresses with it).
    compression: str = "lz4"
    #: offsets.retention.minutes, in ms.
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    #: offsets.retention.check.interval.ms: how often every shard is woken to expire offsets
    #: (an expiry tick on each ingest partition); offsets expire up to this late, as in Kafka.
    retention_check_interval_ms: int = 600_000
    #: offset.metadata.max.bytes.
    metadata_max_bytes: int = 4096
    #: The timeout of a request without its own ``timeoutMs`` (Kafka's default.api.timeout.ms):
    #: a request the job reaches at or after its message timestamp plus this is answered
    #: REQUEST_TIMED_OUT and changes nothing (README, "Request deadlines").
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    #: Micro-batch trigger interval. Spark starts a batch at the next multiple of the interval
    #: after the previous one ends, so a batch of 1.2 s with a 1 s interval waits 0.8 s idle;
    #: without input an idle job only asks Kafka for the ingest end offsets at each trigger
    #: (no-data batches are off, see ``streaming.job``).
    trigger_interval: str = "100 milliseconds"
    max_offsets_per_trigger: int | None = None
    #: Spark partitions of the shard state (tasks per micro-batch), fixed when the checkpoint is
    #: created; default: the cluster's cores, at most the state shards.
    state_partitions: int | None = None
    #: States that hold the offsets-topic partitions, each ``partitions / state_shards`` of
    #: them (``CoordinatorConfig.state_shards``): a divisor of ``partitions`` and a multiple of
    #: every ingest topic's partition count, fixed when the checkpoint is created. Default: the
    #: one nearest 5 per state partition (``streaming.state_shards.choose_state_shards``).
    state_shards: int | None = None
    #: MB of decoded shard states each Python worker keeps between micro-batches, so that a
    #: shard's next call skips decoding its blob (``streaming.shard_cache``); 0 turns it off.
    state_cache_mb: int = 256
    #: Where ingest reading starts when there is no checkpoint and the sink records no position.
    starting_offsets: str = "earliest"
    checkpoint_location: str = ".runtime/checkpoints/consumer-offsets"
    sink_url: str = "sqlite:///.runtime/consumer-offsets.db"
    #: Keep every commit in the sink's history table (``offset_commit_history``).
    keep_history: bool = False
    #: How long a commit stays in the history table (-1: forever); older ones are deleted in
    #: small steps every ``history_retention_check_interval_ms`` (``connectors.sinks.retention``).
    history_retention_ms: int = DEFAULT_HISTORY_RETENTION_MS
    history_retention_check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS
    #: Seconds a micro-batch's sink write is retried while the sink database is unreachable
    #: (the query waits, acknowledging nothing) before the query fails; 0 fails at once.
    sink_write_timeout_s: int = 60
    #: Who writes a rebuilt shard's state into the sink: "executors" (the Spark Python worker
    #: that rebuilt it, at once, while other shards still load), "driver" (after every shard of
    #: the batch has loaded: for executors that cannot reach the sink, such as a SQLite file on
    #: another machine) or "auto" (executors when Spark runs in local mode, else the driver).
    rebuild_sink_writes: str = "auto"
    #: The Spark operator that keeps the shards' state: "value-states"
    #: (``transformWithStateInPandas`` with a base, a log and a head per shard,
    #: ``streaming.value_states``: a batch writes what it changed to the checkpoint),
    #: "group-state" (``applyInPandasWithState`` with one blob per shard, the operator of
    #: checkpoints made before "value-states" existed) or "auto" (what the checkpoint holds;
    #: "value-states" for a new one). The checkpoint fixes it.
    state_operator: str = "auto"
    spark_master: str | None = None
    #: Teams sharing the job, each with its own ingest and responses topics and Kafka-shaped
    #: ACLs (``streaming.tenants``): ``[[tenants]]`` tables in the TOML file, or a TOML file of
    #: them as the flag or environment value. None: the job's ingest topic only, unchecked.
    tenants: tuple[Tenant, ...] = ()

    def __post_init__(self) -> None:
        hide_in_logs(secret_values(self.kafka_options))
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")
        if self.replication_factor < 1:
            raise ValueError(f"replication_factor must be >= 1, got {self.replication_factor}")
        if not 1 <= self.min_insync_replicas <= self.replication_factor:
            # Kafka refuses acks=all writes when min.insync.replicas exceeds the replica count.
            object.__setattr__(
                self, "min_insync_replicas", min(self.min_insync_replicas, self.replication_factor)
            )
        if self.ingest_partitions is not None and (
            self.ingest_partitions < 1 or self.partitions % self.ingest_partitions
        ):
            raise ValueError(
                f"ingest_partitions must divide partitions ({self.partitions}), "
                f"got {self.ingest_partitions}"
            )
        if self.state_shards is not None and (
            self.state_shards < 1 or self.partitions % self.state_shards
        ):
            raise ValueError(
                f"state_shards must divide partitions ({self.partitions}), got {self.state_shards}"
            )
        if self.state_partitions is not None and self.state_partitions < 1:
            raise ValueError(f"state_partitions must be >= 1, got {self.state_partitions}")
        if self.state_cache_mb < 0:
            raise ValueError(f"state_cache_mb must be >= 0, got {self.state_cache_mb}")
        if self.retention_check_interval_ms <= 0:
            raise ValueError(
                f"retention_check_interval_ms must be > 0, got {self.retention_check_interval_ms}"
            )
        if self.sink_write_timeout_s < 0:
            raise ValueError(f"sink_write_timeout_s must be >= 0, got {self.sink_write_timeout_s}")
        if self.rebuild_sink_writes not in REBUILD_SINK_WRITERS:
            raise ValueError(
                f"rebuild_sink_writes must be one of {', '.join(REBUILD_SINK_WRITERS)}, "
                f"got {self.rebuild_sink_writes!r}"
            )
        if self.state_operator not in STATE_OPERATORS:
            raise ValueError(
                f"state_operator must be one of {', '.join(STATE_OPERATORS)}, "
                f"got {self.state_operator!r}"
            )
        if self.retention_ms <= 0:
            raise ValueError(f"retention_ms must be > 0, got {self.retention_ms}")
        if self.request_timeout_ms < 0:
            raise ValueError(f"request_timeout_ms must be >= 0, got {self.request_timeout_ms}")
        check_history_retention(self.history_retention_ms, self.history_retention_check_interval_ms)
        topics = {
            self.ingest_topic,
            self.offsets_topic,
            self.responses_topic,
            self.dead_letter_topic,
        }
        if len(topics) != 4:
            raise ValueError("ingest, offsets, responses and dead-letter topics must differ")
        object.__setattr__(self, "tenants", parse_tenants(self.tenants, topics))

    @property
    def ingest_topic_partitions(self) -> int:
        """Partitions of an ingest topic the job creates (``ingest_partitions``)."""
        if self.ingest_partitions is not None:
            return self.ingest_partitions
        return max(d for d in range(1, DEFAULT_INGEST_PARTITIONS + 1) if self.partitions % d == 0)

    @property
    def coordinator(self) -> CoordinatorConfig:
        """The coordinator settings ``state/`` applies (Kafka's broker configs of that name)."""
        return CoordinatorConfig(
            offsets_topic_partitions=self.partitions,
            offsets_retention_ms=self.retention_ms,
            offset_metadata_max_bytes=self.metadata_max_bytes,
            request_timeout_ms=self.request_timeout_ms,
        )

    def spark_kafka_options(self) -> dict[str, str]:
        """Client options for Spark's Kafka source and sink, ``kafka.``-prefixed."""
        return spark_kafka_options(self.bootstrap_servers, self.kafka_options)

    def kafka_python_options(self) -> dict[str, Any]:
        """Client options for kafka-python (``security.protocol`` → ``security_protocol``)."""
        return kafka_python_options(self.bootstrap_servers, self.kafka_options)

    def redacted(self) -> dict[str, Any]:
        """The configuration as printable data, with secrets masked."""
        data = dataclasses.asdict(self)
        data["kafka_options"] = redacted_options(self.kafka_options)
        data["sink_url"] = redact_url(self.sink_url)
        data["tenants"] = [tenant.as_dict() for tenant in self.tenants]
        return data

    @property
    def ingest_topics(self) -> list[str]:
        """Every topic the job reads requests from: its own, then each tenant's."""
        return [self.ingest_topic, *(tenant.ingest_topic for tenant in self.tenants)]

    def __repr__(self) -> str:  # dataclass repr would print secrets
        return f"JobConfig({self.redacted()!r})"


def _coerce(kind: type, name: str, raw: Any) -> Any:
    """Turn a TOML/env/CLI value into the type of ``kind``'s field ``name``, naming the field
    when it cannot."""
    field_type = str({f.name: f.type for f in fields(kind)}[name])
    try:
        if "Tenant" in field_type:
            # A TOML file's [[tenants]] tables, or (flag, environment) a file holding them.
            return tuple(raw) if isinstance(raw, list | tuple) else tuple(load_tenants(str(raw)))
        if "Mapping" in field_type:
            if isinstance(raw, Mapping):
                return {str(k): str(v) for k, v in raw.items()}
            # env/CLI form: "security.protocol=SASL_SSL,sasl.mechanism=PLAIN"
            pairs = [p for p in str(raw).split(",") if p.strip()]
            return dict(p.split("=", 1) for p in pairs)
        if raw is None:
            return None
        if "bool" in field_type:
            if isinstance(raw, bool):
                return raw
            return str(raw).strip().lower() in {"1", "true", "yes", "on"}
        if "float" in field_type:
            return float(raw)
        if "int" in field_type:
            return int(raw)
        return str(raw)
    except (TypeError, ValueError) as error:
        raise ValueError(f"config field {name!r}: cannot use {raw!r} ({error})") from None


def load_settings(
    kind: type[Settings],
    env_prefix: str,
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    fallbacks: Mapping[str, str | None] | None = None,
) -> Settings:
    """Build the dataclass ``kind`` from a TOML file (``path``, else ``<env_prefix>CONFIG``),
    ``<env_prefix><FIELD>`` environment variables and explicit overrides (CLI flags), later
    sources winning; ``fallbacks`` fill fields neither the file nor the environment set.
    Unknown keys and missing required fields are errors naming them."""
    known = {f.name: f for f in fields(kind)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    env = os.environ if env is None else env
    path = path or env.get(f"{env_prefix}CONFIG")
    if path:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
        unknown = set(data) - set(known)
        if unknown:
            raise ValueError(f"unknown config keys in {path}: {sorted(unknown)}")
        values.update({k: _coerce(kind, k, v) for k, v in data.items()})
    for name in known:
        raw = env.get(env_prefix + name.upper())
        if raw is not None:
            values[name] = _coerce(kind, name, raw)
    for name, raw in (fallbacks or {}).items():
        if raw and name not in values:
            values[name] = _coerce(kind, name, raw)
    for name, raw in (overrides or {}).items():
        if name not in known:
            raise ValueError(f"unknown config key {name!r}")
        if raw is not None:
            values[name] = _coerce(kind, name, raw)
    missing = [
        name
        for name, f in known.items()
        if name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        flags = ", ".join("--" + name.replace("_", "-") for name in missing)
        raise ValueError(f"missing config: {flags} (or {env_prefix}{missing[0].upper()})")
    return kind(**values)


def load_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> JobConfig:
    """Build a JobConfig from a TOML file, ``CONSUMER_OFFSETS_*`` environment variables and
    explicit overrides (CLI flags), later sources winning. Unknown keys are an error.
    ``KAFKA_BOOTSTRAP_SERVERS`` is the bootstrap servers' fallback."""
    env = os.environ if env is None else env
    fallbacks = {"bootstrap_servers": env.get("KAFKA_BOOTSTRAP_SERVERS")}
    return load_settings(JobConfig, ENV_PREFIX, path, env, overrides, fallbacks)


def embedded_default(**overrides: Any) -> JobConfig:
    """The single-broker local configuration used by the quickstart and tests (replication 1)."""
    base: dict[str, Any] = {"replication_factor": 1, "min_insync_replicas": 1}
    base.update(overrides)
    return load_config(overrides=base)
