"""A real Apache Kafka broker on this machine, from the jars ``deploy/setup.sh`` resolved.

No Docker and no download at run time: each node is ``java -cp '.runtime/jars/kafka/*'
kafka.Kafka server.properties`` in KRaft mode, every node a combined broker and controller on
127.0.0.1. One node by default (broker 9092, controller 9093); ``--nodes 3`` gives a cluster
for fault tests, node *n* on broker port ``port + 2(n-1)`` and controller port one above it
(9092/9093, 9094/9095, 9096/9097).

Layout of the data dir (default ``.runtime/kafka/``)::

    cluster.json            the running configuration: nodes, ports, heap, cluster id
    node-<n>/server.properties
    node-<n>/data/          log.dirs: KRaft metadata and topic partitions
    node-<n>/logs/          server.log (log4j2) and kafka.out (the JVM's stdout/stderr)
    node-<n>/kafka.pid

Usage::

    python -m connectors.kafka_local start [--nodes 3] [--port 9092] [--data-dir DIR]
    python -m connectors.kafka_local status | stop
    python -m connectors.kafka_local stop-node 2 [--kill]    # fault tests
    python -m connectors.kafka_local start-node 2

Extra JVM options for the nodes can be given in ``$KAFKA_OPTS``, as with Kafka's own scripts.

``start`` while the same configuration runs reuses it ("already running at ..."); while another
configuration runs in the same data dir it refuses. When nothing runs and the configuration
changed, the data dir's nodes are formatted anew (their topics are lost: this is a local
development broker).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from string import Template

from connectors.runtime import kafka_jars_dir, project_home, runtime_dir

HOST = "127.0.0.1"
DEFAULT_PORT = 9092
#: Per node. A local broker with a few test topics peaks well under 300 MB.
DEFAULT_HEAP = "512m"
DEFAULT_START_TIMEOUT = 90.0
DEFAULT_STOP_TIMEOUT = 30.0

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

_CLUSTER_FILE = "cluster.json"
_LOG_TAIL_LINES = 40

log = logging.getLogger(__name__)


class KafkaLocalError(RuntimeError):
    """The local broker could not be started, stopped or reached."""


@dataclass(frozen=True)
class ClusterConfig:
    """What a local cluster runs with; stored as ``cluster.json`` in the data dir."""

    nodes: int = 1
    port: int = DEFAULT_PORT
    heap: str = DEFAULT_HEAP
    host: str = HOST
    cluster_id: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {self.nodes}")
        if not (self.port > 0 and self.port + 2 * self.nodes <= 65536):
            raise ValueError(f"port {self.port} leaves no room for {self.nodes} node(s)")

    @property
    def node_ids(self) -> range:
        return range(1, self.nodes + 1)

    def broker_port(self, node_id: int) -> int:
        return self.port + 2 * (node_id - 1)

    def controller_port(self, node_id: int) -> int:
        return self.broker_port(node_id) + 1

    def broker_address(self, node_id: int) -> str:
        return f"{self.host}:{self.broker_port(node_id)}"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.broker_address(n) for n in self.node_ids)

    @property
    def quorum_voters(self) -> str:
        return ",".join(f"{n}@{self.host}:{self.controller_port(n)}" for n in self.node_ids)

    @property
    def replication_factor(self) -> int:
        """Internal topics (offsets, transactions) are replicated to every node, up to 3."""
        return min(self.nodes, 3)


@dataclass(frozen=True)
class StartResult:
    config: ClusterConfig
    #: True when the cluster was already running and was left as it was.
    reused: bool
    seconds: float


@dataclass(frozen=True)
class NodeStatus:
    node_id: int
    pid: int | None
    broker_address: str
    controller_address: str

    @property
    def running(self) -> bool:
        return self.pid is not None


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 chars).

    Like Kafka's ``Uuid.randomUuid()``, never one that starts with ``-``: command-line tools
    (``kafka-storage format --cluster-id <id>``) would take it for an option.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not cluster_id.startswith("-"):
            return cluster_id


def default_data_dir() -> Path:
    return runtime_dir() / "kafka"


def free_port_block(count: int, host: str = HOST, attempts: int = 50) -> int:
    """First port of ``count`` consecutive ports that are free now on ``host``.

    Starts from an ephemeral port the kernel hands out, so parallel callers rarely collide; the
    broker binds the ports moments later, and a port lost in between makes its start fail loudly.
    """
    for _ in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            first = probe.getsockname()[1]
        if first + count <= 65536 and all(_port_free(host, p) for p in range(first, first + count)):
            return first
    raise KafkaLocalError(f"no block of {count} free ports found on {host}")


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _port_answers(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def wait_for_broker(
    bootstrap_servers: str,
    expected_node_ids: Sequence[int] | None = None,
    timeout: float = DEFAULT_START_TIMEOUT,
    alive: Callable[[], str | None] | None = None,
) -> None:
    """Block until the cluster answers a DescribeCluster request listing every expected node.

    ``alive`` is polled between attempts and returns an error text when a node died, which ends
    the wait at once instead of at the deadline.
    """
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
        if not _port_answers(host, int(port)):
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


def _deploy_kafka_dir() -> Path:
    for home in (project_home(), Path(__file__).resolve().parents[2]):
        candidate = home / "deploy" / "kafka"
        if (candidate / "server.properties.template").is_file():
            return candidate
    raise KafkaLocalError("deploy/kafka/server.properties.template not found")


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise KafkaLocalError("java not found: install a JDK 17+ or set JAVA_HOME")
    return java


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    if not path.is_file():
        return f"({path} does not exist)"
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 64 * 1024))
        text = handle.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


# Brokers started by this process, kept so they are reaped (no zombie answers "alive").
_children: dict[int, subprocess.Popen[bytes]] = {}


class LocalKafkaCluster:
    """The local cluster living in one data dir; every method is safe to call in any state."""

    def __init__(self, data_dir: Path | str | None = None) -> None:
        self.data_dir = Path(data_dir).resolve() if data_dir else default_data_dir()

    # -- paths -------------------------------------------------------------------------------
    def node_dir(self, node_id: int) -> Path:
        return self.data_dir / f"node-{node_id}"

    def server_properties(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "server.properties"

    def server_log(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "logs" / "server.log"

    def _stdout_log(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "logs" / "kafka.out"

    def _pid_file(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "kafka.pid"

    # -- state -------------------------------------------------------------------------------
    def config(self) -> ClusterConfig | None:
        """The configuration last started in this data dir, if any."""
        path = self.data_dir / _CLUSTER_FILE
        if not path.is_file():
            return None
        return ClusterConfig(**json.loads(path.read_text()))

    def pid(self, node_id: int) -> int | None:
        """The node's broker process id if it runs; a stale pid file is removed."""
        path = self._pid_file(node_id)
        try:
            pid = int(path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if self._is_our_broker(pid, node_id):
            return pid
        path.unlink(missing_ok=True)
        return None

    def running_nodes(self) -> dict[int, int]:
        config = self.config()
        if config is None:
            return {}
        pids = {n: self.pid(n) for n in config.node_ids}
        return {n: pid for n, pid in pids.items() if pid is not None}

    def status(self) -> list[NodeStatus]:
        config = self.config()
        if config is None:
            return []
        return [
            NodeStatus(
                node_id=n,
                pid=self.pid(n),
                broker_address=config.broker_address(n),
                controller_address=f"{config.host}:{config.controller_port(n)}",
            )
            for n in config.node_ids
        ]

    # -- start -------------------------------------------------------------------------------
    def start(
        self,
        nodes: int = 1,
        port: int | None = DEFAULT_PORT,
        heap: str = DEFAULT_HEAP,
        timeout: float = DEFAULT_START_TIMEOUT,
        echo: Callable[[str], None] = print,
    ) -> StartResult:
        """Start the cluster, or reuse it when the same configuration already runs.

        ``port=None`` means any free ports (tests), and reuses a running cluster whatever its
        ports. Raises :class:`KafkaLocalError` when another configuration runs here, a port is
        taken, or a node does not answer within ``timeout`` (the node's log tail is included).
        """
        started = time.monotonic()
        with self._lock():
            current = self.config()
            running = self.running_nodes()
            if current is not None and running:
                if not _same(current, nodes, port, heap):
                    raise KafkaLocalError(
                        f"a different local Kafka runs in {self.data_dir} "
                        f"({_describe(current)}); stop it first: "
                        f"python -m connectors.kafka.local stop --data-dir {self.data_dir}"
                    )
                down = [n for n in current.node_ids if n not in running]
                for node_id in down:
                    self._launch(current, node_id)
                self._wait_ready(current, current.node_ids, timeout)
                if not down:
                    echo(f"kafka: already running at {current.bootstrap_servers}")
                else:
                    echo(f"kafka: restarted node(s) {down} of {current.bootstrap_servers}")
                return StartResult(current, reused=not down, seconds=time.monotonic() - started)

            config = self._prepare(current, nodes, port, heap, echo)
            for node_id in config.node_ids:
                self._launch(config, node_id)
            try:
                self._wait_ready(config, config.node_ids, timeout)
            except BaseException:
                self._stop_nodes(config.node_ids, DEFAULT_STOP_TIMEOUT, kill=True)
                raise
            seconds = time.monotonic() - started
            echo(
                f"kafka: started {config.nodes} node(s) at {config.bootstrap_servers} "
                f"in {seconds:.1f} s (data in {self.data_dir})"
            )
            return StartResult(config, reused=False, seconds=seconds)

    def start_node(self, node_id: int, timeout: float = DEFAULT_START_TIMEOUT) -> bool:
        """Start one stopped node of the configured cluster; False if it already ran."""
        with self._lock():
            config = self._require_config()
            self._check_node(config, node_id)
            if self.pid(node_id) is not None:
                return False
            self._launch(config, node_id)
            self._wait_ready(config, [node_id], timeout)
            return True

    def _prepare(
        self,
        current: ClusterConfig | None,
        nodes: int,
        port: int | None,
        heap: str,
        echo: Callable[[str], None],
    ) -> ClusterConfig:
        """Choose ports, write server.properties and format storage when the config changed."""
        if (
            current is not None
            and _same(current, nodes, port, heap)
            and all(
                (self.node_dir(n) / "data" / "meta.properties").is_file() for n in current.node_ids
            )
        ):
            busy = self._busy_ports(current)
            if not busy:
                # Same cluster id and data; the template may have changed since the last start.
                for node_id in current.node_ids:
                    self._write_properties(current, node_id)
                return current
            if port is not None:
                raise KafkaLocalError(f"port(s) {busy} on {current.host} are already in use")
            # Any free port will do: move to new ones, which means formatting anew.
        if port is None:
            port = free_port_block(2 * nodes)
        config = ClusterConfig(nodes=nodes, port=port, heap=heap, cluster_id=new_cluster_id())
        busy = self._busy_ports(config)
        if busy:
            raise KafkaLocalError(
                f"port(s) {busy} on {config.host} are already in use: "
                "stop what listens there or pass another --port"
            )
        if current is not None:
            echo(f"kafka: configuration changed, formatting {self.data_dir} anew")
        # cluster.json goes first and comes back last: present, it vouches for the node dirs.
        (self.data_dir / _CLUSTER_FILE).unlink(missing_ok=True)
        for child in self.data_dir.glob("node-*"):
            shutil.rmtree(child)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for node_id in config.node_ids:
            self._write_properties(config, node_id)
        self._format(config)
        (self.data_dir / _CLUSTER_FILE).write_text(json.dumps(asdict(config), indent=2) + "\n")
        return config

    def _busy_ports(self, config: ClusterConfig) -> list[int]:
        ports = [
            p for n in config.node_ids for p in (config.broker_port(n), config.controller_port(n))
        ]
        return [p for p in ports if not _port_free(config.host, p)]

    def _write_properties(self, config: ClusterConfig, node_id: int) -> None:
        template = Template((_deploy_kafka_dir() / "server.properties.template").read_text())
        node = self.node_dir(node_id)
        (node / "data").mkdir(parents=True, exist_ok=True)
        (node / "logs").mkdir(parents=True, exist_ok=True)
        text = template.substitute(
            node_id=node_id,
            quorum_voters=config.quorum_voters,
            host=config.host,
            broker_port=config.broker_port(node_id),
            controller_port=config.controller_port(node_id),
            log_dirs=node / "data",
            replication_factor=config.replication_factor,
            # With 3 replicas, two in sync survive one node down; one node can only have one.
            internal_min_isr=min(config.replication_factor, 2),
            heartbeat_interval_ms=2000 if config.nodes == 1 else 1000,
            session_timeout_ms=9000 if config.nodes == 1 else 4000,
        )
        self.server_properties(node_id).write_text(text)

    def _format(self, config: ClusterConfig) -> None:
        """Format every node's log dir with the cluster id (the nodes run in parallel)."""
        runs = []
        for node_id in config.node_ids:
            command = [
                *self._java_command(config, node_id),
                STORAGE_TOOL_MAIN,
                "format",
                "--cluster-id",
                config.cluster_id,
                "--config",
                str(self.server_properties(node_id)),
            ]
            runs.append(
                (
                    node_id,
                    subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT),
                )
            )
        failures = []
        for node_id, run in runs:
            output, _ = run.communicate(timeout=120)
            if run.returncode != 0:
                failures.append(f"node {node_id}: {output.decode(errors='replace').strip()}")
        if failures:
            raise KafkaLocalError("formatting Kafka storage failed:\n" + "\n".join(failures))

    def _java_command(self, config: ClusterConfig, node_id: int) -> list[str]:
        jars = kafka_jars_dir()
        if not any(jars.glob("kafka_2.13-*.jar")):
            raise KafkaLocalError(
                f"the Kafka broker jars are missing from {jars}: "
                "run `bash deploy/setup.sh` from the repository root"
            )
        return [
            _java(),
            f"-Xmx{config.heap}",
            "-Xms128m",
            *JVM_FLAGS,
            *os.environ.get("KAFKA_OPTS", "").split(),
            f"-Dlog4j2.configurationFile={_deploy_kafka_dir() / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.node_dir(node_id) / 'logs'}",
            "-cp",
            f"{jars}/*",
        ]

    def _launch(self, config: ClusterConfig, node_id: int) -> None:
        for port in (config.broker_port(node_id), config.controller_port(node_id)):
            if not _port_free(config.host, port):
                raise KafkaLocalError(f"port {port} on {config.host} is already in use")
        command = [
            *self._java_command(config, node_id),
            BROKER_MAIN,
            str(self.server_properties(node_id)),
        ]
        stdout = self._stdout_log(node_id)
        stdout.parent.mkdir(parents=True, exist_ok=True)
        with stdout.open("ab") as out:
            # A session of its own: Ctrl-C in the shell that ran `start` must not stop the broker.
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.node_dir(node_id),
            )
        _children[process.pid] = process
        self._pid_file(node_id).write_text(f"{process.pid}\n")

    def _wait_ready(self, config: ClusterConfig, node_ids: Sequence[int], timeout: float) -> None:
        def dead_node() -> str | None:
            for node_id in node_ids:
                if self.pid(node_id) is None:
                    return (
                        f"Kafka node {node_id} exited during startup:\n{self._log_tails(node_id)}"
                    )
            return None

        try:
            wait_for_broker(
                ",".join(config.broker_address(n) for n in node_ids),
                expected_node_ids=node_ids,
                timeout=timeout,
                alive=dead_node,
            )
        except KafkaLocalError as error:
            if "exited during startup" in str(error):
                raise
            tails = "\n".join(self._log_tails(n) for n in node_ids)
            raise KafkaLocalError(f"{error}\n{tails}") from None

    def _log_tails(self, node_id: int) -> str:
        return (
            f"--- {self._stdout_log(node_id)} ---\n{_tail(self._stdout_log(node_id), 15)}\n"
            f"--- {self.server_log(node_id)} ---\n{_tail(self.server_log(node_id))}"
        )

    # -- stop --------------------------------------------------------------------------------
    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> list[int]:
        """Stop every node (SIGTERM, then SIGKILL after ``timeout``); the stopped node ids."""
        with self._lock():
            config = self.config()
            if config is None:
                return []
            return self._stop_nodes(config.node_ids, timeout, kill=False)

    def stop_node(
        self, node_id: int, timeout: float = DEFAULT_STOP_TIMEOUT, kill: bool = False
    ) -> bool:
        """Stop one node: gracefully (a controlled shutdown hands its leaderships over) or, with
        ``kill``, by SIGKILL as a crash would. False if it was not running."""
        with self._lock():
            config = self._require_config()
            self._check_node(config, node_id)
            return bool(self._stop_nodes([node_id], timeout, kill=kill))

    def _stop_nodes(self, node_ids: Sequence[int], timeout: float, kill: bool) -> list[int]:
        pids = {n: self.pid(n) for n in node_ids}
        targets = {n: pid for n, pid in pids.items() if pid is not None}
        for pid in targets.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_alive(pid) for pid in targets.values()):
            time.sleep(0.1)
        for node_id, pid in targets.items():
            if _alive(pid):
                log.warning("Kafka node %s (pid %s) ignored SIGTERM; killing it", node_id, pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                while _alive(pid):
                    time.sleep(0.05)
            _children.pop(pid, None)
            self._pid_file(node_id).unlink(missing_ok=True)
        return sorted(targets)

    # -- helpers -----------------------------------------------------------------------------
    def _require_config(self) -> ClusterConfig:
        config = self.config()
        if config is None:
            raise KafkaLocalError(f"no local Kafka was started in {self.data_dir}")
        return config

    @staticmethod
    def _check_node(config: ClusterConfig, node_id: int) -> None:
        if node_id not in config.node_ids:
            raise KafkaLocalError(f"node {node_id} is not one of {list(config.node_ids)}")

    def _is_our_broker(self, pid: int, node_id: int) -> bool:
        if not _alive(pid):
            return False
        if pid in _children:
            # Launched by this process. Its /proc cmdline may still be Python's for a moment
            # after fork, before exec: checking it would misjudge a starting broker.
            return True
        cmdline = Path(f"/proc/{pid}/cmdline")
        if not cmdline.exists():  # no procfs (macOS): trust the pid file
            return True
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            return False
        # A recycled pid belongs to some other program: only our broker has these arguments.
        return (
            BROKER_MAIN.encode() in args and str(self.server_properties(node_id)).encode() in args
        )

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Serialise start/stop across processes (two test runs, a test run and a shell)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with (self.data_dir / ".lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    child = _children.get(pid)
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


def _same(config: ClusterConfig, nodes: int, port: int | None, heap: str) -> bool:
    return config.nodes == nodes and config.heap == heap and port in (None, config.port)


def _describe(config: ClusterConfig) -> str:
    return f"{config.nodes} node(s) at {config.bootstrap_servers}, heap {config.heap}"


# -- command line --------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m connectors.kafka.local",
        description="Run a local Apache Kafka (KRaft) from the Maven-resolved jars.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data, logs and pid files (default: .runtime/kafka in the checkout)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", parents=[common], help="start (or reuse) the local cluster")
    start.add_argument("--nodes", type=int, default=1, help="combined broker+controller nodes")
    start.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="first broker port; node n listens on port+2(n-1), its controller one above",
    )
    start.add_argument("--heap", default=DEFAULT_HEAP, help="JVM -Xmx per node (default 512m)")
    start.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT)
    sub.add_parser("stop", parents=[common], help="stop every node")
    sub.add_parser("status", parents=[common], help="show nodes; exit 0 only if all run")
    stop_node = sub.add_parser("stop-node", parents=[common], help="stop one node (fault tests)")
    stop_node.add_argument("node", type=int)
    stop_node.add_argument("--kill", action="store_true", help="SIGKILL, as a crash would")
    start_node = sub.add_parser("start-node", parents=[common], help="start one stopped node")
    start_node.add_argument("node", type=int)
    start_node.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; exit status 0 on success. ``status`` exits 3 when nothing runs and 1
    when only some nodes run."""
    args = _parser().parse_args(argv)
    # Refused connections while a node starts or after one was stopped are expected here;
    # kafka-python would print each of them.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    cluster = LocalKafkaCluster(args.data_dir)
    try:
        if args.command == "start":
            cluster.start(nodes=args.nodes, port=args.port, heap=args.heap, timeout=args.timeout)
        elif args.command == "stop":
            stopped = cluster.stop()
            print(f"kafka: stopped node(s) {stopped}" if stopped else "kafka: not running")
        elif args.command == "status":
            return _print_status(cluster)
        elif args.command == "stop-node":
            done = cluster.stop_node(args.node, kill=args.kill)
            print(f"kafka: node {args.node} {'stopped' if done else 'was not running'}")
        elif args.command == "start-node":
            done = cluster.start_node(args.node, timeout=args.timeout)
            print(f"kafka: node {args.node} {'started' if done else 'already running'}")
    except KafkaLocalError as error:
        print(f"kafka: {error}", file=sys.stderr)
        return 1
    return 0


def _print_status(cluster: LocalKafkaCluster) -> int:
    config = cluster.config()
    nodes = cluster.status()
    up = [n for n in nodes if n.running]
    if config is None or not up:
        print(f"kafka: not running (data dir {cluster.data_dir})")
        return 3
    print(f"kafka: {len(up)}/{len(nodes)} node(s) running, cluster id {config.cluster_id}")
    for node in nodes:
        state = f"running (pid {node.pid})" if node.running else "stopped"
        print(
            f"  node {node.node_id}: {state}, broker {node.broker_address}, "
            f"controller {node.controller_address}"
        )
    print(f"bootstrap servers: {config.bootstrap_servers}")
    print(f"logs: {cluster.data_dir}/node-*/logs/server.log")
    return 0 if len(up) == len(nodes) else 1


if __name__ == "__main__":
    sys.exit(main())
