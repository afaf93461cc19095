"""How Spark writes a query's checkpoint files on the local file system.

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
