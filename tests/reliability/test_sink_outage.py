"""PostgreSQL stopped and restarted under load.

A dedicated, durable PostgreSQL serves as the sink while commits flow; it is stopped
(``pg_ctl stop -m fast``) mid-load and started again some seconds later. The job's contract
(``streaming/spark/writer.py``), pinned down here in both of its branches:

- ``waits``: an outage shorter than ``sink_write_timeout_s`` stalls the query — the batch's sink
  write is retried with backoff, nothing of it is acknowledged meanwhile — and the query carries
  on by itself once the database is back;
- ``fails``: an outage longer than that fails the query loudly with ``SinkWriteError``/
  ``SinkError``; the operator (here the test) restarts the job from its checkpoint once the
  database is back, Spark replays the failed batch.

Either way every produced commit is answered, and sink and offsets topic converge to the model.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming.spark.job import OffsetsJob
from tests.fixtures.job import prepare_topics
from tests.fixtures.postgres import PostgresServer, find_postgres_bin, local_postgres
from tests.reliability.load import CommitLoad, acknowledged
from tests.reliability.support import (
    QueryWatch,
    diff,
    offsets_topic_offsets,
    reliability_config,
    wait_for_sink,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

OUTAGE_S = 8.0
MAX_OUTAGE_S = 60.0


@pytest.fixture
def durable_postgres() -> Iterator[str]:
    if find_postgres_bin() is None:
        message = "no PostgreSQL server binaries (apt-get install postgresql)"
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"{message} — required under CI=true", pytrace=False)
        pytest.skip(message)
    with local_postgres(durable=True) as url:
        yield url


@pytest.mark.parametrize(("mode", "sink_write_timeout_s"), [("waits", 60), ("fails", 2)])
def test_postgres_outage_under_load_converges_to_the_model(
    mode: str,
    sink_write_timeout_s: int,
    durable_postgres: str,
    spark: Any,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    server = PostgresServer(durable_postgres)
    config = reliability_config(
        kafka_bootstrap, tmp_path, durable_postgres, sink_write_timeout_s=sink_write_timeout_s
    )
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
        # While the database is down the query waits on its sink write; with a short
        # sink_write_timeout_s it then fails. The outage lasts at least OUTAGE_S, and in the
        # "fails" mode until the query failed, at most MAX_OUTAGE_S (a micro-batch under load
        # can take many seconds to reach its sink write).
        query = job.query
        assert query is not None
        deadline = time.monotonic() + (MAX_OUTAGE_S if mode == "fails" else OUTAGE_S)
        while time.monotonic() < deadline and query.isActive:
            time.sleep(0.2)
        failed_after_s = time.monotonic() - outage_started
        acked_during = set(acknowledged(config)) - acked_before
        time.sleep(max(0.0, OUTAGE_S - failed_after_s))
        outage_s = time.monotonic() - outage_started
        server.start()
        if mode == "waits":
            assert query.isActive, f"the query failed within its sink timeout: {query.exception()}"
            assert acked_during <= set(acknowledged(config)), "acks lost"
            behaviour = "waited for the database and carried on by itself"
        else:
            assert not query.isActive, "the query outlived its sink timeout"
            error = str(query.exception())
            assert "SinkWriteError" in error or "SinkError" in error, error
            named = "SinkWriteError" if "SinkWriteError" in error else "SinkError (reconnect)"
            behaviour = f"failed after {failed_after_s:.1f} s with {named}; restarted"
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
        wait_for_sink(config.sink_url, model, alive)
        in_topic = offsets_topic_offsets(config.bootstrap_servers, config.offsets_topic)
        assert in_topic == model, diff(model, in_topic)
        acked = acknowledged(config)
        assert set(acked) == produced
        # The job must still be serving after the batch the outage interrupted was replayed.
        time.sleep(2)
        alive()
        print(
            f"\nsink outage ({mode}, sink_write_timeout_s={sink_write_timeout_s}): postgres down "
            f"{outage_s:.0f} s; the job {behaviour}; "
            f"{len(produced)} commits sent ({load.rewinds} rewinds), {len(acked)} acknowledged "
            f"({len(acked_before)} before the outage, {len(acked_during)} during it), "
            f"{len(model)} keys in sink and offsets topic = model, 0 lost; "
            f"{time.monotonic() - started:.1f} s"
        )
    finally:
        for job in jobs:
            try:
                job.stop()
            except Exception as error:  # a sink that is down must not hide the test's result
                print(f"stopping a job: {error}")
            job.sink.close()
