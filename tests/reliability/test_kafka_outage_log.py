"""What the job's log says during a Kafka outage: its own lines, not the libraries' hundreds.

A single-node broker of its own (free ports, its own data dir) is SIGKILLed under a running job
(a driver process of its own, logging to a file as a user's would) and started again after
:data:`OUTAGE_S`. The log must hold the job's one "unreachable" line and one "reachable again"
line, and almost none of what librdkafka, the Java clients and Spark print on their own (before
this, a 60 s outage gave 131 librdkafka "Connection refused" lines, 72 NetworkClient warnings
and a Java stack trace, and no line of the job's). The job must answer commits afterwards.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.kafka.local import LocalKafkaCluster, free_port_block
from tests.fixtures.job import prepare_topics, unique_group, write_config_file
from tests.reliability.load import driver
from tests.reliability.support import reliability_config, wait_until
from tests.streaming.cli.support import run

# The job runs as its own driver process: Spark starts there, so the marker is explicit.
pytestmark = [pytest.mark.slow, pytest.mark.spark]

OUTAGE_S = 20.0
#: A cold driver answers its first commit within this, also on a loaded machine.
START_TIMEOUT_S = 600.0
#: Library lines that may get through before the job's probe notices (it probes every 5 s).
LEAKED_AT_MOST = 25


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[LocalKafkaCluster]:
    cluster = LocalKafkaCluster(tmp_path / "kafka")
    try:
        cluster.start(nodes=1, port=free_port_block(2), heap="384m", echo=lambda _: None)
        yield cluster
    finally:
        cluster.stop()


def test_a_kafka_outage_is_two_lines_of_the_jobs_own(
    own_broker: LocalKafkaCluster, tmp_path: Path
) -> None:
    cluster_config = own_broker.config()
    assert cluster_config is not None
    config = reliability_config(cluster_config.bootstrap_servers, tmp_path)
    prepare_topics(config)
    config_file = write_config_file(config, tmp_path / "job.toml")
    flags = ["--config", str(config_file), "--timeout", "60000"]

    def commit_ok(group: str) -> bool:
        result = run("commit", *flags, "--group", group, "--topic", "t", "--partition", "0",
                     "--offset", "1")  # fmt: skip
        return result.code == 0

    log_path = tmp_path / "driver.log"
    with driver(config, log_path) as job:
        job.start()
        first = unique_group("before")
        wait_until(lambda: commit_ok(first), START_TIMEOUT_S, "a first commit", job.check_alive, 1)
        mark = log_path.stat().st_size
        own_broker.stop_node(1, kill=True)
        time.sleep(OUTAGE_S)
        own_broker.start_node(1)
        after = unique_group("after")
        wait_until(lambda: commit_ok(after), START_TIMEOUT_S, "a commit after", job.check_alive, 1)
        time.sleep(6)  # one more heartbeat: the "reachable again" line
        job.check_alive()
    during = log_path.read_bytes()[mark:].decode(errors="replace").splitlines()
    own = [line for line in during if "consumer_offsets.health" in line]
    down = [line for line in own if "unreachable (" in line]
    back = [line for line in own if "reachable again after" in line]
    refused = [line for line in during if "Connection refused" in line]
    network = [line for line in during if "NetworkClient" in line]
    stack = [line for line in during if re.match(r"\s+at [\w.$]+\(", line)]
    print(
        f"\nKafka outage of {OUTAGE_S:.0f} s: {len(during)} log lines; the job's own: "
        f"{len(own)}; 'Connection refused': {len(refused)}, NetworkClient: {len(network)}, "
        f"Java stack frames: {len(stack)}\n" + "\n".join(own)
    )
    assert len(down) == 1 and len(back) == 1, own
    assert "Kafka at " in down[0] and "Kafka at " in back[0]
    assert len(refused) + len(network) <= LEAKED_AT_MOST, (refused + network)[:10]
    assert not stack, stack[:5]
