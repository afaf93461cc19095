"""Tenants against a broker with Kafka's ``StandardAuthorizer``, SASL_SSL with SCRAM users and
ACLs created through Kafka's Admin API; the job itself runs as the super user.

The broker keeps each tenant on its own topics; the job answers a tenant's requests as Kafka's
own coordinator answers the same principal under the same ACLs (the differential cases run
against both), writes nothing its rules refuse, and sends each tenant's answers to its own
responses topic. The commit client and the CLI speak as a tenant and print Kafka's error names.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourceType,
)
from kafka.errors import TopicAuthorizationFailedError

from connectors.client import CommitFailedError, OffsetCommitClient, OffsetsReader
from connectors.client.sink_currency import wait_until_applied
from state.coordinator.acls import AclBinding
from state.coordinator.model import OffsetCommitKey
from state.coordinator.partitioner import partition_for
from state.coordinator.requests import (
    OffsetCommitRequest,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from state.formats.request_codec import encode_request
from streaming.config import JobConfig
from streaming.spark.job import OffsetsJob
from streaming.spark.mirror import (
    SOURCE_GROUP_ID_PREFIX,
    MirrorConfig,
    OffsetsMirror,
    SourceAccessError,
)
from streaming.tenants import Tenant
from tests.conformance.job_coordinator import JobCoordinator
from tests.conformance.kafka_coordinator import KafkaCoordinator
from tests.conformance.operations import (
    Answer,
    Commit,
    CommitPartition,
    DeleteGroup,
    DeleteOffsets,
    Sequence,
)
from tests.fixtures.admin_commits import admin_commit
from tests.fixtures.job import new_job_config, prepare_topics, write_config_file
from tests.fixtures.kafka_secured import AuthorizingKafka, running_authorizing_kafka
from tests.streaming.helpers import (
    compacted,
    produce_in_transaction,
    read_offsets_topic,
    read_responses,
    sink_offsets,
    wait_for,
)

pytestmark = pytest.mark.slow

A, B = "team-a", "team-b"
#: The mirror's user: no ACL at first, then the ones the README documents.
MIRROR = "offsets-mirror"
#: Topics the commits name: Kafka's coordinator answers UNKNOWN_TOPIC_OR_PARTITION for others.
ORDERS, SECRET = "orders", "secret"


def _rules(*rows: tuple[str, str, str, str, str]) -> tuple[AclBinding, ...]:
    keys = ("resource_type", "pattern_type", "resource_name", "operation", "permission_type")
    return tuple(AclBinding.parse(dict(zip(keys, row, strict=True))) for row in rows)


#: Team A: its prefix's groups, one literal group, deletes only of its cleanup group, the
#: orders topic but not the secret one, a DENY that beats its prefix's ALLOW, and its prefix's
#: transactional ids (TxnOffsetCommit).
TEAM_A_RULES = _rules(
    ("TRANSACTIONAL_ID", "PREFIXED", "team-a.", "WRITE", "ALLOW"),
    ("GROUP", "PREFIXED", "team-a.", "READ", "ALLOW"),
    ("GROUP", "LITERAL", "shared", "READ", "ALLOW"),
    ("GROUP", "LITERAL", "team-a.cleanup", "DELETE", "ALLOW"),
    ("GROUP", "LITERAL", "team-a.billing", "READ", "DENY"),
    ("TOPIC", "PREFIXED", "ord", "READ", "ALLOW"),
)
TEAM_B_RULES = _rules(
    ("GROUP", "PREFIXED", "team-b.", "ALL", "ALLOW"), ("TOPIC", "LITERAL", "*", "READ", "ALLOW")
)


def _kafka_acl(principal: str, binding: AclBinding) -> ACL:
    """The tenant rule as a Kafka ACL of ``principal``, any host."""
    return ACL(
        principal=f"User:{principal}",
        host="*",
        operation=ACLOperation[binding.operation.value],
        permission_type=ACLPermissionType[binding.permission_type.value],
        resource_pattern=ResourcePattern(
            ResourceType[binding.resource_type.value],
            binding.resource_name,
            ACLResourcePatternType[binding.pattern_type.value],
        ),
    )


def _topic_acl(principal: str, topic: str, operation: str) -> ACL:
    return ACL(
        f"User:{principal}",
        "*",
        ACLOperation[operation],
        ACLPermissionType.ALLOW,
        ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL),
    )


@dataclass
class TenantJob:
    config: JobConfig
    kafka: AuthorizingKafka

    def tenant(self, name: str) -> Tenant:
        (tenant,) = [t for t in self.config.tenants if t.name == name]
        return tenant

    def tenant_config(self, name: str) -> JobConfig:
        """The configuration a tenant holds: the job's, with its own login on SASL_SSL."""
        return replace(
            self.config,
            bootstrap_servers=self.kafka.sasl_ssl,
            kafka_options=self.kafka.kafka_options(name),
        )


@pytest.fixture(scope="module")
def authorizing_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthorizingKafka]:
    with running_authorizing_kafka(tmp_path_factory.mktemp("kafka-acls"), [A, B, MIRROR]) as k:
        admin = KafkaAdminClient(bootstrap_servers=k.plaintext)
        try:
            admin.create_topics([NewTopic(ORDERS, 2, 1), NewTopic(SECRET, 2, 1)])
        finally:
            admin.close()
        yield k


@pytest.fixture(scope="module")
def tenant_job(
    spark: Any, authorizing_kafka: AuthorizingKafka, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TenantJob]:
    folder = tmp_path_factory.mktemp("tenants")
    kafka = authorizing_kafka
    name = uuid.uuid4().hex[:8]
    tenants = tuple(
        Tenant(t, f"{t}.{name}.commits", f"{t}.{name}.responses", rules)
        for t, rules in ((A, TEAM_A_RULES), (B, TEAM_B_RULES))
    )
    config = new_job_config(kafka.plaintext, folder, tenants=tenants)
    admin = KafkaAdminClient(bootstrap_servers=kafka.plaintext)
    try:
        acls = []
        for tenant in tenants:
            # What Kafka must let the tenant do for the job to hear it: write its ingest
            # topic, read its responses; and its rules, for Kafka's own coordinator.
            acls += [
                _topic_acl(tenant.name, tenant.ingest_topic, "WRITE"),
                _topic_acl(tenant.name, tenant.responses_topic, "READ"),
                *(_kafka_acl(tenant.name, b) for b in tenant.acls),
            ]
        result = admin.create_acls(acls)
        assert not result["failed"], result["failed"]
    finally:
        admin.close()
    prepare_topics(config)
    job = OffsetsJob.create(config, spark)
    try:
        job.start()
        running = TenantJob(config, kafka)
        # Warm up through the operators' topic: the job answers once the query runs.
        with OffsetCommitClient(config, client_id="tenants-warm-up") as client:
            deadline = time.monotonic() + 180
            while True:
                try:
                    client.commit("warm-up", {(ORDERS, 0): 1}, timeout_s=10)
                    break
                except CommitFailedError:
                    if time.monotonic() > deadline:
                        raise
        yield running
    finally:
        job.stop()
        job.sink.close()


#: kafka-python's version probe, the first round trip of a SASL_SSL client, gives up after 2 s by
#: default (NoBrokersAvailable), which a loaded CI host can exceed.
PATIENT = {"api_version_auto_timeout_ms": 20_000}


def test_the_broker_keeps_a_tenant_off_another_tenants_topic(tenant_job: TenantJob) -> None:
    options = tenant_job.kafka.kafka_python_options(A)
    producer = KafkaProducer(**options, acks="all", max_block_ms=20_000, **PATIENT)
    try:
        own = tenant_job.tenant(A).ingest_topic
        producer.send(own, b"x", partition=0).get(timeout=30)  # its own: accepted
        other = tenant_job.tenant(B).ingest_topic
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(other, b"x", partition=0).get(timeout=30)
    finally:
        producer.close(timeout=5)


def _sequences(suffix: str) -> list[Sequence]:
    def commit(*parts: tuple[str, int, int]) -> Commit:
        return Commit(tuple(CommitPartition(t, p, o) for t, p, o in parts))

    return [
        Sequence(f"team-a.reader-{suffix}", (commit((ORDERS, 0, 5), (ORDERS, 1, 6)),), "allowed"),
        Sequence(f"team-b.reader-{suffix}", (commit((ORDERS, 0, 5)),), "another tenant's group"),
        Sequence(
            f"team-a.mixed-{suffix}",
            (commit((ORDERS, 0, 7), (SECRET, 0, 8), (SECRET, 1, 9)),),
            "a topic it may not read: 29 for its partitions only",
        ),
        Sequence(f"team-a.billing{suffix}", (commit((ORDERS, 0, 1)),), "PREFIXED ALLOW"),
        Sequence("team-a.billing", (commit((ORDERS, 0, 1)),), "LITERAL DENY beats ALLOW"),
        Sequence("shared", (commit((ORDERS, 1, 3)),), "LITERAL: the name"),
        Sequence(f"shared-{suffix}", (commit((ORDERS, 1, 3)),), "LITERAL: not a prefix"),
        Sequence(
            f"team-a.reader-{suffix}",
            (DeleteOffsets(((ORDERS, 0),)), DeleteGroup()),
            "no DELETE on the group",
        ),
        Sequence(
            "team-a.cleanup",
            (commit((ORDERS, 0, 2), (ORDERS, 1, 2)), DeleteOffsets(((ORDERS, 0), (SECRET, 0)))),
            "DELETE on the group, READ on one topic only",
        ),
    ]


def _run_on_kafka(kafka: AuthorizingKafka, sequences: list[Sequence]) -> list[list[Answer]]:
    options = kafka.kafka_python_options(A)
    coordinator = KafkaCoordinator(str(options.pop("bootstrap_servers")), **options)
    try:
        return [[coordinator.apply(s.group_id, op) for op in s.operations] for s in sequences]
    finally:
        coordinator.close()


def _run_on_job(job: TenantJob, sequences: list[Sequence]) -> list[list[Answer]]:
    coordinator = JobCoordinator(
        job.config, tenant=A, client_options=job.kafka.kafka_python_options(A)
    )
    try:
        # One sequence at a time: a group's requests in order, as on Kafka's side.
        return [coordinator.run([s])[0] for s in sequences]
    finally:
        coordinator.close()


def test_a_tenant_gets_what_kafkas_coordinator_answers_under_the_same_acls(
    tenant_job: TenantJob,
) -> None:
    suffix = uuid.uuid4().hex[:6]
    sequences = _sequences(suffix)
    kafka_answers = _run_on_kafka(tenant_job.kafka, sequences)
    job_answers = _run_on_job(tenant_job, sequences)
    for sequence, theirs, ours in zip(sequences, kafka_answers, job_answers, strict=True):
        assert ours == theirs, f"{sequence.label} ({sequence.group_id}): job {ours}, Kafka {theirs}"
    # The cases did what they claim, on both sides.
    codes = {s.label: a for s, a in zip(sequences, job_answers, strict=True)}
    assert codes["another tenant's group"][0].partitions == ((ORDERS, 0, 30),)
    assert codes["a topic it may not read: 29 for its partitions only"][0].partitions == (
        (ORDERS, 0, 0),
        (SECRET, 0, 29),
        (SECRET, 1, 29),
    )
    assert codes["LITERAL DENY beats ALLOW"][0].partitions == ((ORDERS, 0, 30),)
    assert codes["no DELETE on the group"] == [Answer(30), Answer(30)]


def test_refused_requests_change_neither_the_sink_nor_the_offsets_topic(
    tenant_job: TenantJob,
) -> None:
    config = tenant_job.config
    suffix = uuid.uuid4().hex[:6]
    allowed, refused = f"team-a.ok-{suffix}", f"team-b.no-{suffix}"
    coordinator = JobCoordinator(
        config, tenant=A, client_options=tenant_job.kafka.kafka_python_options(A)
    )
    try:
        commit = Commit((CommitPartition(ORDERS, 0, 11), CommitPartition(SECRET, 0, 12)))
        answers = coordinator.run([Sequence(allowed, (commit,)), Sequence(refused, (commit,))])
    finally:
        coordinator.close()
    assert answers == [
        [Answer(0, ((ORDERS, 0, 0), (SECRET, 0, 29)))],
        [Answer(0, ((ORDERS, 0, 30), (SECRET, 0, 30)))],
    ]
    assert sink_offsets(config.sink_url, allowed) == {(ORDERS, 0): 11}
    assert sink_offsets(config.sink_url, refused) == {}
    latest = compacted(read_offsets_topic(config.bootstrap_servers, config.offsets_topic))
    offset_keys = [key for key in latest if isinstance(key, OffsetCommitKey)]
    assert {(k.topic, k.partition) for k in offset_keys if k.group == allowed} == {(ORDERS, 0)}
    assert not [k for k in offset_keys if k.group == refused]


def test_the_client_and_the_cli_speak_as_a_tenant(tenant_job: TenantJob, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    tenant_config = tenant_job.tenant_config(A)
    with OffsetCommitClient(tenant_config, tenant=A, client_id="tenant-a") as client:
        assert client.ingest_topic == tenant_job.tenant(A).ingest_topic
        client.commit(f"team-a.client-{suffix}", {(ORDERS, 1): 4}, timeout_s=60)
        with pytest.raises(CommitFailedError, match="GROUP_AUTHORIZATION_FAILED"):
            client.commit(f"team-b.client-{suffix}", {(ORDERS, 1): 4}, timeout_s=60)
        with pytest.raises(CommitFailedError, match="TOPIC_AUTHORIZATION_FAILED"):
            client.commit(f"team-a.client-{suffix}", {(SECRET, 1): 4}, timeout_s=60)
    wait_for(
        lambda: sink_offsets(tenant_config.sink_url, f"team-a.client-{suffix}"),
        lambda got: got == {(ORDERS, 1): 4},
    )

    config_file = write_config_file(tenant_config, tmp_path / "tenant-a.toml")
    script = Path(sys.executable).with_name("consumer-offsets")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "streaming.cli"]
    base = [*command, "commit", "--config", str(config_file), "--tenant", A]
    refused = subprocess.run(
        [*base, "--group", f"team-b.cli-{suffix}", "--topic", ORDERS, "--partition", "0",
         "--offset", "3"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert refused.returncode == 1, refused
    assert "GROUP_AUTHORIZATION_FAILED" in refused.stdout + refused.stderr
    unknown = subprocess.run(
        [*command, "commit", "--config", str(config_file), "--tenant", "team-z", "--group", "g",
         "--topic", ORDERS, "--partition", "0", "--offset", "3"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert unknown.returncode == 2 and "tenant 'team-z'" in unknown.stderr, unknown


def _mirror_config(kafka: AuthorizingKafka, folder: Path) -> MirrorConfig:
    return MirrorConfig(
        source_bootstrap_servers=kafka.sasl_ssl,
        source_kafka_options=kafka.kafka_options(MIRROR),
        sink_url=f"sqlite:///{folder / 'mirror.db'}",
        checkpoint_location=str(folder / "checkpoint"),
        trigger_interval="500 milliseconds",
        log_end_interval_s=0.5,
    )


#: The ACLs the README gives the mirror's principal on the source cluster.
MIRROR_ACLS = [
    ("TOPIC", "LITERAL", "__consumer_offsets", "READ"),
    ("TOPIC", "LITERAL", "*", "DESCRIBE"),
    ("GROUP", "PREFIXED", SOURCE_GROUP_ID_PREFIX, "READ"),
]


def test_the_mirror_fails_loudly_without_its_acls_and_runs_with_them(
    spark: Any, authorizing_kafka: AuthorizingKafka, tmp_path: Path
) -> None:
    kafka = authorizing_kafka
    group = f"mirrored-{uuid.uuid4().hex[:6]}"
    admin_commit(AdminClient({"bootstrap.servers": kafka.plaintext}), group, {(ORDERS, 0): 9})
    mirror = OffsetsMirror.create(_mirror_config(kafka, tmp_path / "denied"), spark)
    try:
        with pytest.raises(SourceAccessError, match=r"TOPIC_AUTHORIZATION_FAILED .* READ on topic"):
            mirror.start()
        assert mirror.query is None  # refused before any query started
    finally:
        mirror.stop()
        mirror.sink.close()

    admin = KafkaAdminClient(bootstrap_servers=kafka.plaintext)
    try:
        acls = [
            ACL(
                f"User:{MIRROR}",
                "*",
                ACLOperation[operation],
                ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType[kind], name, ACLResourcePatternType[pattern]),
            )
            for kind, pattern, name, operation in MIRROR_ACLS
        ]
        assert not admin.create_acls(acls)["failed"]
    finally:
        admin.close()
    config = _mirror_config(kafka, tmp_path / "allowed")
    mirror = OffsetsMirror.create(config, spark)
    try:
        mirror.start()

        def mirrored() -> dict[tuple[str, int], int] | None:
            query = mirror.query
            assert query is not None and query.isActive, query and query.exception()
            return sink_offsets(config.sink_url, group)

        wait_for(mirrored, lambda got: got == {(ORDERS, 0): 9})
    finally:
        mirror.stop()
        mirror.sink.close()


def test_the_sink_is_current_for_a_group_only_once_tenants_topics_are_applied(
    tenant_job: TenantJob,
) -> None:
    """``wait_until_applied`` (``describe --starting-offsets``, the Spark resume helper) covers
    commits a tenant sent through its own topic: the offset is readable when it returns."""
    config = tenant_job.config
    group = f"team-a.resume-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(**tenant_job.kafka.kafka_python_options(A), acks="all", **PATIENT)
    try:
        request = OffsetCommitRequest(uuid.uuid4().hex, group, (PartitionCommit(ORDERS, 1, 21),))
        producer.send(
            tenant_job.tenant(A).ingest_topic,
            key=group.encode(),
            value=encode_request(request),
            partition=partition_for(group, config.ingest_topic_partitions),
        ).get(timeout=30)
    finally:
        producer.close(timeout=5)
    with OffsetsReader(config.sink_url, config.kafka_python_options()) as reader:
        applied = wait_until_applied(
            reader,
            group,
            ingest_topic=config.ingest_topic,
            tenant_topics=[t.ingest_topic for t in config.tenants],
            timeout_s=120,
        )
        assert applied.ingest_partition == partition_for(group, config.ingest_topic_partitions)
        assert [(o.topic, o.partition, o.offset) for o in reader.fetch(group)] == [(ORDERS, 1, 21)]


def test_ingest_topics_are_read_committed_and_progress_covers_commit_markers(
    tenant_job: TenantJob,
) -> None:
    """Requests in Kafka transactions on the operators' topic and a tenant's: a committed
    transaction's are applied and answered, an aborted one's never seen (no answer, record or
    sink row), a request after the abort still applied; the sink is current once the job's
    progress covers the commit marker that ends each partition."""
    config, tenant = tenant_job.config, tenant_job.tenant(A)
    suffix = uuid.uuid4().hex[:6]
    topics = {
        config.ingest_topic: config.responses_topic,
        tenant.ingest_topic: tenant.responses_topic,
    }
    groups = dict(zip(topics, (f"ops.txn-{suffix}", f"team-a.txn-{suffix}"), strict=True))
    for topic, group in groups.items():
        for name, commit, parts in (
            ("first", True, ((0, 7),)),
            ("aborted", False, ((0, 5), (1, 5))),
            ("after", True, ((0, 8),)),
        ):
            request = TxnOffsetCommitRequest(
                f"{group}-{name}",
                group,
                transactional_id=f"{group}-txn",
                producer_id=0,  # recorded, not checked: the broker fences producers
                producer_epoch=0,
                partitions=tuple(PartitionCommit(ORDERS, p, o) for p, o in parts),
            )
            produce_in_transaction(
                config.bootstrap_servers,
                topic,
                [request],
                transactional_id=request.transactional_id,
                commit=commit,
            )
    with OffsetsReader(config.sink_url, config.kafka_python_options()) as reader:
        for group in groups.values():
            wait_until_applied(
                reader,
                group,
                ingest_topic=config.ingest_topic,
                tenant_topics=[tenant.ingest_topic],
                timeout_s=30,
            )
    records = read_offsets_topic(config.bootstrap_servers, config.offsets_topic)
    for topic, group in groups.items():
        assert sink_offsets(config.sink_url, group) == {(ORDERS, 0): 8}
        # A batch writes the last record per key: 7 is there unless 8 came in its batch.
        written = [
            (k.partition, v.offset)
            for _, (k, v) in records
            if isinstance(k, OffsetCommitKey) and k.group == group
        ]
        assert written[-1] == (0, 8) and set(written) <= {(0, 7), (0, 8)}
        answers = wait_for(
            lambda t=topics[topic]: read_responses(config.bootstrap_servers, t),
            lambda r, g=group: f"{g}-after" in r,
        )
        assert [
            (answers[f"{group}-{n}"]["api"], answers[f"{group}-{n}"]["partitions"][0]["errorCode"])
            for n in ("first", "after")
        ] == [("TxnOffsetCommit", 0)] * 2
        assert f"{group}-aborted" not in answers
