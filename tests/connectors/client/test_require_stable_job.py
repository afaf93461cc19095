"""With the real job (reading its ingest topic read_committed): a transaction left open on a
group's ingest partition makes RequireStable answer 88 for the partitions it names, holds back
every later request on that partition (head-of-line blocking, measured here) but not requests on
the others, and once it commits the job applies it and the offsets are stable again."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from connectors.client import OffsetCommitClient
from connectors.client.offsets_reader import OffsetsReader
from state.coordinator.errors import ErrorCode
from state.coordinator.partitioner import partition_for
from tests.connectors.kafka.transactions import Committer
from tests.fixtures.job import RunningJob, unique_group
from tests.streaming.helpers import wait_for

pytestmark = pytest.mark.spark

#: Seconds the transaction is left open.
HOLD_S = 5.0


def _group_on(shard: int, partitions: int, prefix: str) -> str:
    while partition_for(group := unique_group(prefix), partitions) != shard:
        pass
    return group


def test_an_open_transaction_is_unstable_and_holds_its_ingest_partition(
    running_job: RunningJob,
) -> None:
    config = running_job.config
    group = unique_group("txn")
    count = config.ingest_topic_partitions  # a divisor of the shards
    shard = partition_for(group, count)
    behind = _group_on(shard, count, "behind")
    beside = _group_on((shard + 1) % count, count, "beside")
    options = config.kafka_python_options()
    with (
        OffsetCommitClient(config, default_timeout_s=60) as client,
        OffsetsReader(config.sink_url, options, ingest_topic=config.ingest_topic) as reader,
    ):
        client.commit(group, {("t", 0): 5, ("t", 1): 6})
        committer = Committer(config.bootstrap_servers, config.ingest_topic)
        committer.begin()
        committer.txn_offset_commit(group, shard, {("t", 0): 10})
        answered: dict[str, float] = {}

        def commit(name: str) -> None:
            started = time.monotonic()
            client.commit(name, {("t", 0): 1})
            answered[name] = time.monotonic() - started

        opened = time.monotonic()
        threads = [threading.Thread(target=commit, args=(g,)) for g in (behind, beside)]
        for thread in threads:
            thread.start()
        fetched = reader.fetch(group, require_stable=True)
        assert [(o.partition, o.offset, o.error_code) for o in fetched] == [
            (0, -1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
            (1, 6, 0),
        ]
        time.sleep(max(0.0, HOLD_S - (time.monotonic() - opened)))
        assert behind not in answered  # held behind the open transaction
        committer.commit()
        for thread in threads:
            thread.join(60)
        print(
            f"behind the transaction: {answered[behind]:.2f} s, beside it: {answered[beside]:.2f} s"
        )
        assert answered[beside] < HOLD_S <= answered[behind]

        def stable() -> Any:
            return [
                (o.partition, o.offset, o.error_code)
                for o in reader.fetch(group, require_stable=True)
            ]

        assert wait_for(stable, lambda got: got == [(0, 10, 0), (1, 6, 0)], 60)
