"""JobConfig and the mirror's config: sources in order (TOML < environment < flags), validation
naming the field, secrets kept out of what is printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.config import JobConfig, load_config
from streaming.mirror import load_mirror_config


def test_sources_override_in_order(tmp_path: Path) -> None:
    toml = tmp_path / "job.toml"
    toml.write_text(
        "sink_write_timeout_s = 5\nretention_check_interval_ms = 1000\nstate_partitions = 3\n"
    )
    env = {
        "CONSUMER_OFFSETS_RETENTION_CHECK_INTERVAL_MS": "2000",
        "CONSUMER_OFFSETS_STATE_PARTITIONS": "4",
    }
    config = load_config(toml, env=env, overrides={"state_partitions": "6"})
    assert config.sink_write_timeout_s == 5
    assert config.retention_check_interval_ms == 2000
    assert config.state_partitions == 6


def test_defaults_follow_kafka() -> None:
    config = load_config(env={})
    assert config.retention_check_interval_ms == 600_000  # offsets.retention.check.interval.ms
    assert config.retention_ms == 7 * 24 * 3600 * 1000  # offsets.retention.minutes = 10080
    assert config.partitions == 50  # offsets.topic.num.partitions
    assert config.state_partitions is None
    # New ingest topics: the largest divisor of the shard count up to 2.
    assert config.ingest_topic_partitions == 2
    assert JobConfig(partitions=7).ingest_topic_partitions == 1
    assert JobConfig(partitions=50, ingest_partitions=25).ingest_topic_partitions == 25


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sink_write_timeout_s", -1),
        ("retention_check_interval_ms", 0),
        ("state_partitions", 0),
        ("partitions", 0),
        ("rebuild_sink_writes", "workers"),
        ("ingest_partitions", 3),  # does not divide the 50 shards
        ("ingest_partitions", 0),
        ("state_cache_mb", -1),
    ],
)
def test_invalid_values_are_refused_naming_the_field(field: str, value: int | str) -> None:
    with pytest.raises(ValueError, match=field):
        JobConfig(**{field: value})


def test_unparseable_value_names_the_field() -> None:
    with pytest.raises(ValueError, match="'state_partitions'"):
        load_config(env={"CONSUMER_OFFSETS_STATE_PARTITIONS": "many"})


def test_kafka_bootstrap_servers_is_the_fallback_of_the_job() -> None:
    env = {"KAFKA_BOOTSTRAP_SERVERS": "fallback:9092"}
    assert load_config(env=env).bootstrap_servers == "fallback:9092"
    env["CONSUMER_OFFSETS_BOOTSTRAP_SERVERS"] = "own:9092"
    assert load_config(env=env).bootstrap_servers == "own:9092"


def test_mirror_settings_from_file_environment_and_flags(tmp_path: Path) -> None:
    toml = tmp_path / "mirror.toml"
    toml.write_text(
        'source_bootstrap_servers = "prod:9093"\n'
        'sink_url = "sqlite:///file.db"\n'
        'checkpoint_location = "ckpt"\n'
        "log_end_interval_s = 30\n"
        "[source_kafka_options]\n"
        '"security.protocol" = "SASL_SSL"\n'
        '"sasl.jaas.config" = "ScramLoginModule required password=\\"hunter2\\";"\n'
    )
    env = {
        "CONSUMER_OFFSETS_MIRROR_SINK_URL": "postgresql://u:pw@db/offsets",
        "CONSUMER_OFFSETS_MIRROR_KEEP_HISTORY": "false",
    }
    config = load_mirror_config(toml, env=env, overrides={"cluster_name": "prod"})
    assert (config.source_bootstrap_servers, config.checkpoint_location) == ("prod:9093", "ckpt")
    assert config.sink_url == "postgresql://u:pw@db/offsets"
    assert (config.keep_history, config.cluster_name, config.log_end_interval_s) == (
        False,
        "prod",
        30.0,
    )
    assert config.source_kafka_options["security.protocol"] == "SASL_SSL"
    # Secrets never reach a printed configuration.
    printed = repr(config)
    assert "hunter2" not in printed and "pw@" not in printed
    assert "SASL_SSL" in printed


def test_mirror_settings_name_what_is_missing() -> None:
    with pytest.raises(ValueError, match="--source-bootstrap-servers, --checkpoint-location"):
        load_mirror_config(env={"CONSUMER_OFFSETS_MIRROR_SINK_URL": "sqlite:///x.db"})
    with pytest.raises(ValueError, match="unknown config key 'bootstrap_servers'"):
        load_mirror_config(env={}, overrides={"bootstrap_servers": "x"})
