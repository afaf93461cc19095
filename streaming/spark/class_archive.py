"""The driver JVM's class-data-sharing archive: the ~20,000 classes a driver loads before its
first micro-batch, kept parsed and verified, so a session and that batch start in about half the
time. ``deploy/setup.sh`` builds it once (``python -m streaming.cli.archive_classes``); every
driver then maps it (:func:`java_options`). The JVM refuses, with a warning, an archive of another
JDK or classpath; a missing one changes nothing. About 160 MB in ``.runtime/jvm/``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from connectors.runtime import runtime_dir


def archive_path() -> Path:
    """Where the archive for this pyspark install and this Java is kept (named by pyspark's
    version and a digest of both paths)."""
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
    """JVM options that write the classes loaded to ``path`` at exit, quietly."""
    return [f"-XX:ArchiveClassesAtExit={path}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
