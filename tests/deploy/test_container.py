"""The image (deploy/container/): built by build.sh, then run with podman as the Kubernetes
manifests (deploy/kubernetes/) run it.

Each container is its pod's translation (:func:`pod_flags`): a read-only root with nothing
writable but its volumes, uid 10001, every capability dropped, no privilege gained; its
emptyDirs as tmpfs, its Secrets and ConfigMaps as read-only folders, its claim a folder of the
host; its settings from the manifest's environment, secrets read from files (``*_FILE``) and
Spark's authentication (its secret a file), RPC and I/O encryption on, no UI. The job runs on
the host's network against the test broker, Spark in local mode (its checkpoint and a SQLite
sink, standing in for PostgreSQL, on the claim's folder); a commit sent by the host's client is
answered, ``describe`` in a second container reads it back, ``serve`` with TLS and users from
its web config is scraped from the host over HTTPS, each pod's probes pass, and ``podman stop``
(SIGTERM) ends the job cleanly: restarted, it resumes from its checkpoint with nothing lost.
Marker ``container``: deploy/test.sh runs these in a phase of their own, beside the other
Pythons' tests.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml

from connectors.client import OffsetCommitClient
from streaming.config import JobConfig
from tests.fixtures.job import new_job_config, prepare_topics, unique_group, write_config_file
from tests.fixtures.kafka_secured import make_certificates

pytestmark = [pytest.mark.container, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
IMAGE = "localhost/spark-consumer-offsets:test"
#: A cold job's first answer in a container on a loaded 2-core machine.
FIRST_ANSWER_S = 300.0
#: podman on these machines (deploy/container/build.sh says why).
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
#: Containers share the host's network (the test broker listens on its loopback), with ulimits
#: within the host's.
RUN_FLAGS = ["--network=host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
#: Spark settings of job.yaml that a driver in local mode takes as they are: its security.
SPARK_SECURITY = (
    "spark.authenticate",
    "spark.network.crypto.",
    "spark.io.encryption.",
    "spark.ui.",
)

Manifest = dict[str, Any]


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
def containers() -> Iterator[list[str]]:
    """Names of containers a test started; removed afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        subprocess.run([*PODMAN, "rm", "-f", "-t", "5", name], capture_output=True, check=False)


def pod_container(deployment: str) -> Manifest:
    """The container of ``deployment`` (deploy/kubernetes/), with its pod's volumes."""
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc["kind"] == "Deployment" and doc["metadata"]["name"] == deployment:
                spec = doc["spec"]["template"]["spec"]
                (container,) = spec["containers"]
                return {**container, "volumes": {v["name"]: v for v in spec["volumes"]}}
    raise AssertionError(f"no Deployment {deployment} in {MANIFESTS}")


def pod_flags(container: Manifest, folders: dict[str, Path], spark: str = "") -> list[str]:
    """``podman run`` flags that run ``container`` as its pod does: its security context, its
    volumes (an emptyDir a tmpfs, executable as an emptyDir is; any other volume the host
    folder ``folders`` names for it, read-only where mounted so), its literal environment
    (Kubernetes-only values left out) with ``PYSPARK_SUBMIT_ARGS`` replaced by ``spark``."""
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] and context["capabilities"]["drop"] == ["ALL"]
    assert context["allowPrivilegeEscalation"] is False
    # No tmpfs but the pod's own (podman adds /tmp, /run and /var/tmp to a read-only root).
    flags = ["--read-only", "--read-only-tmpfs=false", "--cap-drop=ALL"]
    flags += [
        "--security-opt=no-new-privileges",
        "--user",
        f"{context['runAsUser']}:{context['runAsGroup']}",
    ]
    for mount in container["volumeMounts"]:
        volume = container["volumes"][mount["name"]]
        if "emptyDir" in volume:
            size = volume["emptyDir"]["sizeLimit"].replace("Gi", "g").replace("Mi", "m")
            flags += ["--tmpfs", f"{mount['mountPath']}:rw,exec,size={size},mode=1777"]
        else:
            read_only = ":ro" if mount.get("readOnly") else ""
            flags += ["-v", f"{folders[mount['name']]}:{mount['mountPath']}{read_only}"]
    for env in container.get("env", []):
        value = env.get("value")
        if value is None or value.startswith("k8s://") or env["name"] == "PYSPARK_SUBMIT_ARGS":
            continue
        flags += ["-e", f"{env['name']}={value}"]
    if spark:
        flags += ["-e", f"PYSPARK_SUBMIT_ARGS={spark}"]
    return flags


def spark_security(container: Manifest) -> list[str]:
    """The job's Spark security settings, from its manifest's ``PYSPARK_SUBMIT_ARGS``."""
    (args,) = [e["value"] for e in container["env"] if e["name"] == "PYSPARK_SUBMIT_ARGS"]
    conf = [arg for arg in args.split() if arg.startswith(SPARK_SECURITY)]
    assert "spark.authenticate=true" in conf and "spark.network.crypto.enabled=true" in conf
    assert "spark.io.encryption.enabled=true" in conf and "spark.ui.enabled=false" in conf
    return [f"--conf {c}" for c in conf]


def write_files(folder: Path, files: dict[str, str]) -> Path:
    """A Secret's or ConfigMap's keys as files, readable by the container's user."""
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
        (folder / name).chmod(0o444)
    return folder


@dataclasses.dataclass
class JobPod:
    """The job's pod as podman runs it: the host folders behind its volumes, and its flags."""

    image: str
    claim: Path
    flags: list[str]
    #: Spark's RPC port (the liveness probe's): one of its own, as other drivers run here.
    driver_port: int

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A one-shot command of the image in the job's pod (``status``, ``describe``)."""
        return subprocess.run(
            [*PODMAN, "run", *RUN_FLAGS, "--rm", *self.flags, self.image, *args],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    def status(self) -> dict[str, object]:
        done = self.run("status", "--json")
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    def describe(self, group: str) -> dict[tuple[str, int], int]:
        """Committed offsets of ``group`` as ``describe`` in a container of its own reads them."""
        done = self.run("describe", "--group", group, "--json")
        assert done.returncode == 0, done.stderr
        (described,) = json.loads(done.stdout)
        rows = described["partitions"]
        return {(row["topic"], row["partition"]): row["committed_offset"] for row in rows}


def job_pod(image: str, kafka_bootstrap: str, folder: Path) -> tuple[JobPod, JobConfig]:
    """job.yaml's pod: its configuration file without the sink's URL (a file of its Secret,
    as the sink: a SQLite file on the claim), Spark's secret, and the same configuration as
    the host's client sees it."""
    container = pod_container("consumer-offsets-job")
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claim = folder / "claim"
    claim.mkdir()
    claim.chmod(0o777)  # the pod's fsGroup makes it the user's
    inside = new_job_config(
        kafka_bootstrap, Path(mounts["checkpoint"]), prefix="container",
        sink_url=f"sqlite:///{mounts['checkpoint']}/offsets.db",
    )  # fmt: skip
    config_file = Path(str(env["CONSUMER_OFFSETS_CONFIG"]))
    assert str(config_file.parent) == mounts["config"]
    toml = write_config_file(inside, folder / "job.toml")
    settings = [line for line in toml.read_text().splitlines() if not line.startswith("sink_url")]
    sink_url = Path(str(env["CONSUMER_OFFSETS_SINK_URL_FILE"]))
    secret_file = Path(
        next(c.split("=")[1] for c in spark_security(container) if ".secret.file=" in c)
    )
    folders = {
        "config": write_files(folder / "config", {config_file.name: "\n".join(settings)}),
        "checkpoint": claim,
        "sink": write_files(folder / "sink", {sink_url.name: str(inside.sink_url)}),
        "spark-auth": write_files(folder / "spark", {secret_file.name: secrets.token_hex(32)}),
    }
    driver_port = free_port()
    # Spark takes its secret from a file only for a Kubernetes master; a driver in local mode,
    # as here, is given the same secret as a setting.
    conf = [c for c in spark_security(container) if ".secret.file=" not in c]
    conf += [
        f"--conf spark.authenticate.secret={(folders['spark-auth'] / secret_file.name).read_text()}"
    ]
    spark = " ".join([*conf, f"--conf spark.driver.port={driver_port}", "pyspark-shell"])
    host = dataclasses.replace(inside, sink_url=f"sqlite:///{claim / 'offsets.db'}")
    return JobPod(image, claim, pod_flags(container, folders, spark), driver_port), host


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def tcp_probe(port: int) -> None:
    """A kubelet's ``tcpSocket`` probe: the port accepts a connection."""
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def scrape_until(
    url: str, needle: str, context: ssl.SSLContext, password: str, timeout_s: float = 120.0
) -> str:
    """``url``'s body, fetched as user prometheus, once it holds ``needle``; fails the test
    at ``timeout_s``."""
    deadline, body = time.monotonic() + timeout_s, ""
    login = base64.b64encode(f"prometheus:{password}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {login}"})
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                body = response.read().decode()
        except OSError:
            body = ""
        if needle in body:
            return body
        time.sleep(2)
    raise AssertionError(f"{url} never showed {needle!r}; last body:\n{body[:2000]}")


def serve_pod(
    folder: Path, job: JobPod, kafka_bootstrap: str, port: int
) -> tuple[list[str], str, Path]:
    """serve.yaml's pod: its [serve] settings, its web config (TLS and a user, prometheus)
    with its certificate and key, the reader's URL; and the SQLite sink's folder beside them,
    where the job's claim holds it (PostgreSQL's stand-in). Returns its flags, the password
    and the CA that signed its certificate."""
    container = pod_container("consumer-offsets-serve")
    env = {e["name"]: e.get("value") for e in container["env"]}
    certificates = folder / "certificates"
    certificates.mkdir()
    ca, _ = make_certificates(certificates, "unused-store-password")
    password = secrets.token_hex(8)
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()
    web_config = (
        "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
        f"basic_auth_users:\n  prometheus: {hashed}\noperators: [prometheus]\n"
    )
    web_mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "web")
    settings = (
        f'bootstrap_servers = "{kafka_bootstrap}"\n[serve]\nhost = "127.0.0.1"\nport = {port}\n'
        f'cluster_name = "prod"\nweb_config_file = "{web_mount}/web-config.yml"\n'
    )
    reader_url = Path(str(env["CONSUMER_OFFSETS_SERVE_SINK_URL_FILE"]))
    sink = "/var/lib/sink"
    config_file = Path(str(env["CONSUMER_OFFSETS_SERVE_CONFIG"]))
    web = {
        "web-config.yml": web_config,
        "tls.crt": (certificates / "broker.pem").read_text(),
        "tls.key": (certificates / "broker.key").read_text(),
    }
    folders = {
        "config": write_files(folder / "serve-config", {config_file.name: settings}),
        "web": write_files(folder / "web", web),
        "sink": write_files(
            folder / "serve-sink", {reader_url.name: f"sqlite:///{sink}/offsets.db"}
        ),
    }
    return [*pod_flags(container, folders), "-v", f"{job.claim}:{sink}"], password, ca


def test_the_image_runs_the_job_serve_and_describe_as_the_manifests_run_them(
    image: str, kafka_bootstrap: str, tmp_path: Path, containers: list[str]
) -> None:
    pod, host = job_pod(image, kafka_bootstrap, tmp_path)
    prepare_topics(host)
    job = f"consumer-offsets-job-{uuid.uuid4().hex[:8]}"
    containers.append(job)
    args = pod_container("consumer-offsets-job")["args"]
    assert args[:2] == ["run", "--standby"], args
    podman("create", "--name", job, *RUN_FLAGS, *pod.flags, image, *args)
    podman("start", job)
    group, topic = unique_group("container"), "orders"

    with OffsetCommitClient(host) as client:
        try:
            client.commit(group, {(topic, 0): 42}, timeout_s=FIRST_ANSWER_S)
        except Exception:
            print(podman("logs", job).stderr[-5000:])
            raise
        assert pod.describe(group) == {(topic, 0): 42}
        # Its probes: the driver's RPC port open (liveness), the health check (readiness).
        tcp_probe(pod.driver_port)
        podman("healthcheck", "run", job, timeout=60)

        port = free_port()
        serve = f"consumer-offsets-serve-{uuid.uuid4().hex[:8]}"
        containers.append(serve)
        flags, password, ca = serve_pod(tmp_path, pod, kafka_bootstrap, port)
        serve_args = pod_container("consumer-offsets-serve")["args"]
        podman("run", "-d", "--name", serve, *RUN_FLAGS, *flags, image, *serve_args,
               "--log-end-interval", "1")  # fmt: skip
        tls = ssl.create_default_context(cafile=str(ca))
        url = f"https://127.0.0.1:{port}/metrics"
        metrics = scrape_until(url, f'consumergroup="{group}"', tls, password)
        (line,) = [
            m
            for m in metrics.splitlines()
            if m.startswith("kafka_consumergroup_current_offset{") and f'"{group}"' in m
        ]
        assert line.endswith(" 42"), line
        # Without the password: refused; serve.yaml's probes (a TCP connection) pass.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10, context=tls)
        assert refused.value.code == 401
        tcp_probe(port)

        # SIGTERM: the job stops cleanly (exit 0, status STOPPED) and keeps its checkpoint.
        before = pod.status()
        podman("stop", "-t", "90", job, timeout=120)
        state = json.loads(podman("inspect", job).stdout)[0]["State"]
        assert state["ExitCode"] == 0, podman("logs", job).stderr[-5000:]
        assert pod.status()["status"] == "STOPPED"

        # A commit sent while it is down is answered once it is back; nothing before is lost.
        pending = client.commit_async(group, {(topic, 1): 17}, timeout_s=FIRST_ANSWER_S)
        podman("start", job)
        pending.result(timeout=FIRST_ANSWER_S + 30)
    assert pod.describe(group) == {(topic, 0): 42, (topic, 1): 17}
    # Resumed from the checkpoint: batch ids go on from where they were, not from 0.
    after = pod.status()
    assert int(str(after["last_batch_id"])) > int(str(before["last_batch_id"])), (before, after)
