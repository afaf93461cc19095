"""A real Apache Kafka broker on this machine, from the jars ``deploy/setup.sh`` resolved.

Each node is ``java -cp '.runtime/jars/kafka/*' kafka.Kafka server.properties`` in KRaft mode, a
combined broker and controller on 127.0.0.1: node *n* on broker port ``port + 2(n-1)`` and its
controller one above. The data dir (default ``.runtime/kafka/``) holds ``cluster.json`` (the
running configuration) and ``node-<n>/`` (server.properties, data/, logs/, kafka.pid). ``start``
reuses the same configuration running, refuses another, and formats the nodes anew when the
configuration changed. Usage: ``consumer-offsets kafka --help`` (deploy/README.md, "The local
broker"); ``$KAFKA_OPTS`` adds JVM options. Modules: ``config``, ``process`` (the JVMs),
``cluster`` (``LocalKafkaCluster``), ``cli``.
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
