"""The mirror and the job against a broker that wants SASL_SSL with SCRAM-SHA-512, configured
as a user writes it (the Java client's option names, a PEM trust store): every client of the
project logs in, and the password appears in no log line, error or stored status, also when
the login fails."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient, NewTopic

from connectors.client import OffsetCommitClient, OffsetsReader
from connectors.kafka.client_options import librdkafka_options
from streaming.spark.job import OffsetsJob
from streaming.spark.mirror import MirrorConfig, OffsetsMirror
from tests.fixtures.admin_commits import admin_commit
from tests.fixtures.job import new_job_config, prepare_topics
from tests.fixtures.kafka_secured import SecuredKafka
from tests.streaming.helpers import sink_offsets, wait_for


def _topic(secured: SecuredKafka, partitions: int = 2) -> str:
    name = f"secured-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=secured.plaintext)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def _commit_over_sasl_ssl(
    secured: SecuredKafka, group: str, offsets: dict[tuple[str, int], int]
) -> None:
    """An admin commit through the SASL_SSL listener (librdkafka, options translated)."""
    admin_commit(
        AdminClient(librdkafka_options(secured.sasl_ssl, secured.kafka_options())), group, offsets
    )


def _assert_no_secret(secret: str, caplog: pytest.LogCaptureFixture, capfd: Any) -> None:
    """Neither the Python logs nor anything written to stdout/stderr (the JVM's log too)."""
    out, err = capfd.readouterr()
    assert secret not in caplog.text
    assert secret not in out and secret not in err


def test_the_mirror_reads_a_sasl_ssl_cluster(
    spark: Any,
    secured_kafka: SecuredKafka,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: Any,
) -> None:
    caplog.set_level(logging.DEBUG)
    topic = _topic(secured_kafka)
    group = f"secured-{uuid.uuid4().hex[:8]}"
    _commit_over_sasl_ssl(secured_kafka, group, {(topic, 0): 4, (topic, 1): 6})
    sink_url = f"sqlite:///{tmp_path / 'mirror.db'}"
    config = MirrorConfig(
        source_bootstrap_servers=secured_kafka.sasl_ssl,
        source_kafka_options=secured_kafka.kafka_options(),
        sink_url=sink_url,
        checkpoint_location=str(tmp_path / "checkpoint"),
        trigger_interval="500 milliseconds",
        log_end_interval_s=0.5,
    )
    assert secured_kafka.password not in repr(config)
    mirror = OffsetsMirror.create(config, spark)
    try:
        mirror.start()
        wait_for(
            lambda: sink_offsets(sink_url, group),
            lambda got: got == {(topic, 0): 4, (topic, 1): 6},
        )
        with OffsetsReader(sink_url) as reader:
            # Log-end offsets came over SASL_SSL too (the topic is empty: lag 0).
            wait_for(lambda: reader.sink.log_end_offsets([topic]), lambda ends: len(ends) == 2)
            assert {p.lag for p in reader.describe(group).partitions} == {0}
            status = reader.status()
        assert secured_kafka.password not in status.detail
    finally:
        mirror.stop()
        mirror.sink.close()
    _assert_no_secret(secured_kafka.password, caplog, capfd)


def test_the_job_serves_a_sasl_ssl_cluster(
    spark: Any,
    secured_kafka: SecuredKafka,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: Any,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = new_job_config(
        secured_kafka.sasl_ssl, tmp_path, kafka_options=secured_kafka.kafka_options()
    )
    assert secured_kafka.password not in repr(config)
    prepare_topics(config)
    job = OffsetsJob.create(config, spark)
    try:
        job.start()
        group = f"secured-job-{uuid.uuid4().hex[:8]}"
        with OffsetCommitClient(config, client_id="secured-test") as client:
            deadline = time.monotonic() + 180
            while True:
                try:
                    client.commit(group, {("orders", 0): 12}, timeout_s=10)
                    break
                except Exception:
                    assert time.monotonic() < deadline, "no answer over SASL_SSL"
                    assert job.query is not None and job.query.isActive, job.query.exception()
        with OffsetsReader(config.sink_url, config.kafka_python_options()) as reader:
            assert [(o.topic, o.partition, o.offset) for o in reader.fetch(group)] == [
                ("orders", 0, 12)
            ]
    finally:
        job.stop()
        job.sink.close()
    _assert_no_secret(secured_kafka.password, caplog, capfd)


def _mirror_config_file(path: Path, secured: SecuredKafka, password: str, sink_url: str) -> Path:
    """The mirror's settings as a TOML file: the secret stays out of the command line."""
    lines = [
        f'source_bootstrap_servers = "{secured.sasl_ssl}"',
        f'sink_url = "{sink_url}"',
        f'checkpoint_location = "{path.parent / "checkpoint"}"',
        'trigger_interval = "500 milliseconds"',
        "[source_kafka_options]",
    ]
    for key, value in secured.kafka_options(password).items():
        lines.append(f'"{key}" = "{value.replace(chr(34), chr(92) + chr(34))}"')
    path.write_text("\n".join(lines) + "\n")
    return path


def test_no_secret_in_the_mirror_commands_output(
    secured_kafka: SecuredKafka, tmp_path: Path
) -> None:
    topic = _topic(secured_kafka, partitions=1)
    group = f"secured-cli-{uuid.uuid4().hex[:8]}"
    _commit_over_sasl_ssl(secured_kafka, group, {(topic, 0): 3})
    command = str(Path(sys.executable).parent / "consumer-offsets")

    # Logged in: runs, mirrors, stops on SIGTERM; nothing it printed holds the password.
    good = tmp_path / "good"
    good.mkdir()
    sink_url = f"sqlite:///{good / 'mirror.db'}"
    config = _mirror_config_file(
        good / "mirror.toml", secured_kafka, secured_kafka.password, sink_url
    )
    process = subprocess.Popen(
        [command, "mirror", "--config", str(config), "--log-end-interval", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: sink_offsets(sink_url, group), lambda got: got == {(topic, 0): 3})
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=90)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-3000:]
    assert "batch 0" in text  # it did log its work, and no library's chatter
    assert "INFO kafka" not in text and "INFO py4j" not in text
    assert secured_kafka.password not in text

    # A wrong password: a clear authentication failure, exit 1, and neither password shown.
    wrong_password = "wrong-" + secured_kafka.password[::-1]
    bad = tmp_path / "bad"
    bad.mkdir()
    config = _mirror_config_file(
        bad / "mirror.toml", secured_kafka, wrong_password, f"sqlite:///{bad / 'mirror.db'}"
    )
    failed = subprocess.run(
        [command, "mirror", "--config", str(config)],
        capture_output=True,
        timeout=180,
    )
    text = (failed.stdout + failed.stderr).decode(errors="replace")
    assert failed.returncode == 1, text[-3000:]
    assert "uthentication" in text, text[-3000:]
    assert wrong_password not in text and secured_kafka.password not in text
