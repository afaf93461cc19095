"""JobConfig: sources in order (TOML < environment < flags), validation naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.config import JobConfig, load_config


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


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sink_write_timeout_s", -1),
        ("retention_check_interval_ms", 0),
        ("state_partitions", 0),
        ("partitions", 0),
    ],
)
def test_invalid_values_are_refused_naming_the_field(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        JobConfig(**{field: value})


def test_unparseable_value_names_the_field() -> None:
    with pytest.raises(ValueError, match="'state_partitions'"):
        load_config(env={"CONSUMER_OFFSETS_STATE_PARTITIONS": "many"})
