"""Every long-running command's typed settings: defaults < TOML file < environment < flags.

``JobConfig`` (``run``) is the file's top level, ``MirrorConfig`` its ``[mirror]`` table (or
the whole of a file of the mirror's own), serve's settings (``streaming.cli.serve``) its
``[serve]`` table; ``deploy/config.example.toml`` lists them all. Each field's ``#:`` comment
is its meaning, which ``--help`` shows. Kafka client options pass through untouched (SASL/SSL
included). Secrets never reach a log line: ``redacted()`` is what gets printed.
"""

from __future__ import annotations

import dataclasses
import logging
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
    LOG_END_INTERVAL_S,
)
from connectors.kafka.client_options import kafka_python_options
from connectors.secrets import hide_in_logs, redacted_options, secret_values
from connectors.sinks import redact_url
from connectors.sinks.retention import (
    DEFAULT_CHECK_INTERVAL_MS,
    DEFAULT_HISTORY_RETENTION_MS,
    check_history_retention,
)
from state.coordinator.config import DEFAULT_REQUEST_TIMEOUT_MS, CoordinatorConfig
from streaming import setting_checks as check
from streaming.tenants import Tenant, load_tenants, parse_tenants

log = logging.getLogger(__name__)

ENV_PREFIX = "CONSUMER_OFFSETS_"
#: Environment variables of the mirror's settings: ``CONSUMER_OFFSETS_MIRROR_SINK_URL``…
MIRROR_ENV_PREFIX = "CONSUMER_OFFSETS_MIRROR_"
#: Suffix of an environment variable naming a file that holds the setting's value:
#: ``CONSUMER_OFFSETS_SINK_URL_FILE`` (:func:`environment_value`).
FILE_ENV_SUFFIX = "_FILE"
#: Tables of a configuration file that hold another command's settings than the job's.
COMMAND_TABLES = ("mirror", "serve")

#: The most partitions a new ingest topic gets by default (``JobConfig.ingest_partitions``).
DEFAULT_INGEST_PARTITIONS = 2

#: The job's sink unless configured (``JobConfig.sink_url``).
DEFAULT_SINK_URL = "sqlite:///.runtime/consumer-offsets.db"

#: The values of ``JobConfig.rebuild_sink_writes``.
REBUILD_SINK_WRITERS = ("auto", "executors", "driver")

#: Keys a configuration file may still hold from an earlier release, which are ignored with a
#: warning that says why.
REMOVED_KEYS = {
    "state_operator": "the job keeps its state in value states, and migrates a checkpoint of "
    "the group-state operator when it starts (streaming.spark.start_plan)",
}

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

    #: The Kafka cluster the job's topics live on (host:port, comma-separated).
    bootstrap_servers: str = DEFAULT_BOOTSTRAP_SERVERS
    #: Extra Kafka client options, in the Java client's names, e.g. {"security.protocol" =
    #: "SASL_SSL"}; applied to the Spark source/sink (prefixed ``kafka.``), the admin client
    #: and the shard loaders.
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    #: The topic committers write their requests to (the commit client's).
    ingest_topic: str = DEFAULT_INGEST_TOPIC
    #: The compacted topic of committed offsets: the job's __consumer_offsets.
    offsets_topic: str = DEFAULT_OFFSETS_TOPIC
    #: The topic the job answers requests on.
    responses_topic: str = DEFAULT_RESPONSES_TOPIC
    #: Where requests the job cannot read go, for people to look at.
    dead_letter_topic: str = DEFAULT_DEAD_LETTER_TOPIC
    #: offsets.topic.num.partitions: the coordinator shard count, fixed when the offsets topic
    #: is created (deploy/README.md says how to change it).
    partitions: int = 50
    #: Partitions of the ingest topics the job creates, a divisor of ``partitions``; unset: the
    #: largest divisor of ``partitions`` up to ``DEFAULT_INGEST_PARTITIONS`` (2). Each shard's
    #: requests are on one partition; an existing ingest topic keeps its count.
    ingest_partitions: int | None = None
    #: offsets.topic.replication.factor of the topics the job creates (``--embedded``: 1).
    replication_factor: int = 3
    #: min.insync.replicas of the topics the job creates (at most ``replication_factor``).
    min_insync_replicas: int = 2
    #: compression.type of the offsets topic (the producer side also compresses with it).
    compression: str = "lz4"
    #: offsets.retention.minutes, in ms: how long an empty group's offsets are kept.
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    #: offsets.retention.check.interval.ms: how often every shard is woken to expire offsets
    #: (an expiry tick on each ingest partition); offsets expire up to this late, as in Kafka.
    retention_check_interval_ms: int = 600_000
    #: offset.metadata.max.bytes: the longest commit metadata accepted (longer:
    #: OFFSET_METADATA_TOO_LARGE).
    metadata_max_bytes: int = 4096
    #: The timeout of a request without its own ``timeoutMs`` (Kafka's default.api.timeout.ms):
    #: a request the job reaches at or after its message timestamp plus this is answered
    #: REQUEST_TIMED_OUT and changes nothing (deploy/README.md, "Request deadlines").
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    #: Micro-batch trigger interval. Spark starts a batch at the next multiple of the interval
    #: after the previous one ends; an idle job only asks Kafka for the ingest end offsets.
    trigger_interval: str = "100 milliseconds"
    #: Ingest records (requests) a micro-batch reads at most (Spark's maxOffsetsPerTrigger):
    #: a catch-up after an outage reaches the sink in bounded transactions (2,000 requests of
    #: 100 partitions: a 2-4 s SQLite write), while steady load never fills it. 0: no cap.
    max_offsets_per_trigger: int | None = 2_000
    #: Spark partitions of the shard state (tasks per micro-batch), fixed when the checkpoint is
    #: created; unset: the cluster's cores, at most the state shards.
    state_partitions: int | None = None
    #: States that hold the offsets-topic partitions, each ``partitions / state_shards`` of
    #: them; unset: one per state partition
    #: (``streaming.spark.state_shards.choose_state_shards``). A divisor of ``partitions`` and a
    #: multiple of every ingest topic's partition count, fixed when the checkpoint is created
    #: (``CoordinatorConfig.state_shards``).
    state_shards: int | None = None
    #: MB of decoded shard states each Python worker keeps between micro-batches, so that a
    #: shard's next call skips decoding its blob, or one state alone when it is larger
    #: (``streaming.spark.shard_cache``); 0 turns it off.
    state_cache_mb: int = 256
    #: Where ingest reading starts when there is no checkpoint and the sink records no position.
    starting_offsets: str = "earliest"
    #: Spark's checkpoint of the query (a path or a URL such as s3a://, hdfs://).
    checkpoint_location: str = ".runtime/checkpoints/consumer-offsets"
    #: The queryable sink: sqlite:///relative.db, sqlite:////absolute.db or
    #: postgresql://user:password@host/database.
    sink_url: str = DEFAULT_SINK_URL
    #: Keep the commits in the sink's history table (``offset_commit_history``), thinned as
    #: they age (``state.commit_history``): offsets as of a past time, resets back to them.
    keep_history: bool = True
    #: How long a commit stays in the history table (-1: forever); older ones are deleted and
    #: younger ones thinned in small steps every ``history_retention_check_interval_ms``
    #: (``connectors.sinks.retention``).
    history_retention_ms: int = DEFAULT_HISTORY_RETENTION_MS
    #: How often, in ms, history older than ``history_retention_ms`` is deleted.
    history_retention_check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS
    #: Seconds a micro-batch's sink write is retried while the sink database is unreachable
    #: (the query waits, acknowledging nothing) before the query fails; 0 fails at once.
    sink_write_timeout_s: int = 60
    #: Who writes a rebuilt shard's state into the sink: "executors" (the Spark Python worker
    #: that rebuilt it, at once, while other shards still load), "driver" (after every shard of
    #: the batch has loaded: for executors that cannot reach the sink, such as a SQLite file on
    #: another machine) or "auto" (executors when Spark runs in local mode, else the driver).
    rebuild_sink_writes: str = "auto"
    #: Milliseconds the deployment lease lasts without renewal: a dead active is replaced at
    #: once, a paused or partitioned one once this passes (it stops itself 2 s before; a sink
    #: that refuses its renewals at once does not stop it). The holder renews every fifth of
    #: it (``streaming.spark.lease_keeper``).
    lease_ttl_ms: int = 10_000
    #: Spark's master URL, e.g. local[4] or spark://host:7077; unset: $SPARK_MASTER, else
    #: local[*].
    spark_master: str | None = None
    #: Teams sharing the job, each with its own ingest and responses topics and Kafka-shaped
    #: ACLs (``streaming.tenants``); unset: the job's ingest topic only, unchecked.
    #: ``[[tenants]]`` tables in the TOML file, or a TOML file of them as the flag or
    #: environment value.
    tenants: tuple[Tenant, ...] = ()

    def __post_init__(self) -> None:
        hide_in_logs(secret_values(self.kafka_options))
        _check_at_least(
            self,
            partitions=1,
            replication_factor=1,
            state_partitions=1,
            state_cache_mb=0,
            retention_check_interval_ms=1,
            sink_write_timeout_s=0,
            retention_ms=1,
            request_timeout_ms=0,
            lease_ttl_ms=1_000,
            max_offsets_per_trigger=0,
            metadata_max_bytes=0,
            min_insync_replicas=1,
        )
        _check_strings(self)
        if not 1 <= self.min_insync_replicas <= self.replication_factor:
            # Kafka refuses acks=all writes when min.insync.replicas exceeds the replica count.
            object.__setattr__(
                self, "min_insync_replicas", min(self.min_insync_replicas, self.replication_factor)
            )
        for name in ("ingest_partitions", "state_shards"):
            value = getattr(self, name)
            if value is not None and (value < 1 or self.partitions % value):
                raise ValueError(f"{name} must divide partitions ({self.partitions}), got {value}")
        if self.rebuild_sink_writes not in REBUILD_SINK_WRITERS:
            raise ValueError(
                f"rebuild_sink_writes must be one of {', '.join(REBUILD_SINK_WRITERS)}, "
                f"got {self.rebuild_sink_writes!r}"
            )
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


def _check_strings(settings: JobConfig | MirrorConfig) -> None:
    """Every string setting read as Spark or Kafka will read it, so that a bad one is refused
    naming its field before the lease is taken (``streaming.setting_checks``)."""
    check.interval_ms("trigger_interval", settings.trigger_interval)
    check.check_not_empty("sink_url", settings.sink_url)
    check.check_not_empty("checkpoint_location", settings.checkpoint_location)
    if isinstance(settings, MirrorConfig):
        check.check_bootstrap_servers("source_bootstrap_servers", settings.source_bootstrap_servers)
        check.check_not_empty("cluster_name", settings.cluster_name)
        return
    check.check_bootstrap_servers("bootstrap_servers", settings.bootstrap_servers)
    for name in ("ingest_topic", "offsets_topic", "responses_topic", "dead_letter_topic"):
        check.check_topic(name, getattr(settings, name))
    check.check_compression("compression", settings.compression)
    check.check_starting_offsets("starting_offsets", settings.starting_offsets)
    if settings.spark_master is not None:
        check.check_spark_master("spark_master", settings.spark_master)


def _check_at_least(settings: object, **lowest: int) -> None:
    """ValueError naming the first set field of ``settings`` below its ``lowest`` value."""
    for name, low in lowest.items():
        value = getattr(settings, name)
        if value is not None and value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")


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


def read_config_file(path: str | Path, table: str | None = None) -> dict[str, Any]:
    """One command's settings in the TOML file at ``path``: the job's top level (``table``
    None) or the ``[table]`` table; a file without ``[mirror]`` is the mirror's whole."""
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    if table is None or (table == "mirror" and table not in data):
        return {k: v for k, v in data.items() if k not in COMMAND_TABLES}
    section = data.get(table, {})
    if not isinstance(section, dict):
        raise ValueError(f"{path}: {table} must be a [{table}] table")
    return section


def environment_value(env: Mapping[str, str], variable: str) -> str | None:
    """``variable``'s value in ``env``, else the content of the file that ``<variable>_FILE``
    names (a Kubernetes Secret or a systemd credential mounted as a file keeps a password out
    of the process environment), one trailing newline dropped; ``None`` when neither is set.
    ``ValueError`` when both are set, or naming the file when it cannot be read."""
    file_variable = variable + FILE_ENV_SUFFIX
    path = env.get(file_variable)
    if path is None:
        return env.get(variable)
    if variable in env:
        raise ValueError(f"{variable} and {file_variable} are both set: keep one")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ValueError(f"{file_variable}: cannot read {path} ({reason})") from None
    return text.removesuffix("\n").removesuffix("\r")


def load_settings(
    kind: type[Settings],
    env_prefix: str,
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    fallbacks: Mapping[str, Any] | None = None,
    table: str | None = None,
) -> Settings:
    """Build the dataclass ``kind`` from a TOML file (``path``, else ``<env_prefix>CONFIG``),
    ``<env_prefix><FIELD>`` environment variables (or ``<env_prefix><FIELD>_FILE``, a file
    holding the value: :func:`environment_value`) and overrides (CLI flags), later sources
    winning; ``fallbacks`` fill what neither file nor environment set. ``ValueError`` names
    unknown keys and missing required fields."""
    known = {f.name: f for f in fields(kind)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    env = os.environ if env is None else env
    path = path or env.get(f"{env_prefix}CONFIG")
    if path:
        data = read_config_file(path, table)
        for key in set(data) & set(REMOVED_KEYS) - set(known):
            log.warning("%s: %s is no longer a setting, ignored: %s", path, key, REMOVED_KEYS[key])
            del data[key]
        unknown = set(data) - set(known)
        if unknown:
            where = f"[{table}] of {path}" if table and table != "mirror" else str(path)
            raise ValueError(f"unknown config keys in {where}: {sorted(unknown)}")
        values.update({k: _coerce(kind, k, v) for k, v in data.items()})
    for name in known:
        raw = environment_value(env, env_prefix + name.upper())
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
    """A JobConfig (:func:`load_settings`, ``CONSUMER_OFFSETS_*``); ``KAFKA_BOOTSTRAP_SERVERS``
    is the bootstrap servers' fallback."""
    env = os.environ if env is None else env
    fallbacks = {"bootstrap_servers": env.get("KAFKA_BOOTSTRAP_SERVERS")}
    return load_settings(JobConfig, ENV_PREFIX, path, env, overrides, fallbacks)


def embedded_default(**overrides: Any) -> JobConfig:
    """The single-broker local configuration used by the quickstart and tests (replication 1)."""
    base: dict[str, Any] = {"replication_factor": 1, "min_insync_replicas": 1}
    base.update(overrides)
    return load_config(overrides=base)


@dataclass(frozen=True)
class MirrorConfig:
    """Where the mirror reads (a cluster, with Kafka client options in the Java client's names)
    and writes (a sink URL and a checkpoint)."""

    #: The source cluster whose __consumer_offsets is mirrored (host:port, comma-separated).
    source_bootstrap_servers: str
    #: The sink the mirror writes, as the job's ``sink_url``.
    sink_url: str
    #: Spark's checkpoint of the mirror's query.
    checkpoint_location: str
    #: Kafka client options for the source cluster, in the Java client's names.
    source_kafka_options: Mapping[str, str] = field(default_factory=dict)
    #: Keep every commit in the sink's history table (``--no-history``: false).
    keep_history: bool = True
    #: How long a commit stays in the history table (-1: forever); see ``JobConfig``.
    history_retention_ms: int = DEFAULT_HISTORY_RETENTION_MS
    #: How often, in ms, history older than ``history_retention_ms`` is deleted.
    history_retention_check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS
    #: Micro-batch trigger interval.
    trigger_interval: str = "1 second"
    #: The source cluster's name in the sink (``source_cluster``) and its status detail.
    cluster_name: str = "source"
    #: Seconds between two reads of the committed topics' log-end offsets into the sink.
    log_end_interval_s: float = LOG_END_INTERVAL_S
    #: Seconds a micro-batch's sink write is retried while the sink is unreachable (the query
    #: waits) before the mirror fails, as the job's ``sink_write_timeout_s``; 0 fails at once.
    sink_write_timeout_s: float = 60.0
    #: Milliseconds the mirror's deployment lease lasts without renewal, as the job's
    #: ``lease_ttl_ms``.
    lease_ttl_ms: int = 10_000

    def __post_init__(self) -> None:
        hide_in_logs(secret_values(self.source_kafka_options))
        _check_at_least(self, sink_write_timeout_s=0, lease_ttl_ms=1_000)
        if not self.log_end_interval_s > 0:
            raise ValueError(f"log_end_interval_s must be > 0, got {self.log_end_interval_s}")
        _check_strings(self)
        check_history_retention(self.history_retention_ms, self.history_retention_check_interval_ms)

    def redacted(self) -> dict[str, Any]:
        """The configuration as printable data, with secrets masked."""
        data = dataclasses.asdict(self)
        data["source_kafka_options"] = redacted_options(self.source_kafka_options)
        data["sink_url"] = redact_url(self.sink_url)
        return data

    def __repr__(self) -> str:  # the dataclass repr would print secrets
        return f"MirrorConfig({self.redacted()!r})"

    def kafka_python_options(self) -> dict[str, Any]:
        """Options for kafka-python clients of the source cluster."""
        return kafka_python_options(self.source_bootstrap_servers, self.source_kafka_options)

    def spark_kafka_options(self) -> dict[str, str]:
        """Options for Spark's Kafka source (``kafka.``-prefixed client options)."""
        return spark_kafka_options(self.source_bootstrap_servers, self.source_kafka_options)


def load_mirror_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> MirrorConfig:
    """The mirror's configuration (:func:`load_settings`, ``CONSUMER_OFFSETS_MIRROR_*``)."""
    return load_settings(MirrorConfig, MIRROR_ENV_PREFIX, path, env, overrides, table="mirror")
