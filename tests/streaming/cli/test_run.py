"""The job's entry point: ``python -m streaming`` and spark-submit's entry file share
``streaming.cli.run.main`` (the job itself is tested in ``tests/streaming/test_job.py``)."""

from __future__ import annotations

import subprocess
import sys

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
