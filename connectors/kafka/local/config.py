"""What a local cluster runs with: nodes, ports, heap, cluster id; free ports on this machine."""

from __future__ import annotations

import base64
import contextlib
import random
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
DEFAULT_PORT = 9092
#: Per node: a local broker with a few test topics peaks well under 300 MB.
DEFAULT_HEAP = "512m"
DEFAULT_START_TIMEOUT = 90.0
DEFAULT_STOP_TIMEOUT = 30.0


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
        """Node ids 1..nodes."""
        return range(1, self.nodes + 1)

    def broker_port(self, node_id: int) -> int:
        """Node ``node_id``'s broker port: ``port + 2(node_id - 1)``."""
        return self.port + 2 * (node_id - 1)

    def controller_port(self, node_id: int) -> int:
        """Node ``node_id``'s controller port: one above its broker port."""
        return self.broker_port(node_id) + 1

    def broker_address(self, node_id: int) -> str:
        """``host:port`` of node ``node_id``'s broker listener."""
        return f"{self.host}:{self.broker_port(node_id)}"

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's address, comma-separated, for clients."""
        return ",".join(self.broker_address(n) for n in self.node_ids)

    @property
    def quorum_voters(self) -> str:
        """KRaft's ``controller.quorum.voters``: ``id@host:port`` of every node."""
        return ",".join(f"{n}@{self.host}:{self.controller_port(n)}" for n in self.node_ids)

    @property
    def replication_factor(self) -> int:
        """Internal topics (offsets, transactions) are replicated to every node, up to 3."""
        return min(self.nodes, 3)


@dataclass(frozen=True)
class StartResult:
    """What ``LocalKafkaCluster.start`` did: the configuration that runs, whether an already
    running cluster was reused, and how long it took."""

    config: ClusterConfig
    #: True when the cluster was already running and was left as it was.
    reused: bool
    seconds: float


@dataclass(frozen=True)
class NodeStatus:
    """One node as ``status`` shows it; ``pid`` is None when it does not run."""

    node_id: int
    pid: int | None
    broker_address: str
    controller_address: str

    @property
    def running(self) -> bool:
        """Whether the node's process is alive."""
        return self.pid is not None


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 chars), never
    starting with ``-`` (``kafka-storage format --cluster-id`` would take it for an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not cluster_id.startswith("-"):
            return cluster_id


#: Listeners' ports, below the kernel's ephemeral range: a port probed free inside it can be
#: taken by an outbound connection's local port before the broker binds it.
LISTENER_PORTS = range(20000, 32768)


def ephemeral_ports() -> range:
    """The kernel's range for outbound connections' local ports (Linux; 32768-60999 elsewhere)."""
    with contextlib.suppress(OSError, ValueError):
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    return range(32768, 61000)


def free_port_block(count: int, host: str = HOST, attempts: int = 200) -> int:
    """First port of ``count`` consecutive ports free now on ``host``, drawn at random from
    ``LISTENER_PORTS`` outside the ephemeral range (parallel callers rarely draw the same)."""
    ephemeral = ephemeral_ports()
    starts = range(LISTENER_PORTS.start, LISTENER_PORTS.stop - count + 1)
    outside = [p for p in starts if p + count <= ephemeral.start or p >= ephemeral.stop]
    candidates = outside or list(starts)  # a kernel whose ephemeral range covers them all
    # The system's generator: Hypothesis seeds the ``random`` module inside its tests.
    for first in random.SystemRandom().sample(candidates, min(attempts, len(candidates))):
        if all(port_free(host, p) for p in range(first, first + count)):
            return first
    raise KafkaLocalError(f"no block of {count} free ports found on {host}")


def port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now (nothing listens on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def port_answers(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (0.5 s connect timeout)."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False
