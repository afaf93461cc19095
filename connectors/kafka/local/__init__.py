"""A real Apache Kafka broker on this machine, from the jars ``deploy/setup.sh`` resolved.

Each node is ``kafka.Kafka`` in KRaft mode, a combined broker and controller on 127.0.0.1: node
*n* on broker port ``port + 2(n-1)``, its controller one above. The data dir (default
``.runtime/kafka/``) holds ``cluster.json`` (the running configuration) and ``node-<n>/``.
Usage: ``consumer-offsets kafka --help`` (deploy/README.md, "The local broker").
"""

from connectors.kafka.local.cli import main
from connectors.kafka.local.cluster import LocalKafkaCluster
from connectors.kafka.local.config import (
    ClusterConfig,
    KafkaLocalError,
    free_port_block,
    new_cluster_id,
)
from connectors.kafka.local.process import wait_for_broker

__all__ = [
    "ClusterConfig",
    "KafkaLocalError",
    "LocalKafkaCluster",
    "free_port_block",
    "main",
    "new_cluster_id",
    "wait_for_broker",
]
