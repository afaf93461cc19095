"""A query's checkpoint on its file system (any Hadoop one): its files read, moved aside, and
written on a local disk with one ``rename(2)`` each.

Spark's default file manager renames through Hadoop's ``FileContext``, which on a local disk
(no Hadoop native library) forks ``readlink`` processes from the driver's JVM for every file,
tens of milliseconds per batch's log write. A local checkpoint uses Spark's ``FileSystem``-based
manager instead (as atomic, and it overwrites); other file systems, or a manager the user set,
keep theirs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

#: Spark's setting for the class that writes checkpoint files (read when a query starts).
FILE_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"

#: Spark's file manager that renames with ``FileSystem.rename``: ``rename(2)`` on a local disk.
LOCAL_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def checkpoint_scheme(spark: SparkSession, location: str) -> str:
    """The file system scheme of ``location`` (``file``, ``hdfs``…), else ``fs.defaultFS``'s."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    uri = jvm.org.apache.hadoop.fs.Path(location).toUri()
    scheme = uri.getScheme()
    if scheme is None:
        conf = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
        scheme = jvm.org.apache.hadoop.fs.FileSystem.getDefaultUri(conf).getScheme()
    return str(scheme or "file").lower()


def checkpoint_file_settings(spark: SparkSession, location: str) -> dict[str, str]:
    """The settings a query checkpointing at ``location`` starts with: the ``FileSystem``-based
    file manager on a local disk, unless the user set one."""
    if spark.conf.get(FILE_MANAGER_KEY, None) is not None:
        return {}
    if checkpoint_scheme(spark, location) != "file":
        return {}
    return {FILE_MANAGER_KEY: LOCAL_FILE_MANAGER}


def hadoop_path(spark: SparkSession, location: str) -> tuple[Any, Any]:
    """(Hadoop ``Path`` of ``location``, its file system)."""
    path = spark._jvm.org.apache.hadoop.fs.Path(location)  # type: ignore[attr-defined]
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]


def read_text(spark: SparkSession, fs: Any, path: Any) -> str:
    """The UTF-8 text of the file at Hadoop ``path`` on ``fs``."""
    stream = fs.open(path)
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def _batch_ids(spark: SparkSession, folder: str) -> list[int]:
    """The batch ids a checkpoint log folder (``offsets``, ``commits``) holds, ascending."""
    path, fs = hadoop_path(spark, folder)
    if not fs.exists(path):
        return []
    names = [str(s.getPath().getName()) for s in fs.listStatus(path)]
    return sorted(int(name) for name in names if name.isdigit())


def source_positions(offset_log: str) -> dict[str, dict[int, int]]:
    """The Kafka source positions in an offset log file's text (``v1``, the batch's metadata,
    then per source Spark's JSON of topic, partition and next offset, or ``-``)."""
    positions: dict[str, dict[int, int]] = {}
    for line in offset_log.splitlines()[2:]:
        try:
            source = json.loads(line)
        except ValueError:
            continue
        if not isinstance(source, dict):
            continue
        for topic, offsets in source.items():
            if isinstance(offsets, dict):
                positions.setdefault(topic, {}).update({int(p): int(o) for p, o in offsets.items()})
    return positions


def committed_positions(spark: SparkSession, location: str) -> dict[str, dict[int, int]]:
    """Where the last committed batch of the checkpoint at ``location`` ended (empty: none)."""
    root = location.rstrip("/")
    committed = set(_batch_ids(spark, f"{root}/commits"))
    logged = [b for b in _batch_ids(spark, f"{root}/offsets") if b in committed]
    return planned_positions(spark, location, logged[-1]) if logged else {}


def planned_positions(
    spark: SparkSession, location: str, batch_id: int
) -> dict[str, dict[int, int]]:
    """Where Spark planned batch ``batch_id`` of the checkpoint at ``location`` to end: its
    offset log, written before the batch runs."""
    path, fs = hadoop_path(spark, f"{location.rstrip('/')}/offsets/{batch_id}")
    return source_positions(read_text(spark, fs, path))


def planned_positions_reader(
    spark: SparkSession, location: str
) -> Callable[[int], dict[str, dict[int, int]]]:
    """:func:`planned_positions` of the checkpoint at ``location`` by batch id, its file system
    resolved once: on a local disk Python reads the offset log (no JVM call per batch)."""
    if checkpoint_scheme(spark, location) != "file":
        return lambda batch_id: planned_positions(spark, location, batch_id)
    path, fs = hadoop_path(spark, location.rstrip("/"))
    offsets = Path(str(fs.makeQualified(path).toUri().getPath())) / "offsets"
    return lambda batch_id: source_positions((offsets / str(batch_id)).read_text("utf-8"))


def move_aside(spark: SparkSession, location: str, why: str) -> str:
    """Rename the checkpoint at ``location`` to ``<location>.<why>-<UTC time>`` beside it, kept
    for an operator to delete; returns the new location."""
    root = location.rstrip("/")
    aside = f"{root}.{why}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    (source, fs), (target, _) = hadoop_path(spark, root), hadoop_path(spark, aside)
    if not fs.rename(source, target):
        raise OSError(f"cannot move the checkpoint at {location} aside to {aside}")
    return aside
