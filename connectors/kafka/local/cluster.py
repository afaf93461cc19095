"""``LocalKafkaCluster``: the nodes of one data dir, started, stopped and inspected safely in any
state (a file lock serialises start and stop across processes)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from string import Template

from connectors.kafka.local.config import (
    DEFAULT_HEAP,
    DEFAULT_PORT,
    DEFAULT_START_TIMEOUT,
    DEFAULT_STOP_TIMEOUT,
    ClusterConfig,
    KafkaLocalError,
    NodeStatus,
    StartResult,
    free_port_block,
    new_cluster_id,
    port_free,
)
from connectors.kafka.local.process import (
    BROKER_MAIN,
    JVM_FLAGS,
    STORAGE_TOOL_MAIN,
    deploy_kafka_dir,
    java_executable,
    log_tail,
    process_alive,
    started_processes,
    wait_for_broker,
)
from connectors.runtime import kafka_jars_dir, runtime_dir

log = logging.getLogger(__name__)

CLUSTER_FILE = "cluster.json"


class LocalKafkaCluster:
    """The local cluster living in one data dir; every method is safe to call in any state."""

    def __init__(
        self,
        data_dir: Path | str | None = None,
        *,
        extra_properties: Mapping[str, str] | None = None,
        scram_credentials: Sequence[str] = (),
    ) -> None:
        """``extra_properties`` are appended to every ``server.properties`` (a later key wins);
        ``scram_credentials`` are ``kafka-storage format --add-scram`` arguments. Neither is
        stored in ``cluster.json``: pass them on every start."""
        self.data_dir = Path(data_dir).resolve() if data_dir else runtime_dir() / "kafka"
        self.extra_properties = dict(extra_properties or {})
        self.scram_credentials = tuple(scram_credentials)

    def node_dir(self, node_id: int) -> Path:
        """The folder of node ``node_id``: its properties, data, logs and pid file."""
        return self.data_dir / f"node-{node_id}"

    def server_properties(self, node_id: int) -> Path:
        """The node's ``server.properties``, written from ``deploy/kafka``'s template."""
        return self.node_dir(node_id) / "server.properties"

    def server_log(self, node_id: int) -> Path:
        """The node's log4j2 ``server.log``."""
        return self.node_dir(node_id) / "logs" / "server.log"

    def _stdout_log(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "logs" / "kafka.out"

    def _pid_file(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "kafka.pid"

    def config(self) -> ClusterConfig | None:
        """The configuration last started in this data dir, if any."""
        path = self.data_dir / CLUSTER_FILE
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
        """Node id → pid of every node of the stored configuration that runs now."""
        config = self.config()
        if config is None:
            return {}
        pids = {n: self.pid(n) for n in config.node_ids}
        return {n: pid for n, pid in pids.items() if pid is not None}

    def status(self) -> list[NodeStatus]:
        """Every node of the stored configuration, running or not (empty when none was started)."""
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

    def start(
        self,
        nodes: int = 1,
        port: int | None = DEFAULT_PORT,
        heap: str = DEFAULT_HEAP,
        timeout: float = DEFAULT_START_TIMEOUT,
        echo: Callable[[str], None] = print,
    ) -> StartResult:
        """Start the cluster, or reuse it when the same configuration runs (``port=None``: any
        free ports, and any running cluster's). :class:`KafkaLocalError` when another runs here,
        a port is taken, or a node does not answer in ``timeout`` (with its log tail)."""
        started = time.monotonic()
        with self._lock():
            current = self.config()
            running = self.running_nodes()
            if current is not None and running:
                if not _same(current, nodes, port, heap):
                    raise KafkaLocalError(
                        f"a different local Kafka runs in {self.data_dir} "
                        f"({current.nodes} node(s) at {current.bootstrap_servers}, heap "
                        f"{current.heap}); stop it first: "
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
            config = self._node_config(node_id)
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
        (self.data_dir / CLUSTER_FILE).unlink(missing_ok=True)
        for child in self.data_dir.glob("node-*"):
            shutil.rmtree(child)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for node_id in config.node_ids:
            self._write_properties(config, node_id)
        self._format(config)
        (self.data_dir / CLUSTER_FILE).write_text(json.dumps(asdict(config), indent=2) + "\n")
        return config

    def _busy_ports(self, config: ClusterConfig) -> list[int]:
        ports = [
            p for n in config.node_ids for p in (config.broker_port(n), config.controller_port(n))
        ]
        return [p for p in ports if not port_free(config.host, p)]

    def _write_properties(self, config: ClusterConfig, node_id: int) -> None:
        template = Template((deploy_kafka_dir() / "server.properties.template").read_text())
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
        if self.extra_properties:
            text += "\n# Extra properties of this cluster (a later key wins).\n"
            text += "".join(f"{key}={value}\n" for key, value in self.extra_properties.items())
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
            for credential in self.scram_credentials:
                command += ["--add-scram", credential]
            run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            runs.append((node_id, run))
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
            java_executable(),
            f"-Xmx{config.heap}",
            "-Xms128m",
            *JVM_FLAGS,
            *os.environ.get("KAFKA_OPTS", "").split(),
            f"-Dlog4j2.configurationFile={deploy_kafka_dir() / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.node_dir(node_id) / 'logs'}",
            "-cp",
            f"{jars}/*",
        ]

    def _launch(self, config: ClusterConfig, node_id: int) -> None:
        for port in (config.broker_port(node_id), config.controller_port(node_id)):
            if not port_free(config.host, port):
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
        started_processes[process.pid] = process
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
            f"--- {self._stdout_log(node_id)} ---\n{log_tail(self._stdout_log(node_id), 15)}\n"
            f"--- {self.server_log(node_id)} ---\n{log_tail(self.server_log(node_id))}"
        )

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
            self._node_config(node_id)  # KafkaLocalError for a node it lacks
            return bool(self._stop_nodes([node_id], timeout, kill=kill))

    def _stop_nodes(self, node_ids: Sequence[int], timeout: float, kill: bool) -> list[int]:
        pids = {n: self.pid(n) for n in node_ids}
        targets = {n: pid for n, pid in pids.items() if pid is not None}
        for pid in targets.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(process_alive(pid) for pid in targets.values()):
            time.sleep(0.1)
        for node_id, pid in targets.items():
            if process_alive(pid):
                log.warning("Kafka node %s (pid %s) ignored SIGTERM; killing it", node_id, pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                while process_alive(pid):
                    time.sleep(0.05)
            started_processes.pop(pid, None)
            self._pid_file(node_id).unlink(missing_ok=True)
        return sorted(targets)

    def _node_config(self, node_id: int) -> ClusterConfig:
        """The stored configuration, which must have node ``node_id``."""
        config = self.config()
        if config is None:
            raise KafkaLocalError(f"no local Kafka was started in {self.data_dir}")
        if node_id not in config.node_ids:
            raise KafkaLocalError(f"node {node_id} is not one of {list(config.node_ids)}")
        return config

    def _is_our_broker(self, pid: int, node_id: int) -> bool:
        if not process_alive(pid):
            return False
        if pid in started_processes:
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


def _same(config: ClusterConfig, nodes: int, port: int | None, heap: str) -> bool:
    return config.nodes == nodes and config.heap == heap and port in (None, config.port)
