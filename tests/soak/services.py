"""The soak's services, each of its own: a 3-node KRaft cluster on free ports, a durable
PostgreSQL (when the sink is PostgreSQL), the job's driver, the mirror and ``serve`` as separate
process groups — started, killed, restarted and found (pids) for sampling.

Nothing here touches a shared broker or database: the cluster lives in ``<runtime>/kafka``, the
PostgreSQL cluster is a throwaway one (``tests.fixtures.postgres.local_postgres``), the job's
topics are named ``soak-<random>.*``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from connectors.kafka.local import LocalKafkaCluster, free_port_block
from connectors.sinks import SinkError, open_sink
from streaming.config import JobConfig
from tests.fixtures.job import new_job_config, prepare_topics
from tests.fixtures.postgres import PostgresServer, local_postgres, with_query
from tests.reliability.load import DriverProcess
from tests.streaming.helpers import mirror_command

#: Table prefix of the mirror's tables in the job's sink database.
MIRROR_PREFIX = "mirror_"
#: The data topic Kafka's own consumer groups read (and commit offsets of).
DATA_TOPIC = "soak-data"


#: The standby driver's flag, and the log line of a driver that took the job's lease.
STANDBY = ("--standby",)
LEASE_ACQUIRED = "lease job acquired"

#: Heap of each broker, and of the job's and the mirror's driver JVMs (the job's executors run
#: inside its driver, local mode).
BROKER_HEAP = "512m"
DRIVER_HEAP = "1g"


class ServiceProcess(DriverProcess):
    """A command run as its own process group (the mirror, ``serve``): killed and restarted
    like the driver (:class:`tests.reliability.load.DriverProcess`)."""

    def __init__(
        self, command: list[str], log_path: Path, env: dict[str, str] | None = None
    ) -> None:
        super().__init__(config=None, log_path=log_path)  # type: ignore[arg-type]
        self.command = command
        self.env = env or {}

    def start(self) -> None:
        if self.running:
            raise RuntimeError("already running")
        log = self.log_path.open("ab")
        log.write(f"\n=== start {self.starts + 1} ===\n".encode())
        log.flush()
        self._log = log
        self.process = subprocess.Popen(
            self.command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **self.env),
        )
        self.starts += 1


@dataclass
class Services:
    """Every service of one soak run; :meth:`close` stops all of them."""

    runtime: Path
    sink_kind: str
    shards: int
    #: The job's and the mirror's ``--history-retention-ms``; None: their default (7 days).
    history_retention_ms: int | None
    request_timeout_ms: int = 60_000
    sink_write_timeout_s: int = 60
    #: Run a warm standby driver (``--standby``) beside the job's active driver.
    with_standby: bool = False
    cluster: LocalKafkaCluster = field(init=False)
    bootstrap: str = field(init=False, default="")
    config: JobConfig = field(init=False)
    #: The job's active driver (the lease holder), and its warm standby if any.
    job: DriverProcess = field(init=False)
    standby: DriverProcess | None = field(init=False, default=None)
    mirror: ServiceProcess = field(init=False)
    serve: ServiceProcess = field(init=False)
    serve_port: int = field(init=False, default=0)
    postgres: PostgresServer | None = field(init=False, default=None)
    database_url: str | None = field(init=False, default=None)
    _exits: contextlib.ExitStack = field(init=False, default_factory=contextlib.ExitStack)

    # -- start -------------------------------------------------------------------------------
    def start(self, echo: Any = print) -> None:
        self.runtime.mkdir(parents=True, exist_ok=True)
        # Every JVM runs with a fixed, pre-touched heap (-Xms = -Xmx), as long-running JVM
        # services usually do: its PSS is then the heap plus native memory from the start, and
        # what the growth rule sees growing is native (RocksDB, metaspace, buffers, threads), not
        # the heap expanding towards -Xmx. The heap itself is bounded by -Xmx; a leak there ends
        # in an OutOfMemoryError, an exit the harness reports.
        os.environ["KAFKA_OPTS"] = f"-Xms{BROKER_HEAP} -XX:+AlwaysPreTouch"
        os.environ["SPARK_DRIVER_MEMORY"] = DRIVER_HEAP
        os.environ["PYSPARK_SUBMIT_ARGS"] = (
            f"--conf 'spark.driver.defaultJavaOptions=-Xms{DRIVER_HEAP} -XX:+AlwaysPreTouch'"
            " pyspark-shell"
        )
        self.cluster = LocalKafkaCluster(self.runtime / "kafka")
        self._exits.callback(self.cluster.stop)
        result = self.cluster.start(nodes=3, port=free_port_block(6), heap=BROKER_HEAP, echo=echo)
        self.bootstrap = result.config.bootstrap_servers
        if self.sink_kind == "postgres":
            self.database_url = self._exits.enter_context(local_postgres(durable=True))
            self.postgres = PostgresServer(self.database_url)
            job_sink = with_query(self.database_url, table_prefix="soak_")
            mirror_sink = with_query(self.database_url, table_prefix=MIRROR_PREFIX)
        else:
            db = self.runtime / "offsets.db"
            job_sink = f"sqlite:///{db}"
            mirror_sink = f"sqlite:///{db}?table_prefix={MIRROR_PREFIX}"
        self.config = new_job_config(
            self.bootstrap,
            self.runtime,
            job_sink,
            prefix="soak",
            partitions=self.shards,
            replication_factor=3,
            min_insync_replicas=2,
            keep_history=True,
            trigger_interval="100 milliseconds",
            sink_write_timeout_s=self.sink_write_timeout_s,
            request_timeout_ms=self.request_timeout_ms,
        )
        prepare_topics(self.config)
        self._create_data_topic()
        # The driver's flags come from tests.reliability.load.job_command; what it does not
        # pass goes through the job's CONSUMER_OFFSETS_* environment.
        os.environ["CONSUMER_OFFSETS_KEEP_HISTORY"] = "true"
        os.environ["CONSUMER_OFFSETS_SINK_WRITE_TIMEOUT_S"] = str(self.sink_write_timeout_s)
        os.environ["CONSUMER_OFFSETS_REQUEST_TIMEOUT_MS"] = str(self.request_timeout_ms)
        if self.history_retention_ms is None:  # the job's own default, whatever the shell says
            os.environ.pop("CONSUMER_OFFSETS_HISTORY_RETENTION_MS", None)
        else:
            os.environ["CONSUMER_OFFSETS_HISTORY_RETENTION_MS"] = str(self.history_retention_ms)
        self.job = DriverProcess(self.config, self.runtime / "driver.log")
        self._exits.callback(self.job.stop)
        self.job.start()
        if self.with_standby:
            self.job.wait_for_log(LEASE_ACQUIRED, 300)  # the active first: it holds the lease
            self.standby = DriverProcess(self.config, self.runtime / "standby.log", STANDBY)
            self._exits.callback(self.standby.stop)
            self.standby.start()

        mirror = mirror_command(
            self.bootstrap, mirror_sink, str(self.runtime / "mirror-checkpoint"), "1 second"
        )
        mirror += ["--cluster-name", "soak"]
        if self.history_retention_ms is not None:
            mirror += ["--history-retention-ms", str(self.history_retention_ms)]
        self.mirror = ServiceProcess(mirror, self.runtime / "mirror.log")
        self._exits.callback(self.mirror.stop)
        self.mirror.start()

        self.serve_port = free_port_block(1)
        cli = str(Path(sys.executable).parent / "consumer-offsets")
        serve = [
            cli,
            "serve",
            "--sink-url",
            job_sink,
            "--bootstrap-servers",
            self.bootstrap,
            "--port",
            str(self.serve_port),
            "--cluster-name",
            "soak",
        ]
        self.serve = ServiceProcess(serve, self.runtime / "serve.log")
        self._exits.callback(self.serve.stop)
        self.serve.start()

    def _create_data_topic(self) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap.split(","))
        try:
            admin.create_topics([NewTopic(DATA_TOPIC, 6, 3)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()

    @property
    def mirror_sink_url(self) -> str:
        return str(self.mirror.command[self.mirror.command.index("--sink-url") + 1])

    def close(self) -> None:
        self._exits.close()

    def take_over(self) -> None:
        """After the active driver died: the standby is the active now (it takes the lease),
        and the dead one comes back as the standby."""
        if self.standby is None:
            raise RuntimeError("no standby")
        dead, self.job, self.standby = self.job, self.standby, self.job
        dead.start(STANDBY)

    # -- what the sampler reads --------------------------------------------------------------
    def processes(self) -> dict[str, int]:
        """Role → pid of each top-level process that runs now (children found by the sampler)."""
        out: dict[str, int] = {}
        roles = (("driver", self.job), ("standby", self.standby), ("mirror", self.mirror))
        for role, service in (*roles, ("serve", self.serve)):
            if service is not None and service.running and service.process is not None:
                out[role] = service.process.pid
        for node, pid in self.cluster.running_nodes().items():
            out[f"broker{node}"] = pid
        postmaster = self.postmaster_pid()
        if postmaster is not None:
            out["postgres"] = postmaster
        return out

    def postmaster_pid(self) -> int | None:
        if self.postgres is None:
            return None
        with contextlib.suppress(OSError, ValueError):
            pid = int((Path(self.postgres.data) / "postmaster.pid").read_text().split()[0])
            if Path(f"/proc/{pid}").exists():
                return pid
        return None

    def job_status(self) -> Any:
        """The job sink's status row, or None while the sink cannot be read."""
        try:
            with open_sink(self.config.sink_url, read_only=True) as sink:
                return sink.status()
        except (SinkError, OSError):
            return None

    def mirror_status(self) -> Any:
        try:
            with open_sink(self.mirror_sink_url, read_only=True) as sink:
                return sink.status()
        except (SinkError, OSError):
            return None

    def scrape_metrics(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """GET serve's /metrics: whether it answered, how long it took, its size and the job's
        state keys as it reports them."""
        started = time.monotonic()
        url = f"http://127.0.0.1:{self.serve_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                body = response.read()
                ok = response.status == 200
        except OSError as error:
            return {"ok": False, "seconds": time.monotonic() - started, "error": str(error)}
        keys = None
        for line in body.decode(errors="replace").splitlines():
            if line.startswith("consumer_offsets_state_keys"):
                keys = float(line.rsplit(" ", 1)[1])
        return {
            "ok": ok,
            "seconds": time.monotonic() - started,
            "bytes": len(body),
            "state_keys": keys,
        }


def wait_for_first_batch(services: Services, timeout_s: float = 900.0) -> float:
    """Wait until the job's sink has a first batch; the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        services.job.check_alive()
        status = services.job_status()
        if status is not None and status.last_batch_id >= 0:
            return time.monotonic() - started
        time.sleep(1)
    raise AssertionError(f"the job wrote no batch within {timeout_s:.0f} s")
