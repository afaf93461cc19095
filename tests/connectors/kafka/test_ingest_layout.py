"""Ingest topics: created with the configured partitions; an existing one may have any divisor
of the shard count (one per shard, the layout before, included) and nothing else."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from connectors.kafka.admin import KafkaAdmin, TopicConfigurationError, ingest_partition_counts
from streaming.spark.topics import ensure_topics, ingest_layout
from tests.fixtures.job import new_job_config


def test_the_counts_an_ingest_topic_may_have_divide_the_shards() -> None:
    assert ingest_partition_counts(50) == (1, 2, 5, 10, 25, 50)
    assert ingest_partition_counts(7) == (1, 7)


def test_existing_ingest_topics_keep_a_divisor_and_refuse_anything_else(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: KafkaAdminClient
) -> None:
    config = new_job_config(kafka_bootstrap, tmp_path)  # 4 shards, new ingest topics of 2
    ensure_topics(config)
    with KafkaAdmin(config.kafka_python_options()) as admin:
        assert admin.partition_counts([config.ingest_topic, config.offsets_topic]) == {
            config.ingest_topic: 2,
            config.offsets_topic: 4,
        }
    legacy = replace(new_job_config(kafka_bootstrap, tmp_path), ingest_partitions=4)
    ensure_topics(legacy)
    # A job configured for 2 takes the existing topic of 4 as it is.
    assert ingest_layout(replace(legacy, ingest_partitions=None)) == {legacy.ingest_topic: 4}
    odd = new_job_config(kafka_bootstrap, tmp_path)
    kafka_admin.create_topics([NewTopic(odd.ingest_topic, 3, 1)])
    with pytest.raises(TopicConfigurationError, match=r"has 3 partitions.*divides the 4"):
        ensure_topics(odd)
