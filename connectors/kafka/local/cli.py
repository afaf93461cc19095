"""``python -m connectors.kafka.local``: start, stop and inspect the local cluster from a shell."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from connectors.kafka.local.cluster import LocalKafkaCluster
from connectors.kafka.local.config import (
    DEFAULT_HEAP,
    DEFAULT_PORT,
    DEFAULT_START_TIMEOUT,
    KafkaLocalError,
)


# -- command line --------------------------------------------------------------------------------
def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
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
    sub.add_parser(
        "status", parents=[common], help="show nodes; exit 0 when all run, 1 when any is down"
    )
    stop_node = sub.add_parser("stop-node", parents=[common], help="stop one node (fault tests)")
    stop_node.add_argument("node", type=int)
    stop_node.add_argument("--kill", action="store_true", help="SIGKILL, as a crash would")
    start_node = sub.add_parser("start-node", parents=[common], help="start one stopped node")
    start_node.add_argument("node", type=int)
    start_node.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m connectors.kafka.local") -> int:
    """CLI entry point; exit status 0 on success, 1 on failure, 2 for usage errors (the CLI's
    statuses). ``status`` exits 1 when nothing or only some nodes run. ``prog`` names the command
    in usage lines (``consumer-offsets kafka`` when called from that CLI)."""
    try:
        args = _parser(prog).parse_args(argv)
    except SystemExit as exc:  # argparse: 0 for --help, 2 for usage errors
        return exc.code if isinstance(exc.code, int) else 2
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
        return 1
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
