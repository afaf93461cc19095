"""A query's checkpoint on its file system: how Spark writes its files on a local disk, and what
a migration reads from it and where it moves it (any Hadoop file system).

Spark writes every checkpoint file (the offset and commit logs, each state store's changelogs and
snapshots, their checksum files) under a temporary name and renames it into place. Its default
file manager renames through Hadoop's ``FileContext``, and on the local file system Hadoop then
looks up both names as symbolic links by running ``readlink`` in a child process (pyspark ships
no Hadoop native library): four processes for a file and its ``.crc``, each forked from the
driver's JVM. At 1,000 offsets/s that was ~34 processes a second, and a batch's offset and
commit log writes, which the micro-batch waits for, took 46-100 ms each.

On a local checkpoint the job therefore uses Spark's ``FileSystem``-based file manager, which
renames with one ``rename(2)``: atomic, and it replaces an existing file as the ``FileContext``
rename does. Hadoop still runs ``chmod`` for each file it creates (no native library), about a
seventh of the processes. Other file systems (HDFS, S3, …) keep Spark's choice: there the
``FileContext`` rename is the one that overwrites atomically. A manager the user configures
(``spark.sql.streaming.checkpointFileManagerClass``) is left as it is.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pyspark.sql import SparkSession

#: Spark's setting for the class that writes checkpoint files (read when a query starts).
FILE_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"

#: Spark's file manager that renames with ``FileSystem.rename``: ``rename(2)`` on a local disk.
LOCAL_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def checkpoint_scheme(spark: SparkSession, location: str) -> str:
    """The file system scheme of ``location`` (``file``, ``hdfs``, ``s3a`` …): its own, else the
    default file system's (``fs.defaultFS``). No file system is opened."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    uri = jvm.org.apache.hadoop.fs.Path(location).toUri()
    scheme = uri.getScheme()
    if scheme is None:
        conf = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
        scheme = jvm.org.apache.hadoop.fs.FileSystem.getDefaultUri(conf).getScheme()
    return str(scheme or "file").lower()


def checkpoint_file_settings(spark: SparkSession, location: str) -> dict[str, str]:
    """The Spark settings a query checkpointing at ``location`` starts with (see the module
    docstring): the ``FileSystem``-based file manager on the local file system, unless the user
    set one; nothing otherwise."""
    if spark.conf.get(FILE_MANAGER_KEY, None) is not None:
        return {}
    if checkpoint_scheme(spark, location) != "file":
        return {}
    return {FILE_MANAGER_KEY: LOCAL_FILE_MANAGER}


def _fs(spark: SparkSession, location: str) -> tuple[Any, Any]:
    """(Hadoop ``Path`` class, the file system of ``location``)."""
    path_class = spark._jvm.org.apache.hadoop.fs.Path  # type: ignore[attr-defined]
    conf = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    return path_class, path_class(location).getFileSystem(conf)


def _batch_ids(spark: SparkSession, folder: str) -> list[int]:
    """The batch ids a checkpoint log folder (``offsets``, ``commits``) holds, ascending."""
    path_class, fs = _fs(spark, folder)
    path = path_class(folder)
    if not fs.exists(path):
        return []
    names = [str(s.getPath().getName()) for s in fs.listStatus(path)]
    return sorted(int(name) for name in names if name.isdigit())


def source_positions(offset_log: str) -> dict[str, dict[int, int]]:
    """The Kafka source positions in an offset log file's text (``v1``, the batch's metadata,
    then one line per source: Spark's JSON of topic, partition and next offset, or ``-``)."""
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
    """Where the last committed batch of the checkpoint at ``location`` ended (its offset log
    entry: the positions the next batch starts from); empty when no batch was committed."""
    root = location.rstrip("/")
    committed = set(_batch_ids(spark, f"{root}/commits"))
    logged = [b for b in _batch_ids(spark, f"{root}/offsets") if b in committed]
    if not logged:
        return {}
    path_class, fs = _fs(spark, root)
    stream = fs.open(path_class(f"{root}/offsets/{logged[-1]}"))
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        text = str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()
    return source_positions(text)


def move_aside(spark: SparkSession, location: str, why: str) -> str:
    """Rename the checkpoint at ``location`` to ``<location>.<why>-<UTC time>`` beside it, kept
    for an operator to delete; returns the new location."""
    root = location.rstrip("/")
    aside = f"{root}.{why}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    path_class, fs = _fs(spark, root)
    if not fs.rename(path_class(root), path_class(aside)):
        raise OSError(f"cannot move the checkpoint at {location} aside to {aside}")
    return aside
