"""``request_timeout_ms``, the deadline of requests without ``timeoutMs``: Kafka's
``default.api.timeout.ms`` by default, set like any other JobConfig field, and handed to the
state machine with the coordinator settings."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from streaming.cli.run import add_job_arguments, config_from_args
from streaming.config import JobConfig, load_config


def test_the_default_is_kafkas_default_api_timeout() -> None:
    config = load_config(env={})
    assert config.request_timeout_ms == 60_000
    assert config.coordinator.request_timeout_ms == 60_000


def test_toml_then_environment_then_flag(tmp_path: Path) -> None:
    toml = tmp_path / "job.toml"
    toml.write_text("request_timeout_ms = 1000\n")
    assert load_config(toml, env={}).request_timeout_ms == 1000
    env = {"CONSUMER_OFFSETS_REQUEST_TIMEOUT_MS": "2000"}
    assert load_config(toml, env=env).request_timeout_ms == 2000
    parser = argparse.ArgumentParser()
    add_job_arguments(parser)
    args = parser.parse_args(["--config", str(toml), "--request-timeout-ms", "3000"])
    config = config_from_args(args)
    assert config.request_timeout_ms == 3000
    assert config.coordinator.request_timeout_ms == 3000


def test_a_negative_timeout_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="request_timeout_ms"):
        JobConfig(request_timeout_ms=-1)
