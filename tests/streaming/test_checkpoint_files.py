"""A query's checkpoint on its file system (``streaming.spark.checkpoint_files``): the file manager
it is written with, and what a migration reads from it and where it moves it."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streaming.spark.checkpoint_files import (
    FILE_MANAGER_KEY,
    LOCAL_FILE_MANAGER,
    checkpoint_file_settings,
    checkpoint_scheme,
    committed_positions,
    move_aside,
    planned_positions,
    planned_positions_reader,
    source_positions,
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


RELEASE_1 = Path(__file__).parent / "data" / "checkpoint-release-1" / "checkpoint.tar.gz"


def test_an_offset_log_entry_gives_each_kafka_sources_positions() -> None:
    text = 'v1\n{"batchWatermarkMs":0}\n{"a":{"0":5,"1":7}}\n-\n{"b":{"0":1}}'
    assert source_positions(text) == {"a": {0: 5, 1: 7}, "b": {0: 1}}
    assert source_positions('v1\n{"batchWatermarkMs":0}\n-') == {}


def test_a_migration_starts_where_the_last_committed_batch_ended(
    tmp_path: Path, session: SparkSession
) -> None:
    with tarfile.open(RELEASE_1) as tar:
        tar.extractall(tmp_path, filter="data")
    checkpoint = tmp_path / "checkpoint"
    expected = {"resume-release1.commits": {0: 0, 1: 3, 2: 0, 3: 0}}
    assert committed_positions(session, str(checkpoint)) == expected
    # A batch planned but never committed (the driver died mid-batch) is not a start.
    planned = (checkpoint / "offsets" / "1").read_text().replace('"1":3', '"1":9')
    (checkpoint / "offsets" / "2").write_text(planned)
    assert committed_positions(session, str(checkpoint)) == expected

    aside = move_aside(session, str(checkpoint), "earlier-release")
    assert aside.startswith(f"{checkpoint}.earlier-release-")
    assert not checkpoint.exists()
    assert committed_positions(session, aside) == expected
    assert committed_positions(session, str(checkpoint)) == {}


def test_a_local_checkpoints_planned_ends_are_read_as_spark_reads_them(
    tmp_path: Path, session: SparkSession
) -> None:
    with tarfile.open(RELEASE_1) as tar:
        tar.extractall(tmp_path, filter="data")
    checkpoint = tmp_path / "checkpoint"
    planned = planned_positions(session, str(checkpoint), 1)
    assert planned == {"resume-release1.commits": {0: 0, 1: 3, 2: 0, 3: 0}}
    for location in (str(checkpoint), f"file://{checkpoint}/"):
        assert planned_positions_reader(session, location)(1) == planned
