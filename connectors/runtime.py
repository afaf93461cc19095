"""Where the project's runtime files live: the git-ignored ``.runtime/`` folder of the checkout
(the jars ``deploy/setup.sh`` resolves, the local broker's data, the default sink)."""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variable naming the folder that holds ``.runtime/`` (normally the checkout).
HOME_ENV = "CONSUMER_OFFSETS_HOME"


def project_home() -> Path:
    """The folder that holds ``.runtime/``: ``$CONSUMER_OFFSETS_HOME``, else this module's
    checkout (it has ``deploy/pom.xml``), else the current directory."""
    override = os.environ.get(HOME_ENV)
    if override:
        return Path(override).expanduser().resolve()
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "deploy" / "pom.xml").is_file():
        return checkout
    return Path.cwd()


def runtime_dir() -> Path:
    """The git-ignored folder for resolved jars, the local broker's data and logs."""
    return project_home() / ".runtime"


def spark_jars_dir() -> Path:
    """Spark's Kafka connector and the jars it needs beyond pyspark's own."""
    return runtime_dir() / "jars" / "spark"


def kafka_jars_dir() -> Path:
    """The Apache Kafka broker's classpath (``java -cp '<dir>/*' kafka.Kafka``)."""
    return runtime_dir() / "jars" / "kafka"
