"""The one place a SparkSession is made (:func:`spark_session`): the job, the tests and the
benchmarks run with the same state store, jars (``deploy/setup.sh`` resolved them) and workers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from connectors.runtime import spark_jars_dir
from streaming.spark import class_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Default ``spark.sql.shuffle.partitions`` (Spark's 200 makes hundreds of tiny tasks); the job
#: starts its query with its own count (``streaming.spark.job.query_settings``).
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
    """The Maven artifact id in a jar file name, up to the first ``-<digits>.<digits>``:
    ``spark-sql-kafka-0-10_2.13-4.1.1.jar`` -> ``spark-sql-kafka-0-10_2.13``."""
    match = _JAR_NAME.match(file_name)
    return match["artifact"] if match else file_name.removesuffix(".jar")


def pyspark_jar_conflicts(jars: list[Path] | None = None) -> list[str]:
    """Jars among ``jars`` (default :func:`spark_jars`) whose artifact pyspark already ships,
    at any version: which copy loads would depend on classpath order."""
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
    """Create (or return the running) SparkSession configured for this project: RocksDB state
    store with changelog checkpointing, Arrow, UTC, the Kafka connector jars, log level WARN.

    ``master``: else ``$SPARK_MASTER``, else ``local[*]``; ``extra_conf`` overrides every
    default; ``java_options``: driver JVM options (default: the class archive's, if built).
    A second call returns the running session, with the first call's JVM settings.
    """
    # Unset, Spark's Python workers start with `python3` from PATH, without pyarrow/pandas.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    resolved_master = master or os.environ.get("SPARK_MASTER") or "local[*]"
    if resolved_master.startswith("local"):
        # A local run needs nothing but loopback, whatever the hostname resolves to.
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
        # Spark's regex over a stopped query's error (the whole plan) overflows a 1 MB stack.
        "spark.driver.extraJavaOptions": " ".join(
            ["-Xss16m", *(class_archive.java_options() if java_options is None else java_options)]
        ),
        # pyspark's pandas serializer trips FutureWarnings in every worker, once per task.
        "spark.executorEnv.PYTHONWARNINGS": "ignore::FutureWarning",
    }
    if resolved_master.startswith("local"):
        # Only local runs: a cluster's executors must reach the driver.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    conf.update(extra_conf or {})

    conf = {"spark.app.name": app_name, "spark.master": resolved_master, **conf}
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    # Local workers are children of the JVM, which is a child of this process.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    launch_jvm_apart(conf)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    _quiet_expected_warnings(session)
    return session


def launch_jvm_apart(conf: dict[str, str]) -> None:
    """Launch Spark's JVM with ``conf`` in a session (and process group) of its own, unless one
    runs already or spark-submit launched this process (then the JVM is its parent).

    A stop sent to the driver's process group (Ctrl-C in a terminal, ``kill -- -PGID``) then
    reaches the Python driver alone, which stops the query and Spark in order; sent to the JVM
    and its Python workers too, it would end them under the running query. The JVM still ends
    with the driver, however the driver ends: it exits when its stdin, a pipe from the driver,
    closes (pyspark's ``PythonGatewayServer``), and its Python workers exit with it.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    spark_conf = SparkConf()
    for key, value in conf.items():
        spark_conf.set(key, value)
    popen_kwargs: dict[str, Any] = {"start_new_session": True}
    stderr_filter = _worker_output_filter()
    popen_kwargs["stderr"] = stderr_filter.stdin
    try:
        # The builder's SparkContext takes this gateway rather than launching its own.
        SparkContext._ensure_initialized(
            gateway=launch_gateway(spark_conf, popen_kwargs=popen_kwargs)
        )
    finally:
        if stderr_filter.stdin is not None:
            stderr_filter.stdin.close()  # the JVM holds the pipe now: its exit ends the filter


#: The lines Spark's driver-side transformWithState worker prints at each query start (five,
#: each with a blank line after it): raw on the JVM's stderr, so no log level hides them.
_WORKER_CHATTER = rb"^(Starting )?Streaming TransformWithStateInPandas Python worker"
#: What PySpark's daemon prints when a worker's connection closed under it, as a stop closes
#: the workers' sockets: a traceback through ``pyspark/daemon.py`` ending in one of these.
_WORKER_CUT_OFF = rb"^(ConnectionResetError|BrokenPipeError)\b"

#: The filter's program: each line passed on as it comes, but the chatter and its blank lines,
#: and a traceback (held until its last line) of a worker cut off by the JVM.
_FILTER = f"""
import re, sys
chatter, cut_off = re.compile({_WORKER_CHATTER!r}), re.compile({_WORKER_CUT_OFF!r})
skip, held, out = False, [], sys.stderr.buffer
for line in sys.stdin.buffer:
    if held:
        held.append(line)
        if line[:1].isspace():
            continue
        if not (cut_off.match(line) and any(b"pyspark/daemon.py" in h for h in held)):
            out.writelines(held)
        held = []
    elif line.startswith(b"Traceback (most recent call last):"):
        held = [line]
        continue
    elif chatter.match(line):
        skip = True
        continue
    elif not (skip and not line.strip()):
        skip = False
        out.write(line)
    out.flush()
out.writelines(held)
out.flush()
"""


def _worker_output_filter(stderr: int | IO[bytes] | None = None) -> subprocess.Popen[bytes]:
    """A filter between the JVM's stderr and this process's (or ``stderr``): every line passed
    on at once but :data:`_WORKER_CHATTER` with the blank line after each, and a worker's
    traceback of :data:`_WORKER_CUT_OFF`. In the JVM's session, so a signal to the driver's
    group leaves it to pass on the JVM's last lines; it ends when the JVM (and the workers it
    started) closed the pipe."""
    return subprocess.Popen(
        [sys.executable, "-u", "-c", _FILTER],
        stdin=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,
    )


#: Loggers of Spark warnings a query logs in normal operation (a batch longer than the trigger,
#: AQE off in streaming, the state server's end of task, a clean stop's "Failed to cancel job
#: group ... Cannot find active jobs": the query stopped between batches): ERROR only.
_EXPECTED_WARNINGS = (
    "org.apache.spark.scheduler.DAGScheduler",
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
