"""A waiting standby keeps its Python workers warm: its warm-up query, started again from its
own checkpoint (the state store loaded from it, as a takeover's is), runs on a batch every
``WARM_UP_EVERY_S`` (under the minute after which Spark kills idle workers) until the lease is
taken (real Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streaming.spark.warm_up import WARM_UP_EVERY_S, keep_python_workers_warm

pytestmark = pytest.mark.spark


def test_the_warm_up_query_restarts_from_its_checkpoint_and_runs_on_until_stopped(
    spark: SparkSession,
) -> None:
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    warm = keep_python_workers_warm(spark)
    try:
        assert warm.query is not None and warm.query.isActive
        (progress,) = warm.query.recentProgress  # returned once its first batch ran
        # Its second start, resumed after the first's batch: its state store loaded from the
        # checkpoint.
        assert progress["batchId"] == 1
        (operator,) = progress["stateOperators"]
        assert operator["customMetrics"]["rocksdbNumLoadedFromDfs"] > 0
        assert warm.query.isActive  # and it runs on
        assert spark.conf.get("spark.sql.shuffle.partitions") == shuffle
        assert WARM_UP_EVERY_S < 60  # Spark's PythonWorkerFactory: idle workers die after 1 min
    finally:
        warm.stop()
    assert not warm.query.isActive
    assert warm.folder is not None and not Path(warm.folder).exists()
