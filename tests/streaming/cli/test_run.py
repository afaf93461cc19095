"""The job's entry point: ``python -m streaming`` and spark-submit's entry file share
``streaming.cli.run.main`` (the job itself is tested in ``tests/streaming/test_job.py``)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.cli import run as job_main


def test_python_dash_m_streaming_takes_the_job_flags() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streaming", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for flag in ("--config", "--embedded", "--duration", "--bootstrap-servers", "--keep-history"):
        assert flag in done.stdout


def test_flags_override_the_config_and_embedded_defaults_to_one_replica(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("CONSUMER_OFFSETS_REPLICATION_FACTOR", "CONSUMER_OFFSETS_MIN_INSYNC_REPLICAS"):
        monkeypatch.delenv(name, raising=False)
    seen: list[object] = []
    monkeypatch.setattr(job_main, "run", lambda args: seen.append(args) or 0)
    assert job_main.main(["--embedded", "--replication-factor", "3", "--keep-history"]) == 0
    config = job_main.config_from_args(seen[0])  # type: ignore[arg-type]
    assert (config.replication_factor, config.min_insync_replicas) == (3, 1)
    assert config.keep_history is True


def test_kafka_options_from_flags_go_over_the_config_files_key_by_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = tmp_path / "job.toml"
    config_file.write_text('[kafka_options]\n"client.id" = "file"\n"linger.ms" = "5"\n')
    parser = argparse.ArgumentParser()
    job_main.add_job_arguments(parser)
    args = parser.parse_args(
        ["--config", str(config_file), "--bootstrap-server", "b:9092", "--kafka-option",
         "client.id=flag", "--kafka-options", "acks=all"]
    )  # fmt: skip
    config = job_main.config_from_args(args)
    assert config.bootstrap_servers == "b:9092"
    assert dict(config.kafka_options) == {"client.id": "flag", "linger.ms": "5", "acks": "all"}


def test_a_bad_sink_url_stops_the_job_before_spark_with_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streaming", "--sink-url", "mysql://root@db/offsets"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "consumer-offsets: error: configuration: unsupported sink URL scheme 'mysql' in "
        "mysql://root@db/offsets: expected sqlite:///relative/path.db, "
        "sqlite:////absolute/path.db or postgresql://user:password@host:port/database "
        "(or postgres://)"
    ]


@pytest.mark.parametrize(
    ("tenants", "message"),
    [
        (
            '[[tenants]]\nname = "a"\ningest_topic = "a in"\nresponses_topic = "a.out"\n',
            "tenants[0]: ingest_topic: 'a in' is not a valid Kafka topic name",
        ),
        (
            '[[tenants]]\nname = "a"\ningest_topic = "consumer-offsets.commits"\n'
            'responses_topic = "a.out"\n',
            "tenants[0]: ingest_topic: 'consumer-offsets.commits' is already the job's",
        ),
        (
            '[[tenants]]\nname = "a"\ningest_topic = "a.in"\nresponses_topic = "a.out"\n'
            '[[tenants.acls]]\nresource_type = "GROUP"\npattern_type = "LITERAL"\n'
            'resource_name = "g"\noperation = "READ"\n',
            "tenants[0]: acls[0]: missing permission_type",
        ),
    ],
)
def test_bad_tenants_stop_the_job_before_spark_with_one_line(
    tmp_path: Path, tenants: str, message: str
) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(tenants)
    done = subprocess.run(
        [sys.executable, "-m", "streaming", "--tenants", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("consumer-offsets: error: configuration: ") and message in line, line
