"""The job submitted with spark-submit to a Spark standalone master and worker on this machine
(executors in their own JVMs), as the README shows."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.local import free_port_block
from connectors.sinks import open_sink
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from streaming.config import JobConfig
from tests.streaming.helpers import produce_requests, read_responses, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def standalone_master() -> Iterator[str]:
    env = dict(
        os.environ,
        SPARK_MASTER_PORT=str(free_port_block(1)),
        SPARK_MASTER_WEBUI_PORT=str(free_port_block(1)),
        SPARK_WORKER_CORES="1",
        SPARK_WORKER_MEMORY="2g",
    )
    started = subprocess.run(
        ["bash", "deploy/standalone.sh", "start"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", "deploy/standalone.sh", "stop"], cwd=ROOT, env=env, timeout=60)


def test_spark_submit_on_a_standalone_cluster(
    standalone_master: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    assert standalone_master.startswith("spark://")
    prefix = f"sa-{uuid.uuid4().hex[:8]}"
    sink_url = f"sqlite:///{tmp_path / 'offsets.db'}"
    log = (tmp_path / "submit.log").open("w")
    job = subprocess.Popen(
        [
            "bash",
            "deploy/spark-submit.sh",
            "--master",
            standalone_master,
            "--embedded",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--partitions",
            "4",
            "--ingest-topic",
            f"{prefix}.commits",
            "--offsets-topic",
            f"{prefix}.offsets",
            "--responses-topic",
            f"{prefix}.responses",
            "--dead-letter-topic",
            f"{prefix}.dead-letters",
            "--checkpoint-location",
            str(tmp_path / "checkpoint"),
            "--sink-url",
            sink_url,
            "--trigger-interval",
            "500 milliseconds",
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        # The job creates its topics at start; produce once the ingest topic exists.
        def ingest_partitions() -> int:
            assert job.poll() is None, (tmp_path / "submit.log").read_text()[-4000:]
            with KafkaAdmin({"bootstrap_servers": kafka_bootstrap}) as admin:
                return admin.partition_counts([f"{prefix}.commits"]).get(f"{prefix}.commits", 0)

        # 4 shards: a new ingest topic gets the largest divisor up to 2 (JobConfig).
        expected = JobConfig(partitions=4).ingest_topic_partitions
        wait_for(ingest_partitions, lambda n: n == expected, timeout_s=180)
        produce_requests(
            kafka_bootstrap,
            f"{prefix}.commits",
            [OffsetCommitRequest("sa-1", "cluster-group", (PartitionCommit("o", 0, 42),))],
        )
        responses = wait_for(
            lambda: read_responses(kafka_bootstrap, f"{prefix}.responses"),
            lambda got: "sa-1" in got,
            timeout_s=240,
        )
        assert responses["sa-1"]["errorCode"] == 0
        with open_sink(sink_url, read_only=True) as sink:
            assert [
                (o.topic, o.partition, o.offset) for o in sink.fetch_offsets("cluster-group")
            ] == [("o", 0, 42)]
        # Executors ran in the worker's JVMs, not in the driver.
        work = ROOT / ".runtime" / "standalone" / "work"
        assert any(work.glob("app-*/*/stderr")), "no executor ran on the standalone worker"
        # The project went to them with its bytecode: each module's .pyc beside its .py, for
        # this Python (a Python worker cannot cache what it compiles from a zip).
        with zipfile.ZipFile(ROOT / ".runtime" / "submit" / "consumer_offsets.zip") as z:
            sources = {name for name in z.namelist() if name.endswith(".py")}
            assert "state/shard.py" in sources
            for source in sources:
                assert z.read(source[:-3] + ".pyc")[:4] == importlib.util.MAGIC_NUMBER, source
    finally:
        os.killpg(job.pid, signal.SIGTERM)
        try:
            job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=30)
        log.close()
