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

    python -m connectors.kafka.local start [--nodes 3] [--port 9092] [--data-dir DIR]
    python -m connectors.kafka.local status | stop
    python -m connectors.kafka.local stop-node 2 [--kill]    # fault tests
    python -m connectors.kafka.local start-node 2

Extra JVM options for the nodes can be given in ``$KAFKA_OPTS``, as with Kafka's own scripts.

``start`` while the same configuration runs reuses it ("already running at ..."); while another
configuration runs in the same data dir it refuses. When nothing runs and the configuration
changed, the data dir's nodes are formatted anew (their topics are lost: this is a local
development broker).

Modules: ``config`` (cluster configuration, ports), ``process`` (the JVMs, readiness),
``cluster`` (``LocalKafkaCluster``), ``cli`` (the command line).
"""

from connectors.kafka.local.cli import main
from connectors.kafka.local.cluster import LocalKafkaCluster
from connectors.kafka.local.config import (
    DEFAULT_HEAP,
    DEFAULT_PORT,
    DEFAULT_START_TIMEOUT,
    DEFAULT_STOP_TIMEOUT,
    HOST,
    ClusterConfig,
    KafkaLocalError,
    NodeStatus,
    StartResult,
    default_data_dir,
    free_port_block,
    new_cluster_id,
)
from connectors.kafka.local.process import wait_for_broker

__all__ = [
    "DEFAULT_HEAP",
    "DEFAULT_PORT",
    "DEFAULT_START_TIMEOUT",
    "DEFAULT_STOP_TIMEOUT",
    "HOST",
    "ClusterConfig",
    "KafkaLocalError",
    "LocalKafkaCluster",
    "NodeStatus",
    "StartResult",
    "default_data_dir",
    "free_port_block",
    "main",
    "new_cluster_id",
    "wait_for_broker",
]
