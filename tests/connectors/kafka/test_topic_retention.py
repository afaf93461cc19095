"""The job's topics are created with bounded retention: nothing the job writes grows without
end on the broker except the compacted offsets topic (bounded by its keys)."""

from __future__ import annotations

from pathlib import Path

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from connectors.kafka.admin import DEAD_LETTERS_RETENTION_MS, RESPONSES_RETENTION_MS
from streaming.spark.topics import ensure_topics
from tests.fixtures.job import new_job_config


def _configs(admin: KafkaAdminClient, topic: str) -> dict[str, str]:
    (response,) = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    (resource,) = response.resources
    return {entry[0]: entry[1] for entry in resource[4]}


def test_responses_and_dead_letters_are_kept_for_a_bounded_time(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: KafkaAdminClient
) -> None:
    config = new_job_config(kafka_bootstrap, tmp_path)
    ensure_topics(config)
    try:
        responses = _configs(kafka_admin, config.responses_topic)
        assert responses["retention.ms"] == str(RESPONSES_RETENTION_MS)
        assert responses["segment.ms"] == str(RESPONSES_RETENTION_MS)
        assert _configs(kafka_admin, config.dead_letter_topic)["retention.ms"] == str(
            DEAD_LETTERS_RETENTION_MS
        )
        offsets = _configs(kafka_admin, config.offsets_topic)
        assert offsets["cleanup.policy"] == "compact"
    finally:
        kafka_admin.delete_topics(
            [
                config.ingest_topic,
                config.offsets_topic,
                config.responses_topic,
                config.dead_letter_topic,
            ]
        )
