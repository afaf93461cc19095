"""Kafka's own coordinator failover, the yardstick of ``bench_recovery --standby``: SIGKILL of
the broker coordinating a group → that group's first acknowledged commit.

    python -m tests.bench.bench_coordinator_failover [--kills 5] [--rate 100] [--partitions 10]
                                                     [--session-timeout-ms 9000] [--json FILE]

A 3-node KRaft cluster of its own (each node broker and controller, ``__consumer_offsets``
replicated 3 times, Kafka's default ``broker.session.timeout.ms`` of 9 s, no preferred-leader
moves: a window holds the crash alone) takes a steady load of commits through Kafka's
coordinator: ``--rate`` OffsetCommit requests/s of ``--partitions`` partitions each (default
100 x 10: 1,000 offsets/s; librdkafka's ``alter_consumer_group_offsets``, generation -1 like a
standalone consumer's commit), round-robin over 4 groups of one ``__consumer_offsets``
partition, so that one coordinator serves every commit as one job answers every request. A
request that fails is sent again until acknowledged, as ``commitSync`` retries (backoff 100 ms
doubling to 1 s); its ack latency runs from its first send.

Per kill: the groups' coordinator (the leader of their ``__consumer_offsets`` partition) is
SIGKILLed; kill → the first acknowledged commit of the measured group sent after the kill; the
ack p99 of the requests sent from 5 s before the kill to 25 s after it. The node is restarted
after that window, and the next kill waits until every ``__consumer_offsets`` partition has its
3 replicas in sync. The window's p99 is librdkafka's more than Kafka's: its admin client keeps
requests for the dead coordinator waiting for that node until it is back.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import heapq
import itertools
import json
import math
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from connectors.kafka.local import LocalKafkaCluster
from connectors.runtime import runtime_dir
from state.coordinator.partitioner import partition_for
from tests.bench.bench_recovery import WINDOW_AFTER_S, WINDOW_BEFORE_S
from tests.bench.load import group_positions
from tests.bench.results import print_and_save
from tests.reliability.support import wait_until

NODES = 3
GROUPS = 4
OFFSETS_TOPIC = "__consumer_offsets"
TOPIC = "bench-coordinator-failover"
#: One attempt's bound, librdkafka's wait for a coordinator included; then it is sent again.
#: Longer than a failover: librdkafka 2.16 aborts (an assertion in rd_kafka_enq_once) when
#: admin requests time out while they wait for a coordinator.
ATTEMPT_TIMEOUT_S = 60.0
#: The Java consumer's retry.backoff.ms and retry.backoff.max.ms.
BACKOFF_S = 0.1
MAX_BACKOFF_S = 1.0


@dataclass
class Commit:
    """One OffsetCommit request; times are epoch seconds."""

    group: str
    offsets: list[TopicPartition]
    sent_at: float
    attempts: int = 0
    acked_at: float | None = None


@dataclass(frozen=True)
class Kill:
    kill: int
    #: The node killed (the groups' coordinator) and the one coordinating them after.
    node: int
    new_coordinator: int
    #: Whether the node killed was also the active KRaft controller (nodes are both).
    was_controller: bool
    killed_at: float
    ack_s: float
    #: p99 of the ack latency of the requests sent in the kill's window.
    window_ack_p99_s: float | None = None


class CoordinatorLoad:
    """``rate`` OffsetCommit requests/s through Kafka's coordinator, round-robin over ``groups``,
    each sent again after a failure until acknowledged."""

    def __init__(
        self, admin: AdminClient, groups: Sequence[str], rate: float, partitions: int
    ) -> None:
        self.admin = admin
        self.groups = list(groups)
        self.rate = rate
        self.partitions = partitions
        #: In send order (``sent_at`` ascending); appended by the sending thread only.
        self.commits: list[Commit] = []
        self.errors: Counter[str] = Counter()
        self._retries: list[tuple[float, int, Commit]] = []  # (monotonic due, tie, commit)
        self._tie = itertools.count()
        self._lock = threading.Lock()
        self._sending = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="coordinator-load", daemon=True)

    def start(self) -> None:
        self._sending.set()
        self._thread.start()

    def stop_sending(self) -> None:
        """No new requests; the failed ones are still sent again until :meth:`close`."""
        self._sending.clear()

    def close(self) -> None:
        self._sending.clear()
        self._closed.set()
        self._thread.join()

    def all_acknowledged(self) -> bool:
        return all(c.acked_at is not None for c in list(self.commits))

    def first_ack_after(self, group: str, at: float) -> float | None:
        """When the first request of ``group`` sent at or after ``at`` was acknowledged."""
        acks = []
        for c in reversed(list(self.commits)):
            if c.sent_at < at:
                break
            if c.group == group and c.acked_at is not None:
                acks.append(c.acked_at)
        return min(acks, default=None)

    def ack_p99(self, start: float, end: float) -> float | None:
        """p99 of the ack latency of the (acknowledged) requests sent from ``start`` to ``end``."""
        latencies = sorted(
            c.acked_at - c.sent_at
            for c in list(self.commits)
            if start <= c.sent_at <= end and c.acked_at is not None
        )
        if not latencies:
            return None
        return latencies[min(len(latencies) - 1, math.ceil(0.99 * len(latencies)) - 1)]

    def _run(self) -> None:
        started = time.monotonic()
        sent = 0
        while not self._closed.is_set():
            for commit in self._due_retries():
                self._send(commit)
            next_new = started + sent / self.rate
            if self._sending.is_set() and time.monotonic() >= next_new:
                self._send(self._new_commit(sent))
                sent += 1
                continue
            with self._lock:
                wake = min(next_new, self._retries[0][0]) if self._retries else next_new
            # Retries come due 100 ms after a failure at the earliest: the next new request,
            # 10 ms away, wakes this loop first while sending.
            self._closed.wait(min(0.05, max(0.0, wake - time.monotonic())))

    def _new_commit(self, sequence: int) -> Commit:
        group = self.groups[sequence % len(self.groups)]
        positions = group_positions(group, self.partitions, sequence)
        offsets = [TopicPartition(TOPIC, p, o) for p, o in enumerate(positions)]
        commit = Commit(group, offsets, time.time())
        self.commits.append(commit)
        return commit

    def _due_retries(self) -> list[Commit]:
        now = time.monotonic()
        due = []
        with self._lock:
            while self._retries and self._retries[0][0] <= now:
                due.append(heapq.heappop(self._retries)[2])
        return due

    def _send(self, commit: Commit) -> None:
        commit.attempts += 1
        request = ConsumerGroupTopicPartitions(commit.group, commit.offsets)
        try:
            future = self.admin.alter_consumer_group_offsets(
                [request], request_timeout=ATTEMPT_TIMEOUT_S
            )[commit.group]
        except KafkaException as error:
            self._retry_later(commit, [error.args[0].name()])
            return
        future.add_done_callback(lambda f: self._settle(commit, f))

    def _settle(self, commit: Commit, future: Future[Any]) -> None:
        """On librdkafka's thread: acknowledged, or due again after the backoff."""
        at = time.time()
        try:
            answered = future.result()
            failed = [tp.error.name() for tp in answered.topic_partitions if tp.error]
        except KafkaException as error:
            failed = [error.args[0].name()]
        if failed:
            self._retry_later(commit, failed)
        else:
            commit.acked_at = at

    def _retry_later(self, commit: Commit, errors: list[str]) -> None:
        backoff = min(BACKOFF_S * 2 ** (commit.attempts - 1), MAX_BACKOFF_S)
        with self._lock:
            self.errors.update(set(errors))
            heapq.heappush(self._retries, (time.monotonic() + backoff, next(self._tie), commit))


def groups_of_one_coordinator(count: int) -> list[str]:
    """``count`` group ids of one ``__consumer_offsets`` partition: one coordinator for all."""
    names = (f"bench-failover-{i}" for i in itertools.count())
    first = next(names)
    same = (n for n in names if partition_for(n) == partition_for(first))
    return [first, *itertools.islice(same, count - 1)]


def offsets_partitions(admin: AdminClient) -> dict[int, Any]:
    """``__consumer_offsets``'s partitions as the cluster's metadata shows them (none yet: {})."""
    try:
        topic = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics.get(OFFSETS_TOPIC)
    except KafkaException as error:
        print(f"metadata of {OFFSETS_TOPIC}: {error}", flush=True)
        return {}
    return {} if topic is None or topic.error is not None else dict(topic.partitions)


def coordinator(admin: AdminClient, group: str) -> int:
    """The node coordinating ``group``: the leader of its ``__consumer_offsets`` partition."""
    leaders: list[int] = []

    def known() -> bool:
        partition = offsets_partitions(admin).get(partition_for(group))
        leaders[:] = [] if partition is None or partition.leader < 0 else [partition.leader]
        return bool(leaders)

    wait_until(known, 60, f"the coordinator of {group}", None, 0.2)
    return int(leaders[0])


def offsets_topic_in_sync(admin: AdminClient) -> bool:
    """Whether every ``__consumer_offsets`` partition has all its replicas in sync."""
    partitions = offsets_partitions(admin)
    return bool(partitions) and all(len(p.isrs) == NODES for p in partitions.values())


def active_controller(cluster: LocalKafkaCluster) -> int | None:
    """The KRaft quorum's leader, as the nodes' ``quorum-state`` files last recorded it."""
    states = []
    for node in cluster.running_nodes():
        path = cluster.node_dir(node) / "data" / "__cluster_metadata-0" / "quorum-state"
        with contextlib.suppress(OSError, ValueError):
            states.append(json.loads(path.read_text()))
    latest = max(states, key=lambda state: state.get("leaderEpoch", -1), default={})
    leader = latest.get("leaderId", -1)
    return leader if leader >= 0 else None


def start_cluster(folder: Path, session_timeout_ms: int) -> tuple[LocalKafkaCluster, str]:
    """The 3-node cluster in ``folder``, with Kafka's broker session defaults unless told."""
    properties = {
        "broker.session.timeout.ms": str(session_timeout_ms),
        "broker.heartbeat.interval.ms": str(min(2000, session_timeout_ms // 4)),
        # A restarted node would take its leaderships back at the next check (every 300 s):
        # a second coordinator move, not a crash, inside some window.
        "auto.leader.rebalance.enable": "false",
    }
    cluster = LocalKafkaCluster(folder, extra_properties=properties)
    started = cluster.start(nodes=NODES, port=None)
    return cluster, started.config.bootstrap_servers


def measure(
    cluster: LocalKafkaCluster, admin: AdminClient, load: CoordinatorLoad, kills: int
) -> list[Kill]:
    """``kills`` SIGKILLs of the coordinator of ``load``'s groups, each node restarted after;
    ``admin`` asks the metadata (a client of its own: the load's queues behind its requests)."""
    measured = load.groups[0]
    out: list[Kill] = []
    for kill in range(1, kills + 1):
        wait_until(lambda: offsets_topic_in_sync(admin), 300, "replicas in sync", None, 1)
        wait_for_ack(load, measured, time.time(), "a commit")
        time.sleep(WINDOW_BEFORE_S + 1)
        node = coordinator(admin, measured)
        was_controller = active_controller(cluster) == node
        killed_at = time.time()
        cluster.stop_node(node, kill=True)
        acked_at = wait_for_ack(load, measured, killed_at, "a commit after the kill")
        new = coordinator(admin, measured)
        out.append(Kill(kill, node, new, was_controller, killed_at, acked_at - killed_at))
        print(_line(out[-1]), flush=True)
        time.sleep(max(0.0, killed_at + WINDOW_AFTER_S - time.time()))
        cluster.start_node(node)
    return out


def wait_for_ack(load: CoordinatorLoad, group: str, after: float, what: str) -> float:
    """When the first request of ``group`` sent at or after ``after`` was acknowledged."""
    found: list[float] = []

    def acknowledged() -> bool:
        at = load.first_ack_after(group, after)
        found[:] = [] if at is None else [at]
        return at is not None

    wait_until(acknowledged, 300, what, None, 0.1)
    return found[0]


def run(
    folder: Path, kills: int, rate: float, partitions: int, session_timeout_ms: int
) -> dict[str, Any]:
    cluster, bootstrap = start_cluster(folder, session_timeout_ms)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, partitions, NODES)])[TOPIC].result(60)
        load_admin = AdminClient({"bootstrap.servers": bootstrap})
        load = CoordinatorLoad(load_admin, groups_of_one_coordinator(GROUPS), rate, partitions)
        load.start()
        try:
            measured = measure(cluster, admin, load, kills)
            load.stop_sending()
            wait_until(load.all_acknowledged, 300, "every commit acknowledged", None, 1)
        finally:
            load.close()
    finally:
        cluster.stop()
    commits = load.commits
    sent = [c.sent_at for c in commits]
    return {
        "bootstrap": bootstrap,
        "rate_per_s": rate,
        "partitions": partitions,
        "groups": load.groups,
        "session_timeout_ms": session_timeout_ms,
        "kills": [
            asdict(
                dataclasses.replace(
                    k,
                    window_ack_p99_s=load.ack_p99(
                        k.killed_at - WINDOW_BEFORE_S, k.killed_at + WINDOW_AFTER_S
                    ),
                )
            )
            for k in measured
        ],
        "ack_s_median": statistics.median(k.ack_s for k in measured),
        "requests": len(commits),
        "sending_s": max(sent) - min(sent),
        "attempts": sum(c.attempts for c in commits),
        "unacknowledged": sum(c.acked_at is None for c in commits),
        "failed_attempts": dict(load.errors),
    }


def _line(k: Kill) -> str:
    role = "coordinator and controller" if k.was_controller else "coordinator"
    return (
        f"kill {k.kill}: node {k.node} ({role}) killed, kill → first ack {k.ack_s:.1f} s, "
        f"node {k.new_coordinator} coordinates now"
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def report(results: dict[str, Any]) -> str:
    rows = [
        "| kill | node killed | also the controller | → first ack s | ack p99 in the window s |",
        "|---|---|---|---|---|",
    ]
    for k in results["kills"]:
        rows.append(
            f"| {k['kill']} | {k['node']} | {'yes' if k['was_controller'] else 'no'} | "
            f"{k['ack_s']:.1f} | {_seconds(k['window_ack_p99_s'])} |"
        )
    acks = [k["ack_s"] for k in results["kills"]]
    rows.append("")
    rows.append(
        f"kill → first ack through Kafka's coordinator: min {min(acks):.1f} s, median "
        f"{statistics.median(acks):.1f} s, max {max(acks):.1f} s over {len(acks)} kills "
        f"(broker.session.timeout.ms {results['session_timeout_ms']})"
    )
    rows.append(
        f"{results['requests']} requests x {results['partitions']} partitions in "
        f"{results['sending_s']:.0f} s, {results['attempts']} attempts, "
        f"{results['unacknowledged']} unacknowledged; failed attempts by error: "
        f"{results['failed_attempts'] or 'none'}"
    )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--rate", type=float, default=100.0, help="commit requests/s")
    parser.add_argument("--partitions", type=int, default=10, help="per request")
    parser.add_argument(
        "--session-timeout-ms", type=int, default=9000, help="broker.session.timeout.ms"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="bench-coordinator-", dir=runtime_dir()))
    load_average_start = os.getloadavg()
    try:
        figures = run(folder, args.kills, args.rate, args.partitions, args.session_timeout_ms)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    results = {
        "cpus": os.cpu_count(),
        "load_average_start": load_average_start,
        "load_average_end": os.getloadavg(),
        **figures,
    }
    print_and_save(results, report(results), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
