"""The image (deploy/container/): built by build.sh, then run with podman as a user would.

The job runs in a container on the host's network against the test broker, its checkpoint and
SQLite sink on a mounted folder; a commit sent by the host's client is answered, ``describe``
in a second container reads it back, ``serve``'s ``/metrics`` is scraped from the host, and
``podman stop`` (SIGTERM) ends the job cleanly: restarted, it resumes from its checkpoint with
nothing lost. Marker ``container``: deploy/test.sh runs these in a phase of their own, beside
the other Pythons' tests.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.client import OffsetCommitClient
from streaming.config import JobConfig
from tests.fixtures.job import new_job_config, prepare_topics, unique_group, write_config_file

pytestmark = [pytest.mark.container, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/spark-consumer-offsets:test"
#: The image's working directory, a volume: the job's checkpoint and sink go there.
DATA = Path("/var/lib/consumer-offsets")
#: A cold job's first answer in a container on a loaded 2-core machine.
FIRST_ANSWER_S = 300.0
#: podman on these machines (deploy/container/build.sh says why).
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
#: Containers share the host's network (the test broker listens on its loopback), with ulimits
#: within the host's.
RUN_FLAGS = ["--network=host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``podman ARGS`` with this machine's settings; fails the test with its output."""
    done = subprocess.run(
        [*PODMAN, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"podman {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


@pytest.fixture(scope="module")
def image() -> str:
    """The image, built by deploy/container/build.sh as a user builds it; or the one named by
    ``CONSUMER_OFFSETS_TEST_IMAGE``, which deploy/test.sh built that way in the background."""
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: bash deploy/setup.sh --test-tools")
    built = os.environ.get("CONSUMER_OFFSETS_TEST_IMAGE")
    if built:
        podman("image", "inspect", built)
        return built
    done = subprocess.run(
        ["bash", str(ROOT / "deploy" / "container" / "build.sh")],
        env={**os.environ, "IMAGE": IMAGE, "CONTAINER_ENGINE": "podman"},
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Its size, for the README.
    print(done.stdout.strip().splitlines()[-1])
    return IMAGE


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """The folder mounted as the image's volume, writable by its user (uid 10001)."""
    folder = tmp_path / "data"
    folder.mkdir()
    folder.chmod(0o777)
    return folder


@pytest.fixture
def containers() -> Iterator[list[str]]:
    """Names of containers a test started; removed afterwards, with their logs on failure."""
    names: list[str] = []
    yield names
    for name in names:
        subprocess.run([*PODMAN, "rm", "-f", "-t", "5", name], capture_output=True, check=False)


def run_in_image(image: str, data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A one-shot command of the image with ``data`` as its volume."""
    return subprocess.run(
        [*PODMAN, "run", *RUN_FLAGS, "--rm", "-v", f"{data}:{DATA}", image, *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def job_status(image: str, data: Path) -> dict[str, object]:
    done = run_in_image(image, data, "status", "--config", str(DATA / "job.toml"), "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def describe(image: str, data: Path, group: str) -> dict[tuple[str, int], int]:
    """Committed offsets of ``group`` as ``describe`` in a container of its own reads them."""
    done = run_in_image(
        image, data, "describe", "--group", group, "--config", str(DATA / "job.toml"), "--json"
    )
    assert done.returncode == 0, done.stderr
    (described,) = json.loads(done.stdout)
    rows = described["partitions"]
    return {(row["topic"], row["partition"]): row["committed_offset"] for row in rows}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape_until(url: str, needle: str, timeout_s: float = 120.0) -> str:
    """``url``'s body once it holds ``needle``; fails the test at ``timeout_s``."""
    deadline, body = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = response.read().decode()
        except OSError:
            body = ""
        if needle in body:
            return body
        time.sleep(2)
    raise AssertionError(f"{url} never showed {needle!r}; last body:\n{body[:2000]}")


def job_config(kafka_bootstrap: str, data: Path) -> tuple[JobConfig, JobConfig]:
    """The job's configuration as the containers see it (paths in the volume), written to
    ``data/job.toml``, and the same as the host's client sees it."""
    inside = new_job_config(
        kafka_bootstrap, DATA, f"sqlite:///{DATA / 'offsets.db'}", prefix="container"
    )
    write_config_file(inside, data / "job.toml")
    host = dataclasses.replace(
        inside, sink_url=f"sqlite:///{data / 'offsets.db'}", checkpoint_location=str(data / "c")
    )
    return inside, host


def test_the_image_runs_the_job_serve_and_describe_and_stops_cleanly(
    image: str, kafka_bootstrap: str, data: Path, containers: list[str]
) -> None:
    inside, host = job_config(kafka_bootstrap, data)
    prepare_topics(inside)
    job = f"consumer-offsets-job-{uuid.uuid4().hex[:8]}"
    containers.append(job)
    podman("create", "--name", job, *RUN_FLAGS, "-v", f"{data}:{DATA}", image,
           "run", "--config", str(DATA / "job.toml"), "--log-level", "info")  # fmt: skip
    podman("start", job)
    group, topic = unique_group("container"), "orders"

    with OffsetCommitClient(host) as client:
        try:
            client.commit(group, {(topic, 0): 42}, timeout_s=FIRST_ANSWER_S)
        except Exception:
            print(podman("logs", job).stderr[-5000:])
            raise
        assert describe(image, data, group) == {(topic, 0): 42}
        # The image's HEALTHCHECK (the heartbeat in the sink) holds for a running job.
        podman("healthcheck", "run", job, timeout=60)

        port = free_port()
        serve = f"consumer-offsets-serve-{uuid.uuid4().hex[:8]}"
        containers.append(serve)
        podman("run", "-d", "--name", serve, *RUN_FLAGS, "-v", f"{data}:{DATA}",
               image, "serve", "--config", str(DATA / "job.toml"), "--port", str(port),
               "--log-end-interval", "1")  # fmt: skip
        metrics = scrape_until(f"http://127.0.0.1:{port}/metrics", f'consumergroup="{group}"')
        (line,) = [
            m
            for m in metrics.splitlines()
            if m.startswith("kafka_consumergroup_current_offset{") and f'"{group}"' in m
        ]
        assert line.endswith(" 42"), line
        podman("healthcheck", "run", serve, timeout=60)

        # SIGTERM: the job stops cleanly (exit 0, status STOPPED) and keeps its checkpoint.
        before = job_status(image, data)
        podman("stop", "-t", "90", job, timeout=120)
        state = json.loads(podman("inspect", job).stdout)[0]["State"]
        assert state["ExitCode"] == 0, podman("logs", job).stderr[-5000:]
        assert job_status(image, data)["status"] == "STOPPED"

        # A commit sent while it is down is answered once it is back; nothing before is lost.
        pending = client.commit_async(group, {(topic, 1): 17}, timeout_s=FIRST_ANSWER_S)
        podman("start", job)
        pending.result(timeout=FIRST_ANSWER_S + 30)
    assert describe(image, data, group) == {(topic, 0): 42, (topic, 1): 17}
    # Resumed from the checkpoint: batch ids go on from where they were, not from 0.
    after = job_status(image, data)
    assert int(str(after["last_batch_id"])) > int(str(before["last_batch_id"])), (before, after)
