"""The topics the job owns (ingest, offsets, responses, dead letters) and kafka-python's
ListOffsets retried. The offsets topic is created as Kafka creates ``__consumer_offsets``;
a replication factor above the broker count is refused, as Kafka 0.11+ refuses it."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, KafkaTimeoutError, TopicAlreadyExistsError
from kafka.protocol.metadata import MetadataRequest

from connectors.closing import CloseOnExit

log = logging.getLogger(__name__)

#: The topics of one deployment, by default (``JobConfig`` fields of the same names).
DEFAULT_BOOTSTRAP_SERVERS = "127.0.0.1:9092"
DEFAULT_INGEST_TOPIC = "consumer-offsets.commits"
DEFAULT_OFFSETS_TOPIC = "consumer-offsets.offsets"
DEFAULT_RESPONSES_TOPIC = "consumer-offsets.responses"
DEFAULT_DEAD_LETTER_TOPIC = "consumer-offsets.dead-letters"
#: Seconds between two reads of the committed topics' log ends (the mirror's and serve's):
#: Burrow and kafka_exporter poll every 30-60 s; 10 s keeps a dashboard's lag fresh.
LOG_END_INTERVAL_S = 10.0


class TopicConfigurationError(RuntimeError):
    """An existing topic, or the cluster, cannot serve the requested layout."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic the job needs: name, partitions, replication factor and topic configs."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    #: Partition counts an existing topic may have besides ``partitions`` (ingest topics: any
    #: divisor of the shard count, see ``ingest_topic_spec``).
    also_accepted: tuple[int, ...] = ()


def ingest_partition_counts(shards: int) -> tuple[int, ...]:
    """The divisors of ``shards``: for them ``partition_for(group, count)`` is
    ``partition_for(group, shards) % count``, so each shard's requests share one partition."""
    return tuple(d for d in range(1, shards + 1) if shards % d == 0)


def check_partition_counts(specs: Sequence[TopicSpec], counts: dict[str, int]) -> None:
    """TopicConfigurationError, saying what to do, for an existing topic whose partition count
    its spec refuses (topics absent from ``counts`` pass); fixed-count topics are named first."""
    moved = "start a new deployment (other topic names and checkpoint) and move the groups' "
    moved += (
        'offsets to it with export and import --execute (deploy/README.md, "Changing partitions")'
    )
    for spec in sorted(specs, key=lambda s: bool(s.also_accepted)):
        count = counts.get(spec.name)
        if count is None or count == spec.partitions or count in spec.also_accepted:
            continue
        if spec.also_accepted:
            raise TopicConfigurationError(
                f"ingest topic {spec.name!r} has {count} partitions: an ingest topic needs "
                f"a number of partitions that divides the {max(spec.also_accepted)} "
                f"coordinator shards ({', '.join(map(str, spec.also_accepted))}); set "
                f"partitions to a multiple of {count}, or {moved}"
            )
        # The offsets topic (the compacted one) was created with the deployment's shard count.
        keep = f"set partitions = {count} (--partitions {count}) to keep this deployment, or "
        raise TopicConfigurationError(
            f"topic {spec.name!r} has {count} partitions, expected {spec.partitions}: the "
            "partition count is the coordinator shard count (partitions, Kafka's "
            "offsets.topic.num.partitions), fixed when the topic was created; "
            + (keep if spec.configs.get("cleanup.policy") == "compact" else "")
            + moved
        )


def offsets_topic_spec(
    name: str, partitions: int, replication_factor: int, min_insync_replicas: int, compression: str
) -> TopicSpec:
    """The compacted offsets topic, configured as Kafka configures ``__consumer_offsets``."""
    return TopicSpec(
        name,
        partitions,
        replication_factor,
        {
            "cleanup.policy": "compact",
            "min.insync.replicas": str(min_insync_replicas),
            "compression.type": compression,
            # Kafka's offsets.topic.segment.bytes default: small segments compact sooner.
            "segment.bytes": str(100 * 1024 * 1024),
            "unclean.leader.election.enable": "false",
        },
    )


def ingest_topic_spec(
    name: str,
    partitions: int,
    replication_factor: int,
    min_insync_replicas: int,
    shards: int | None = None,
) -> TopicSpec:
    """An ingest topic of ``partitions`` partitions (a divisor of the ``shards`` coordinator
    shards; an existing topic may have any divisor), broker append time as the commit
    timestamp (so a replayed micro-batch sees the same timestamps)."""
    return TopicSpec(
        name,
        partitions,
        replication_factor,
        {
            "message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": str(min_insync_replicas),
            "unclean.leader.election.enable": "false",
        },
        ingest_partition_counts(shards or partitions),
    )


def plain_topic_spec(name: str, partitions: int, replication_factor: int) -> TopicSpec:
    """A topic with the broker's default configs."""
    return TopicSpec(name, partitions, replication_factor, {})


#: Answers are read within a request timeout; an hour also serves a client that reconnects.
#: Segments roll as often: retention deletes whole segments only.
RESPONSES_RETENTION_MS = 60 * 60 * 1000
#: A week (Kafka's log.retention.hours default), whatever the broker's default.
DEAD_LETTERS_RETENTION_MS = 7 * 24 * 60 * 60 * 1000


def responses_topic_spec(name: str, partitions: int, replication_factor: int) -> TopicSpec:
    """The responses topic: answers are read within seconds, kept an hour."""
    retention = str(RESPONSES_RETENTION_MS)
    return TopicSpec(
        name, partitions, replication_factor, {"retention.ms": retention, "segment.ms": retention}
    )


def dead_letter_topic_spec(name: str, partitions: int, replication_factor: int) -> TopicSpec:
    """The dead-letter topic: malformed input for people to look at, kept a week."""
    return TopicSpec(
        name, partitions, replication_factor, {"retention.ms": str(DEAD_LETTERS_RETENTION_MS)}
    )


class KafkaAdmin(CloseOnExit):
    """kafka-python's admin client, for the job's topic housekeeping."""

    def __init__(self, client_options: Mapping[str, Any]) -> None:
        self._admin = KafkaAdminClient(client_id="consumer-offsets-admin", **client_options)

    def close(self) -> None:
        self._admin.close()

    def broker_count(self) -> int:
        """How many brokers the cluster has now (DescribeCluster)."""
        return len(self._admin.describe_cluster()["brokers"])

    def topic_error(self, name: str) -> int:
        """Metadata's error code for topic ``name`` as this principal: 0, 29
        (TOPIC_AUTHORIZATION_FAILED) or 3 (UNKNOWN_TOPIC_OR_PARTITION)."""
        # Metadata v7, without authorized operations: kafka-python 2.3 cannot decode the
        # operations bit field Kafka returns for a topic the principal may not describe.
        response = self._admin.send_request(
            MetadataRequest[7](topics=[name], allow_auto_topic_creation=False)
        )
        (topic,) = response.topics
        return int(topic[0])

    def cluster_id(self) -> str:
        """The cluster's id (DescribeCluster), whatever its bootstrap addresses."""
        return str(self._admin.describe_cluster()["cluster_id"])

    def partition_counts(self, names: list[str]) -> dict[str, int]:
        """Partition count of each existing topic among ``names``."""
        existing = set(self._admin.list_topics())
        wanted = [n for n in names if n in existing]
        if not wanted:
            return {}
        described = self._admin.describe_topics(wanted)
        return {t["topic"]: len(t["partitions"]) for t in described if not t.get("error_code")}

    def ensure_topics(self, specs: list[TopicSpec]) -> list[str]:
        """Create the missing topics and return their names; TopicConfigurationError when the
        cluster has fewer brokers than a replication factor or a partition count is refused."""
        counts = self.partition_counts([s.name for s in specs])
        check_partition_counts(specs, counts)
        missing = [s for s in specs if s.name not in counts]
        if not missing:
            return []
        brokers = self.broker_count()
        for spec in missing:
            if spec.replication_factor > brokers:
                raise TopicConfigurationError(
                    f"cannot create topic {spec.name!r}: replication factor "
                    f"{spec.replication_factor} larger than available brokers: {brokers} "
                    "(set replication_factor, or start more brokers)"
                )
        new_topics = [
            NewTopic(s.name, s.partitions, s.replication_factor, topic_configs=dict(s.configs))
            for s in missing
        ]
        # Created meanwhile by another client: checked like any existing one below.
        with contextlib.suppress(TopicAlreadyExistsError):
            self._admin.create_topics(new_topics, validate_only=False)
        self._wait_for_metadata([s.name for s in missing])
        check_partition_counts(missing, self.partition_counts([s.name for s in missing]))
        for spec in missing:
            log.info(
                "created topic %s (%d partitions, rf %d)",
                spec.name,
                spec.partitions,
                spec.replication_factor,
            )
        return [s.name for s in missing]

    def _wait_for_metadata(self, names: list[str], timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            described = self._admin.describe_topics(names)
            ready = all(
                not t.get("error_code")
                and t["partitions"]
                and all(p["leader"] >= 0 for p in t["partitions"])
                for t in described
            )
            if ready:
                return
            time.sleep(0.2)
        raise TopicConfigurationError(f"topics {names} have no leaders after {timeout_s:.0f}s")


def list_offsets(
    call: Callable[[list[TopicPartition]], dict[TopicPartition, Any]],
    partitions: Sequence[TopicPartition],
    timeout_s: float = 30.0,
) -> dict[TopicPartition, Any]:
    """``call(partitions)`` (a consumer's ListOffsets), retried until ``timeout_s`` while the
    cluster is not ready. kafka-python 2.3.0 raises ``AttributeError`` when some partitions
    must be retried (a new topic without leaders everywhere yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call(list(partitions))
        except (AttributeError, KafkaError) as exc:
            transient = not isinstance(exc, KafkaError) or isinstance(exc, KafkaTimeoutError)
            if not (transient or exc.retriable) or time.monotonic() >= deadline:
                raise
            log.debug("listing offsets failed, retrying: %r", exc)
            time.sleep(0.2)


def consumer_end_offsets(
    consumer: KafkaConsumer, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """``consumer.end_offsets`` that survives kafka-python's transient ListOffsets failures."""
    return list_offsets(consumer.end_offsets, partitions)
