"""The one place a SparkSession is made: the job, the tests and the benchmarks all call
:func:`spark_session`, so they run with the same state store, jars and Python workers.

The JVM jars it puts on ``spark.jars`` are those ``deploy/setup.sh`` resolved with Maven into the
runtime folder (``connectors.runtime``). ``pyspark`` is imported lazily so that importing this
module stays cheap.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.runtime import spark_jars_dir
from streaming.spark import class_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Default ``spark.sql.shuffle.partitions`` of the session (Spark's own is 200: hundreds of tiny
#: tasks per query on a small machine). The job starts its query with its own count of state
#: partitions (``streaming.spark.job.query_settings``), which its checkpoint then keeps.
DEFAULT_SHUFFLE_PARTITIONS = 8

#: Default driver heap; in ``local`` mode the executors live in the driver's JVM too.
DEFAULT_DRIVER_MEMORY = "2g"

_SETUP_HINT = "run `bash deploy/setup.sh` from the repository root to resolve the jars with Maven"


def spark_jars() -> list[Path]:
    """All jars to put on ``spark.jars``, sorted; fails naming ``deploy/setup.sh`` if absent."""
    folder = spark_jars_dir()
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not any(jar.name.startswith("spark-sql-kafka-0-10_") for jar in jars):
        raise FileNotFoundError(f"Spark's Kafka connector is missing from {folder}: {_SETUP_HINT}")
    return jars


_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+\.\d+.*)\.jar$")


def jar_artifact(file_name: str) -> str:
    """The Maven artifact id in a jar file name: ``kafka-clients-3.9.1.jar`` -> ``kafka-clients``.

    The version starts at the first ``-<digits>.<digits>``, so Scala suffixes and numbers inside
    artifact ids stay put: ``spark-sql-kafka-0-10_2.13-4.1.1.jar`` -> ``spark-sql-kafka-0-10_2.13``.
    """
    match = _JAR_NAME.match(file_name)
    return match["artifact"] if match else file_name.removesuffix(".jar")


def pyspark_jar_conflicts(jars: list[Path] | None = None) -> list[str]:
    """Jars among ``jars`` (default :func:`spark_jars`) whose artifact pyspark already ships.

    A second copy of a class on Spark's classpath, at any version, is a conflict: which one
    loads depends on classpath order. ``deploy/setup.sh`` fails when this is not empty.
    """
    import pyspark

    shipped = {jar_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(
        j.name for j in (spark_jars() if jars is None else jars) if jar_artifact(j.name) in shipped
    )


def spark_session(
    app_name: str = "consumer-offsets",
    master: str | None = None,
    extra_conf: dict[str, str] | None = None,
    java_options: Sequence[str] | None = None,
) -> SparkSession:
    """Create (or return the running) SparkSession configured for this project.

    ``master``: the argument, else ``$SPARK_MASTER``, else ``local[*]``. ``extra_conf`` is applied
    last, so it overrides every default here (e.g. ``{"spark.ui.enabled": "false"}`` in tests,
    ``{"spark.sql.shuffle.partitions": "2"}``). ``spark.driver.memory`` defaults to
    ``$SPARK_DRIVER_MEMORY`` or 2g.

    Defaults: RocksDB state store with changelog checkpointing (each micro-batch uploads only the
    changed keys instead of a full snapshot), :data:`DEFAULT_SHUFFLE_PARTITIONS` shuffle
    partitions, Arrow for pandas conversion, UTC session time zone, driver bound to 127.0.0.1
    for ``local`` masters, the Kafka connector jars from :func:`spark_jars`, log level WARN.

    ``java_options``: more driver JVM options; by default those that map the class archive
    ``deploy/setup.sh`` built (:mod:`streaming.spark.class_archive`), when there is one.

    Like ``SparkSession.builder.getOrCreate()``, a second call in the same process returns the
    session that already runs; settings that only apply at JVM start (jars, driver memory,
    master) are those of the first call.
    """
    # Python workers are started with $PYSPARK_PYTHON; unset, Spark picks `python3` from PATH,
    # which lacks pyarrow/pandas and fails inside the first pandas UDF. The workers must be
    # this interpreter (the project's virtualenv).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    resolved_master = master or os.environ.get("SPARK_MASTER") or "local[*]"
    if resolved_master.startswith("local"):
        # Otherwise Spark looks up the hostname and may bind to (and warn about) another
        # interface; a local run needs nothing but loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from pyspark.sql import SparkSession

    conf: dict[str, str] = {
        "spark.jars": ",".join(str(jar) for jar in spark_jars()),
        "spark.driver.memory": os.environ.get("SPARK_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY),
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(DEFAULT_SHUFFLE_PARTITIONS),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        # Progress bars interleave with the job's per-batch log lines; the log says more.
        "spark.ui.showConsoleProgress": "false",
        # A query stopped inside foreachBatch reports an error whose text embeds the whole plan;
        # Spark matches it with a regex that overflows the default 1 MB thread stack.
        "spark.driver.extraJavaOptions": " ".join(
            ["-Xss16m", *(class_archive.java_options() if java_options is None else java_options)]
        ),
        # pyspark's pandas serializer trips pandas' FutureWarnings in every Python worker, once
        # per task: noise in the job's log, nothing a user can act on.
        "spark.executorEnv.PYTHONWARNINGS": "ignore::FutureWarning",
    }
    if resolved_master.startswith("local"):
        # Local runs must not depend on the machine's hostname resolving; a cluster's executors
        # must reach the driver, so only local runs are pinned to loopback.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    conf.update(extra_conf or {})

    builder = SparkSession.builder.appName(app_name).master(resolved_master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    # Local workers are children of the JVM, which is a child of this process.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    _quiet_expected_warnings(session)
    return session


#: Spark warnings that a streaming query of this project logs in normal operation: a batch that
#: takes longer than a short trigger interval, AQE being off in streaming, and the value-state
#: operator's state server (a shard's first read of a state not written yet, a task's end).
#: Logged at ERROR only.
_EXPECTED_WARNINGS = (
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer",
    "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor",
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",
    "org.apache.spark.sql.execution.streaming.ResolveWriteToStream",
    "org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream",
)


def _quiet_expected_warnings(session: SparkSession) -> None:
    jvm = session.sparkContext._jvm  # type: ignore[attr-defined]
    if jvm is None:
        return
    error = jvm.org.apache.logging.log4j.Level.ERROR
    for name in _EXPECTED_WARNINGS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, error)
