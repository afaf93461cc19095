"""The driver JVM's class archive (``streaming/spark/class_archive.py``): the driver is started with
the archive ``deploy/setup.sh`` built, and that archive is one its JVM can map."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from connectors.runtime import HOME_ENV
from streaming.spark import class_archive


def test_options_name_the_archive_only_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    assert class_archive.java_options() == []
    path = class_archive.archive_path()
    assert path.is_relative_to(tmp_path / ".runtime" / "jvm")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    assert class_archive.java_options() == [f"-XX:SharedArchiveFile={path}"]


def test_the_archive_depends_on_the_java_it_was_built_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", "/opt/one-jdk")
    one = class_archive.archive_path()
    monkeypatch.setenv("JAVA_HOME", "/opt/another-jdk")
    assert class_archive.archive_path() != one


@pytest.mark.spark
def test_a_driver_maps_the_archive_setup_built() -> None:
    path = class_archive.archive_path()
    assert path.is_file(), f"{path} is missing: run `bash deploy/setup.sh`"
    # -Xshare:on: a JVM that cannot map the archive (built for another classpath or JDK, or
    # damaged) refuses to start instead of starting without it.
    script = textwrap.dedent(
        """
        from streaming.spark.session import spark_session
        from streaming.spark import class_archive
        options = " ".join(["-Xss16m", "-Xshare:on", *class_archive.java_options()])
        spark = spark_session(
            master="local[1]",
            extra_conf={"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": options},
        )
        arguments = spark.sparkContext._jvm.java.lang.management.ManagementFactory \\
            .getRuntimeMXBean().getInputArguments()
        print("ARGS", " ".join(str(a) for a in arguments))
        print("ROWS", spark.range(3).count())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"-XX:SharedArchiveFile={path}" in result.stdout
    assert "-Xshare:on" in result.stdout
    assert "ROWS 3" in result.stdout
