"""A waiting standby keeps its Python workers warm: its warm-up query runs on after its first
batch, a batch every ``WARM_UP_EVERY_S`` (under the minute after which Spark kills idle
workers), until the lease is taken (real Spark)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streaming.spark.processor import WARM_UP_EVERY_S, keep_python_workers_warm

pytestmark = pytest.mark.spark


def test_the_warm_up_query_runs_on_until_stopped(spark: SparkSession) -> None:
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    warm = keep_python_workers_warm(spark)
    try:
        assert warm.query is not None and warm.query.isActive
        deadline = time.monotonic() + 30
        while not warm.query.recentProgress:  # its first batch ran: reported just after
            assert time.monotonic() < deadline, "no batch of the warm-up query reported"
            time.sleep(0.1)
        assert warm.query.isActive  # and it runs on
        assert spark.conf.get("spark.sql.shuffle.partitions") == shuffle
        assert WARM_UP_EVERY_S < 60  # Spark's PythonWorkerFactory: idle workers die after 1 min
    finally:
        warm.stop()
    assert not warm.query.isActive
    assert warm.folder is not None and not Path(warm.folder).exists()
