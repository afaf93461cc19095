"""A query that fails as Spark does on a loaded machine (its Python worker did not connect back
in time) is started again from its checkpoint, a bounded number of times; any other failure
ends the run (real Spark, a rate source, no Kafka)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from streaming.spark import lifecycle
from streaming.spark.lifecycle import QueryLifecycle

pytestmark = pytest.mark.spark


def run_failing(
    spark: SparkSession, tmp_path: Path, failures: list[str | None], batches: int
) -> tuple[QueryLifecycle, object, list[int]]:
    """Run a query whose batches raise ``failures`` in turn (None: that batch succeeds), then
    succeed, until ``batches`` batches were written or the run ended; the lifecycle, the run's
    error and the batch ids written."""
    written: list[int] = []
    enough = threading.Event()
    left = list(failures)

    def write(_batch: DataFrame, batch_id: int) -> None:
        failure = left.pop(0) if left else None
        if failure is not None:
            raise RuntimeError(failure)
        written.append(batch_id)
        if len(written) >= batches:
            enough.set()

    query = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 1)
        .load()
        .writeStream.foreachBatch(write)
        .trigger(processingTime="100 milliseconds")
    )
    runs = QueryLifecycle(spark, str(tmp_path / "checkpoint"))
    runs.start(query.option("checkpointLocation", str(tmp_path / "checkpoint")), {})
    try:
        error = runs.run_until(enough, duration_s=120)
    finally:
        runs.stop()
    return runs, error, written


def test_a_query_whose_python_worker_did_not_connect_back_is_started_again(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "RESTART_PAUSE_S", 0.1, raising=False)
    failures = ["Python worker failed to connect back. (as on a loaded machine)"] * 2
    runs, error, written = run_failing(spark, tmp_path, failures, batches=3)
    assert error is None
    assert runs.restarts == 2
    # From the checkpoint: the failed batch 0 is the first one written, then the next ones.
    assert written[:3] == [0, 1, 2]


def test_restarts_are_bounded_and_other_failures_end_the_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "RESTART_PAUSE_S", 0.01, raising=False)
    failures = ["Python worker failed to connect back."] * (lifecycle.MAX_QUERY_RESTARTS + 1)
    runs, error, written = run_failing(spark, tmp_path, failures, batches=1)
    assert runs.restarts == lifecycle.MAX_QUERY_RESTARTS
    assert error is not None and written == []

    # A query that completed a batch before failing again starts the count again.
    again: list[str | None] = [
        "Python worker failed to connect back."
    ] * lifecycle.MAX_QUERY_RESTARTS
    runs, error, written = run_failing(spark, tmp_path / "again", [*again, None, *again], batches=2)
    # A batch may start between the second write and the stop: only the first two are asserted.
    assert error is None and written[:2] == [0, 1]
    assert runs.restarts == lifecycle.MAX_QUERY_RESTARTS

    runs, error, written = run_failing(spark, tmp_path / "other", ["a bug"], batches=1)
    assert runs.restarts == 0
    assert "a bug" in str(error) and written == []
