"""The job's entry point: ``python -m streaming`` and spark-submit's entry file share
``streaming.cli.run.main`` (the job itself is tested in ``tests/streaming/test_job.py``)."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streaming.cli import run as job_main
from tests.fixtures.job import new_job_config, write_config_file


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


def test_history_is_kept_unless_no_history(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    monkeypatch.setattr(job_main, "run", lambda args: seen.append(args) or 0)
    for flags in ([], ["--no-history"]):
        assert job_main.main(["--embedded", *flags]) == 0
    kept = [job_main.config_from_args(args).keep_history for args in seen]  # type: ignore[arg-type]
    assert kept == [True, False]


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


def closed_port() -> int:
    """A local port nothing listens on (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", ["run", "mirror"])
def test_a_wrong_bootstrap_server_fails_in_seconds_before_anything_is_created(
    tmp_path: Path, command: str
) -> None:
    server = f"127.0.0.1:{closed_port()}"
    script = Path(sys.executable).with_name("consumer-offsets")
    started = time.monotonic()
    done = subprocess.run(
        [str(script), command, "--bootstrap-server", server, "--embedded" if command == "run"
         else "--cluster-name=c", "--sink-url", "sqlite:///offsets.db", "--checkpoint-location",
         str(tmp_path / "checkpoint")],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    # Not Kafka's timeouts (a minute and more): refused at once. The bound is loose because the
    # start of Python alone takes seconds on a loaded machine; that Spark never started is
    # what the single line shows (its JVM's first stderr line would be a second).
    assert time.monotonic() - started < 45
    assert done.returncode == 1, done.stderr
    # One line naming the address and what to check; none of kafka-python's own.
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: no Kafka broker answers at {server} (Connection refused)")
    assert "bootstrap-server" in line and "nothing was created" in line
    assert list(tmp_path.iterdir()) == []  # no sink file, no checkpoint


def start_then_interrupt(argv: list[str], cwd: Path, after_line: str) -> tuple[int, str]:
    """``consumer-offsets run`` in a process group of its own, sent SIGINT as a terminal's
    Ctrl-C is (to the whole group) once its stderr shows ``after_line``; its exit status and
    stderr."""
    script = Path(sys.executable).with_name("consumer-offsets")
    process = subprocess.Popen(
        [str(script), "run", *argv], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
        text=True, cwd=cwd, start_new_session=True,
    )  # fmt: skip
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if after_line in line:
            break
    os.killpg(process.pid, signal.SIGINT)
    seen.append(process.stderr.read())
    return process.wait(timeout=120), "".join(seen)


# The job runs as its own driver process: Spark starts there, so the marker is explicit.
@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize(
    ("after_line", "expected"),
    [
        # Spark's session starting (pyspark's own SIGINT handler is installed around here):
        # nothing of the job's exists yet.
        ("To adjust logging level", "interrupted during start-up; nothing was created"),
        ("streaming.spark.job: starting with", "; nothing was acknowledged"),
    ],
)
def test_ctrl_c_during_start_up_is_one_line_and_exit_130(
    tmp_path: Path, kafka_bootstrap: str, after_line: str, expected: str
) -> None:
    config = write_config_file(new_job_config(kafka_bootstrap, tmp_path), tmp_path / "job.toml")
    status, stderr = start_then_interrupt(["--config", str(config)], tmp_path, after_line)
    assert status == 130, stderr
    assert "Traceback" not in stderr and "py4j" not in stderr, stderr
    (line,) = [x for x in stderr.splitlines() if x.startswith("interrupted")]
    assert line.startswith("interrupted during start-up") and line.endswith(expected), line


class _JvmGoneWithTheSignal:
    """A runner whose query ends by the stop signal's doing: the signal comes, then the call
    into Spark fails as py4j's does once the JVM is gone."""

    def __init__(self, sig: signal.Signals) -> None:
        self.lifecycle = self
        self.sig = sig

    def run_until(self, stop: object, duration: float | None) -> object:
        os.kill(os.getpid(), self.sig)  # handled in this (the main) thread
        raise ConnectionRefusedError(111, "Connection refused")


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_stop_signal_is_the_exit_status_whatever_it_did_to_spark(
    capsys: pytest.CaptureFixture[str], sig: signal.Signals, status: int
) -> None:
    handlers = {s: signal.getsignal(s) for s in job_main.STOP_SIGNALS}
    try:
        assert job_main.run_until_stopped(_JvmGoneWithTheSignal(sig), None) == status
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert capsys.readouterr().err == ""
