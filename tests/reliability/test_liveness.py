"""Liveness against the real broker: the job as its own driver process, SIGKILLed and stopped.

``status`` must say NOT RESPONDING within 30 s of a SIGKILL (the heartbeat stops; the row still
says ACTIVE), and STOPPED after a clean stop; ``commit`` against either must exit 1 within 5 s
without producing anything, so nothing is applied when the job returns."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from connectors.sinks import open_sink
from tests.fixtures.job import prepare_topics, unique_group, write_config_file
from tests.reliability.load import driver
from tests.reliability.support import reliability_config, wait_until
from tests.streaming.cli.support import Run, run
from tests.streaming.helpers import read_all

# The job runs as its own driver process: Spark starts there, so the marker is explicit.
pytestmark = [pytest.mark.slow, pytest.mark.spark]

#: A cold driver (JVM, Spark, Kafka source, RocksDB) is ACTIVE within this.
START_TIMEOUT_S = 240.0


def test_a_killed_or_stopped_job_is_reported_and_refuses_commits_at_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    config = reliability_config(kafka_bootstrap, tmp_path)
    prepare_topics(config)
    config_file = write_config_file(config, tmp_path / "job.toml")
    flags = ["--config", str(config_file), "--sink-url", config.sink_url, "--timeout", "60000"]

    def status() -> str:
        answer = run("status", *flags, "--json")
        return str(answer.json()["status"]) if answer.code == 0 else f"exit {answer.code}"

    def commit(group: str, offset: int) -> tuple[Run, float]:
        started = time.monotonic()
        result = run("commit", *flags, "--group", group, "--topic", "orders", "--partition",
                     "0", "--offset", str(offset))  # fmt: skip
        return result, time.monotonic() - started

    def committed(group: str) -> list[int]:
        with open_sink(config.sink_url, read_only=True) as sink:
            return [o.offset for o in sink.fetch_offsets(group)]

    refused_after_kill, refused_after_stop = unique_group("killed"), unique_group("stopped")
    with driver(config, tmp_path / "driver.log") as job:
        job.start()
        wait_until(lambda: status() == "ACTIVE", START_TIMEOUT_S, "ACTIVE", job.check_alive, 1)
        # The first batches of a cold driver may outlast one commit's timeout on a busy machine.
        before = unique_group("before")
        wait_until(lambda: commit(before, 1)[0].code == 0, START_TIMEOUT_S, "a first commit")

        job.kill()
        killed = time.monotonic()
        wait_until(lambda: status() == "NOT RESPONDING", 30, "NOT RESPONDING after SIGKILL")
        noticed_s = time.monotonic() - killed
        result, took_s = commit(refused_after_kill, 7)
        assert result.code == 1 and took_s < 5, (result, took_s)
        assert "the offsets job is NOT RESPONDING (last seen" in result.err
        assert result.err.count("\n") == 1

        job.start()
        wait_until(lambda: status() == "ACTIVE", START_TIMEOUT_S, "ACTIVE again", job.check_alive)
        after = unique_group("after")  # the job is back and answering
        wait_until(lambda: commit(after, 3)[0].code == 0, START_TIMEOUT_S, "a commit after")
        assert committed(after) == [3]
        assert committed(refused_after_kill) == []

        job.stop()
        assert status() == "STOPPED"
        result, stopped_took_s = commit(refused_after_stop, 9)
        assert result.code == 1 and stopped_took_s < 5, (result, stopped_took_s)
        assert "the offsets job is STOPPED" in result.err

    # Neither refused commit was produced: no job, now or later, can apply it.
    keys = {r.key for r in read_all(config.bootstrap_servers, config.ingest_topic)}
    assert after.encode() in keys
    assert refused_after_kill.encode() not in keys and refused_after_stop.encode() not in keys
    assert committed(refused_after_kill) == committed(refused_after_stop) == []
    print(
        f"\nliveness: NOT RESPONDING {noticed_s:.1f} s after SIGKILL; commit refused in "
        f"{took_s:.2f} s (not responding) and {stopped_took_s:.2f} s (STOPPED)"
    )
