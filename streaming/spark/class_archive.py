"""The driver JVM's class-data-sharing archive: a Spark session and its first micro-batch start
in about half the time, which is most of what a restarted driver spends before it answers.

A Spark driver loads and verifies some 20,000 classes before its first micro-batch. A dynamic
CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit``) keeps them parsed and verified in a file the
JVM maps at start. ``deploy/setup.sh`` builds it once (``python -m streaming.cli.archive_classes``:
a short query of the job's shape in a JVM started with :func:`dump_options`), and
:func:`java_options` then names it for every driver JVM ``streaming.spark.session`` starts.

The JVM checks the archive itself: one built by another JDK or for another classpath is refused
with one warning line, and the JVM starts as it would without it; a missing one changes nothing.
Its name carries pyspark's version and where pyspark and Java are installed, so setup builds a
new one when either moves. Disk: about 160 MB per archive in ``.runtime/jvm/``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from connectors.runtime import runtime_dir


def archive_path() -> Path:
    """Where setup keeps the archive for this pyspark install and this Java: named by pyspark's
    version and a digest of both paths, so another virtualenv or JDK looks for its own."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java") or ""
    identity = f"{Path(pyspark.__file__).resolve().parent}\n{os.path.realpath(java)}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return runtime_dir() / "jvm" / f"spark-{pyspark.__version__}-{digest}.jsa"


def java_options() -> list[str]:
    """The driver JVM options that use the archive, when it exists."""
    path = archive_path()
    return [f"-XX:SharedArchiveFile={path}"] if path.is_file() else []


def dump_options(path: Path) -> list[str]:
    """JVM options that write the classes the JVM loaded to ``path`` when it exits (the
    classes CDS cannot keep are skipped quietly)."""
    return [f"-XX:ArchiveClassesAtExit={path}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
