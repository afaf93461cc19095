"""``python -m streaming.cli.archive_classes``: build the driver JVM's class archive
(:mod:`streaming.spark.class_archive`) from a JVM that runs what a driver runs before and in its
first micro-batch: the Kafka source's plan, the job's operator, a ``foreachBatch`` sink.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from streaming.spark.class_archive import archive_path, dump_options


def _exercise(path: Path) -> None:
    """Run, in a JVM that archives its classes to ``path``, what a driver runs before and in its
    first micro-batch; then stop the JVM, which writes the archive."""
    import pandas as pd
    from pyspark import SparkContext
    from pyspark.sql import types as T
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    from streaming.spark.session import spark_session

    spark = spark_session(
        app_name="class-archive",
        master="local[2]",
        extra_conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        java_options=dump_options(path),
    )
    # The Kafka source's plan (no broker is contacted before the query starts).
    kafka = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
    _ = kafka.option("subscribe", "class-archive").load().selectExpr("CAST(value AS STRING)").schema

    class Count(StatefulProcessor):
        """The job's operator (value states, time mode None), keeping a count per key."""

        def init(self, handle: Any) -> None:
            schema = T.StructType([T.StructField("rows", T.LongType(), False)])
            self.rows = handle.getValueState("rows", schema)

        def handleInputRows(
            self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
        ) -> Iterator[pd.DataFrame]:
            total = sum(len(frame) for frame in rows) + (self.rows.get() or (0,))[0]
            self.rows.update((total,))
            yield pd.DataFrame({"shard": [int(key[0])], "rows": [total]})

    def sink(frame: object, _batch_id: int) -> None:
        frame.collect()  # type: ignore[attr-defined]

    with tempfile.TemporaryDirectory(prefix="class-archive-") as checkpoint:
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", "200")
            .load()
            .selectExpr("CAST(value % 4 AS INT) AS shard", "value", "timestamp")
            .groupBy("shard")
            .transformWithStateInPandas(Count(), "shard INT, rows LONG", "update", "None")
            .writeStream.outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        deadline = time.monotonic() + 120
        while (query.lastProgress or {}).get("batchId", -1) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        reached = (query.lastProgress or {}).get("batchId", -1)
        error = query.exception()
        query.stop()
        if reached < 3:
            raise RuntimeError(f"the exercise's query reached batch {reached} of 3: {error}")
    gateway = SparkContext._gateway  # type: ignore[attr-defined]
    spark.stop()
    process = getattr(gateway, "proc", None)
    if process is None:
        raise RuntimeError("the JVM's process is unknown: cannot stop it to write the archive")
    gateway.shutdown()
    # The gateway JVM exits when its stdin closes; exiting writes the archive.
    process.stdin.close()
    process.wait(timeout=300)


#: Tries of the exercise: its Python workers are forked by Spark, which waits for them 10 s (a
#: fixed bound), so a loaded machine can fail one start and pass the next.
ATTEMPTS = 3


def build() -> float:
    """Build the archive at :func:`archive_path` through a temporary file, trying the exercise up
    to :data:`ATTEMPTS` times; seconds taken."""
    target = archive_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="class-archive-", dir=target.parent) as folder:
        partial = Path(folder) / target.name
        for attempt in range(1, ATTEMPTS + 1):
            result = subprocess.run(
                [sys.executable, "-m", "streaming.cli.archive_classes", "--exercise", str(partial)],
                capture_output=True,
                text=True,
                env=dict(os.environ, PYTHONWARNINGS="ignore"),
            )
            if result.returncode == 0 and partial.is_file():
                break
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
            if attempt == ATTEMPTS:
                raise RuntimeError(f"the class archive was not written ({attempt} tries):\n{tail}")
            partial.unlink(missing_ok=True)
        shutil.move(partial, target)
    return time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the driver JVM's class archive.")
    parser.add_argument("--exercise", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.exercise is not None:
        _exercise(args.exercise)
        return 0
    try:
        seconds = build()
    except RuntimeError as error:
        print(f"class archive: {error}", file=sys.stderr)
        return 1
    print(f"class archive: {archive_path()} built in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
