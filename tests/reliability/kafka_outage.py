"""A Kafka outage under load, ridden out: the job's only broker SIGKILLed for longer than every
client timeout in the batch path (the task consumer's 60 s, the producer's 120 s), then started
again.

    python -m tests.reliability.kafka_outage [--outage-s 600] [--rate 20]

It fails (exit 1) unless the driver stays alive through the outage, keeps its lease (one epoch)
and answers every request that reached the ingest topic; it prints the outage, what the job
logged of it and how long the first batch after it waited. Not collected by pytest: the writer's
retries are tested in ``tests/streaming/test_writer_transactions.py`` and
``test_writer_collect.py``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from connectors.kafka.local import LocalKafkaCluster, free_port_block
from tests.fixtures.job import prepare_topics
from tests.reliability.load import CommitLoad, driver
from tests.reliability.support import reliability_config, responses_by_id, wait_until

#: The job's log lines that tell how it rode the outage out.
RIDE_OUT_LINES = (
    "lease job acquired",
    "reading its requests failed",
    "Kafka did not take it",
    "Kafka took it after",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-s", type=float, default=600.0)
    parser.add_argument("--rate", type=float, default=20.0, help="requests/s")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kafka-outage-"))
    cluster = LocalKafkaCluster(folder / "kafka")
    cluster.start(nodes=1, port=free_port_block(2), heap="384m", echo=lambda _: None)
    try:
        config_of_cluster = cluster.config()
        assert config_of_cluster is not None
        bootstrap = config_of_cluster.bootstrap_servers
        config = reliability_config(bootstrap, folder)
        prepare_topics(config)
        log_path = folder / "driver.log"

        def answered() -> dict[str, object]:
            return responses_by_id(bootstrap, config.responses_topic)

        with driver(config, log_path) as job:
            job.start()
            load = CommitLoad(config, rate_per_s=args.rate).start()
            wait_until(lambda: len(answered()) > 20, 900, "first answers", job.check_alive, 2)
            killed = time.monotonic()
            cluster.stop_node(1, kill=True)
            while time.monotonic() - killed < args.outage_s:
                job.check_alive()
                time.sleep(2)
            cluster.start_node(1)
            outage_s = time.monotonic() - killed
            time.sleep(30)
            load.stop()
            sent = {s.request_id for s in load.sent}
            wait_until(
                lambda: sent <= set(answered()), 900, "every request answered", job.check_alive, 5
            )
            job.check_alive()
        text = log_path.read_text(errors="replace")
        counts = {line: text.count(line) for line in RIDE_OUT_LINES}
        print(
            f"broker down {outage_s:.0f} s under {args.rate:.0f} requests/s: the driver stayed "
            f"alive, {len(sent):,} requests reached the topic, all answered; "
            f"{len(load.failed):,} sends refused while it was down (never sent); "
            + ", ".join(f"{n} x '{line}'" for line, n in counts.items())
        )
        if counts["lease job acquired"] != 1:
            print("FAIL: the lease moved", file=sys.stderr)
            return 1
        return 0
    finally:
        cluster.stop()
        print(f"logs in {folder}")


if __name__ == "__main__":
    sys.exit(main())
