"""The mirror waits out a sink outage as the job does: a batch whose write fails is retried for
``sink_write_timeout_s`` (one idempotent transaction), instead of failing the mirror."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from connectors.sinks import open_sink
from state.coordinator.model import OffsetAndMetadata
from streaming.spark.mirror import MirrorWriter
from tests.state.formats.records.offset_encoders import (
    encode_offset_commit_key,
    encode_offset_commit_value,
)


def _records(spark: Any, offsets: dict[int, int]) -> Any:
    rows = [
        (0, i, encode_offset_commit_key("payments", "orders", p),
         encode_offset_commit_value(OffsetAndMetadata(o, commit_timestamp_ms=1_000)))
        for i, (p, o) in enumerate(sorted(offsets.items()))
    ]  # fmt: skip
    return spark.createDataFrame(rows, "partition int, offset long, key binary, value binary")


def test_a_batch_waits_out_a_locked_sink(tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "mirror.db"
    # A short busy timeout: the held lock makes the write fail at once, not wait inside SQLite.
    sink = open_sink(f"sqlite:///{path}", keep_history=True, busy_timeout_ms=50)
    writer = MirrorWriter(sink, {0: 2}, lambda _: {0: 2}, sink_write_timeout_s=30)
    outage = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    outage.execute("BEGIN EXCLUSIVE")  # the sink is unavailable for writes until released
    released = threading.Timer(2.0, lambda: outage.execute("ROLLBACK"))
    released.start()
    started = time.monotonic()
    try:
        # Without the retry, the first attempt's "database is locked" would fail the batch.
        writer(_records(spark, {0: 7, 1: 9}), 0)
    finally:
        released.join()
        outage.close()
    assert time.monotonic() - started >= 1.5  # it waited for the lock to go
    assert {o.partition: o.offset for o in sink.fetch_offsets("payments")} == {0: 7, 1: 9}
    assert sink.status().last_batch_id == 0
    sink.close()


def test_a_sink_that_stays_away_fails_the_batch(tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "mirror.db"
    sink = open_sink(f"sqlite:///{path}", busy_timeout_ms=50)
    writer = MirrorWriter(sink, {0: 1}, lambda _: {0: 1}, sink_write_timeout_s=0.5)
    outage = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    outage.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(Exception, match="locked"):
            writer(_records(spark, {0: 7}), 0)
    finally:
        outage.execute("ROLLBACK")
        outage.close()
    assert sink.fetch_offsets("payments") == []
    sink.close()
