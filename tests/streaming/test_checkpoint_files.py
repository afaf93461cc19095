"""Which file manager a query writes its checkpoint with (``streaming.spark.checkpoint_files``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streaming.spark.checkpoint_files import (
    FILE_MANAGER_KEY,
    LOCAL_FILE_MANAGER,
    checkpoint_file_settings,
    checkpoint_scheme,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def session(spark: SparkSession) -> Iterator[SparkSession]:
    """The test session, with the file manager setting as the test leaves it undone after."""
    previous = spark.conf.get(FILE_MANAGER_KEY, None)
    yield spark
    if previous is None:
        spark.conf.unset(FILE_MANAGER_KEY)
    else:
        spark.conf.set(FILE_MANAGER_KEY, previous)


@pytest.mark.parametrize(
    ("location", "scheme"),
    [
        ("file:///var/lib/offsets/checkpoint", "file"),
        ("hdfs://namenode:8020/offsets/checkpoint", "hdfs"),
        ("s3a://bucket/offsets/checkpoint", "s3a"),
        # No scheme: the default file system's, the local one here.
        ("relative/checkpoint", "file"),
    ],
)
def test_the_scheme_is_the_locations_else_the_default_file_systems(
    session: SparkSession, location: str, scheme: str
) -> None:
    assert checkpoint_scheme(session, location) == scheme


def test_a_local_checkpoint_gets_the_file_system_based_manager(
    session: SparkSession, tmp_path: Path
) -> None:
    session.conf.unset(FILE_MANAGER_KEY)
    assert checkpoint_file_settings(session, str(tmp_path / "checkpoint")) == {
        FILE_MANAGER_KEY: LOCAL_FILE_MANAGER
    }


def test_other_file_systems_keep_sparks_choice(session: SparkSession) -> None:
    session.conf.unset(FILE_MANAGER_KEY)
    assert checkpoint_file_settings(session, "hdfs://namenode:8020/offsets/checkpoint") == {}


def test_a_manager_the_user_set_is_kept(session: SparkSession, tmp_path: Path) -> None:
    chosen = (
        "org.apache.spark.sql.execution.streaming.checkpointing"
        ".FileContextBasedCheckpointFileManager"
    )
    session.conf.set(FILE_MANAGER_KEY, chosen)
    assert checkpoint_file_settings(session, str(tmp_path / "checkpoint")) == {}
    assert session.conf.get(FILE_MANAGER_KEY) == chosen
