"""The brokers' JVM processes: the java executable, liveness, log tails, and waiting until the
cluster answers."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from connectors.kafka.local.config import DEFAULT_START_TIMEOUT, KafkaLocalError, port_answers
from connectors.runtime import project_home

#: Kafka's own G1 settings (kafka-run-class.sh), with GC threads capped: a 2-core machine may run
#: three nodes and Spark at once, and a 512 MB heap gains nothing from parallel GC threads.
JVM_FLAGS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:ParallelGCThreads=1",
    "-XX:ConcGCThreads=1",
    "-Djava.awt.headless=true",
)


BROKER_MAIN = "kafka.Kafka"
#: Kafka 4.1's `kafka-storage.sh` main class (Scala, in kafka_2.13).
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
LOG_TAIL_LINES = 40

# Brokers started by this process, kept so they are reaped (no zombie answers "alive").
started_processes: dict[int, subprocess.Popen[bytes]] = {}


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a child of this process is polled (and so reaped);
    another process counts as dead once it is gone or a zombie."""
    child = started_processes.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Exited children of another parent linger as zombies until reaped: not alive.
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def wait_for_broker(
    bootstrap_servers: str,
    expected_node_ids: Sequence[int] | None = None,
    timeout: float = DEFAULT_START_TIMEOUT,
    alive: Callable[[], str | None] | None = None,
) -> None:
    """Block until DescribeCluster lists every expected node; ``alive()`` returns an error text
    when a node died, which ends the wait at once."""
    from kafka.admin import KafkaAdminClient

    deadline = time.monotonic() + timeout
    first = bootstrap_servers.split(",")[0]
    host, _, port = first.rpartition(":")
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        failure = alive() if alive else None
        if failure:
            raise KafkaLocalError(failure)
        # A plain TCP probe first: kafka-python logs an error for every refused connection.
        if not port_answers(host, int(port)):
            time.sleep(0.2)
            continue
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap_servers,
                client_id="consumer-offsets-kafka-local",
                request_timeout_ms=5000,
            )
            try:
                brokers = {b["node_id"] for b in admin.describe_cluster()["brokers"]}
            finally:
                admin.close()
        except Exception as error:  # every client error means "not ready yet" until the deadline
            last_error = f"{type(error).__name__}: {error}"
            time.sleep(0.3)
            continue
        missing = set(expected_node_ids or ()) - brokers
        if not missing:
            return
        last_error = f"brokers {sorted(brokers)} registered, waiting for {sorted(missing)}"
        time.sleep(0.3)
    raise KafkaLocalError(
        f"Kafka at {bootstrap_servers} not ready after {timeout:.0f} s ({last_error})"
    )


def deploy_kafka_dir() -> Path:
    """``deploy/kafka`` (the broker's template) of the project home or of this checkout."""
    for home in (project_home(), Path(__file__).resolve().parents[3]):
        candidate = home / "deploy" / "kafka"
        if (candidate / "server.properties.template").is_file():
            return candidate
    raise KafkaLocalError("deploy/kafka/server.properties.template not found")


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when set, else ``java`` on the PATH; fails naming what to install."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise KafkaLocalError("java not found: install a JDK 17+ or set JAVA_HOME")
    return java


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file (read from its last 64 KiB), for error messages."""
    if not path.is_file():
        return f"({path} does not exist)"
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 64 * 1024))
        text = handle.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])
