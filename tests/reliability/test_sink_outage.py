"""PostgreSQL stopped and restarted under load.

A dedicated, durable PostgreSQL serves as the sink while commits flow; it is stopped
(``pg_ctl stop -m fast``) mid-load and started again some seconds later. What the job does,
and what this test pins down: the next micro-batch's sink write raises ``SinkWriteError``, which
fails the query loudly (nothing of that batch is acknowledged: responses are written only after
the sink); the operator — here the test — restarts the job from its checkpoint once the database
is back, Spark replays the failed batch, and the sink converges to the model. Were the query
still running after the outage (a write that waited it out), the test accepts that too and
reports it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from streaming.job import OffsetsJob
from tests.fixtures.postgres import find_postgres_bin, local_postgres
from tests.reliability.load import CommitLoad, acknowledged
from tests.reliability.support import (
    QueryWatch,
    diff,
    offsets_topic_offsets,
    prepare_topics,
    reliability_config,
    sink_offsets,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

OUTAGE_S = 8.0


class PostgresServer:
    """Stop and start a running local PostgreSQL cluster, found through its own settings."""

    def __init__(self, url: str) -> None:
        self.url = url
        bindir = find_postgres_bin()
        assert bindir is not None
        self.pg_ctl = str(bindir / "pg_ctl")
        with psycopg.connect(url, autocommit=True) as conn:
            settings = {
                name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
                for name in (
                    "data_directory",
                    "port",
                    "listen_addresses",
                    "unix_socket_directories",
                )
            }
        self.data = settings["data_directory"]
        self.options = (
            f"-p {settings['port']} -c listen_addresses={settings['listen_addresses']} "
            f"-c unix_socket_directories={settings['unix_socket_directories']}"
        )
        # The server refuses to run as root: local_postgres runs it as the postgres user.
        self.prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            [*self.prefix, self.pg_ctl, f"--pgdata={self.data}", *args],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def stop(self) -> None:
        self._pg_ctl("--mode=fast", "--wait", "stop")

    def start(self) -> None:
        log = str(Path(self.data).parent / "restart.log")
        self._pg_ctl(f"--log={log}", f"--options={self.options}", "--wait", "start")


@pytest.fixture
def durable_postgres() -> Iterator[str]:
    if find_postgres_bin() is None:
        pytest.skip("no PostgreSQL server binaries")
    with local_postgres(durable=True) as url:
        yield url


def test_postgres_outage_under_load_converges_to_the_model(
    durable_postgres: str, spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    server = PostgresServer(durable_postgres)
    config = reliability_config(kafka_bootstrap, tmp_path, durable_postgres)
    prepare_topics(config)
    jobs: list[OffsetsJob] = []

    def start_job() -> OffsetsJob:
        job = OffsetsJob.create(config, spark)
        jobs.append(job)
        job.start()
        return job

    load = CommitLoad(config, rate_per_s=30.0, seed=3)
    behaviour = "?"
    try:
        job = start_job()
        watches = [QueryWatch(job)]

        def alive() -> None:
            watches[-1]()

        load.start()
        wait_until(lambda: len(acknowledged(config)) > 50, 180, "first acks", alive, 1)
        acked_before = set(acknowledged(config))
        server.stop()
        outage_started = time.monotonic()
        # While the database is down: the query fails on its next sink write (or waits).
        query = job.query
        assert query is not None
        deadline = time.monotonic() + OUTAGE_S
        while time.monotonic() < deadline and query.isActive:
            time.sleep(0.2)
        failed_after_s = time.monotonic() - outage_started
        acked_during = set(acknowledged(config)) - acked_before
        time.sleep(max(0.0, OUTAGE_S - failed_after_s))
        server.start()
        if query.isActive:
            behaviour = "kept running through the outage"
        else:
            error = str(query.exception())
            assert "SinkWriteError" in error or "sink" in error.lower(), error
            behaviour = f"failed after {failed_after_s:.1f} s with SinkWriteError; restarted"
            job.stop()
            job = start_job()
            watches.append(QueryWatch(job))
        wait_until(
            lambda: len(acknowledged(config)) > len(acked_before) + len(acked_during) + 50,
            180,
            "acks after the outage",
            alive,
            1,
        )
    finally:
        load.stop()
    try:
        assert not load.failed, load.failed[:5]
        produced = load.request_ids()
        wait_until(lambda: produced <= set(acknowledged(config)), 120, "all answered", alive, 1)
        model = load.model()
        state: dict[str, Any] = {}

        def converged() -> bool:
            state["sink"] = sink_offsets(config.sink_url)
            return bool(state["sink"] == model)

        try:
            wait_until(converged, 30, "sink equal to the model", alive)
        except AssertionError:
            raise AssertionError("sink != model: " + diff(model, state["sink"])) from None
        in_topic = offsets_topic_offsets(config.bootstrap_servers, config.offsets_topic)
        assert in_topic == model, diff(model, in_topic)
        acked = acknowledged(config)
        assert set(acked) == produced
        print(
            f"\nsink outage: postgres down {OUTAGE_S:.0f} s; the job {behaviour}; "
            f"{len(produced)} commits sent ({load.rewinds} rewinds), {len(acked)} acknowledged "
            f"({len(acked_before)} before the outage, {len(acked_during)} during it), "
            f"{len(model)} keys in sink and offsets topic = model, 0 lost; "
            f"{sum(w.replay_restarts for w in watches)} restart(s) after Spark's replay bug; "
            f"{time.monotonic() - started:.1f} s"
        )
    finally:
        for job in jobs:
            try:
                job.stop()
            except Exception as error:  # a sink that is down must not hide the test's result
                print(f"stopping a job: {error}")
            job.sink.close()
