"""Spark's state metadata: a moved checkpoint's schema file paths pointed at its own files.

The pure cases hold ``relocated`` to what it may change; the Spark case moves a real checkpoint
(release 2's, made elsewhere by the value-state operator) and reads its metadata back through
Hadoop, which checks the rewritten file against its checksum.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from streaming.spark.state_metadata import (
    checkpoint_state_metadata,
    earlier_release,
    operator_in,
    relocate_state_metadata,
    relocated,
    time_mode_in,
)

RELEASE_2 = Path(__file__).parent / "data" / "checkpoint-release-2" / "checkpoint.tar.gz"
SCHEMA = "state/0/_stateSchema/default/0_c12e81a2"


def _metadata(*paths: str, version: str = "v2") -> str:
    content = {
        "operatorInfo": {"operatorId": 0, "operatorName": "transformWithStateInPandasExec"},
        "stateStoreInfo": [
            {"storeName": "default", "numPartitions": 2, "stateSchemaFilePaths": list(paths)}
        ],
        "operatorPropertiesJson": json.dumps({"timeMode": "NoTime"}),
    }
    return f"{version}\n{json.dumps(content)}"


def _paths(text: str) -> list[str]:
    body = json.loads(text.partition("\n")[2])
    return [p for store in body["stateStoreInfo"] for p in store["stateSchemaFilePaths"]]


def test_a_moved_checkpoint_names_its_own_schema_files() -> None:
    text = _metadata(f"file:/old/place/checkpoint/{SCHEMA}")
    new = relocated(text, "file:/srv/checkpoint", lambda path: True)
    assert new is not None
    assert _paths(new) == [f"file:/srv/checkpoint/{SCHEMA}"]
    # Nothing else changes: the version line, the operator, its properties.
    assert new.partition("\n")[0] == "v2"
    assert operator_in([new]) == "value-states"
    assert time_mode_in([new]) == "NoTime"


def test_only_paths_to_files_the_checkpoint_holds_change() -> None:
    held = f"file:/srv/checkpoint/{SCHEMA}"
    text = _metadata(f"file:/old/checkpoint/{SCHEMA}", "file:/old/checkpoint/state/0/other")
    asked: list[str] = []

    def exists(path: str) -> bool:
        asked.append(path)
        return path == held

    new = relocated(text, "file:/srv/checkpoint", exists)
    assert new is not None
    # The second path is not a schema file's: it is left as it is, unasked.
    assert _paths(new) == [held, "file:/old/checkpoint/state/0/other"]
    assert asked == [held]


@pytest.mark.parametrize(
    "text",
    [
        # Already its own place.
        _metadata(f"file:/srv/checkpoint/{SCHEMA}"),
        # Version 1 (the group-state operator's) names no schema files.
        '{"operatorInfo":{"operatorName":"applyInPandasWithState"}}',
        # Unreadable.
        "v2\n{not json",
        # No stores, or a store without paths.
        "v2\n" + json.dumps({"stateStoreInfo": [{"storeName": "default"}]}),
    ],
)
def test_nothing_changes_where_there_is_nothing_to_point_elsewhere(text: str) -> None:
    assert relocated(text, "file:/srv/checkpoint", lambda path: True) is None


def test_a_schema_file_the_checkpoint_lacks_is_left_named_where_it_was() -> None:
    # Spark then fails to start naming that file, which says what is missing.
    text = _metadata(f"file:/old/checkpoint/{SCHEMA}")
    assert relocated(text, "file:/srv/checkpoint", lambda path: False) is None


def test_a_checkpoint_under_a_folder_named_state_splits_at_its_own_state_folder() -> None:
    text = _metadata(f"file:/var/state/checkpoint/{SCHEMA}")
    new = relocated(text, "file:/srv/state/checkpoint", lambda path: True)
    assert new is not None
    assert _paths(new) == [f"file:/srv/state/checkpoint/{SCHEMA}"]


def _spark_metadata(operator: str, time_mode: str | None) -> str:
    """A state metadata file as Spark 4.1 writes it (``state/0/_metadata/v2/0``)."""
    properties = {"outputMode": "Update", "stateVariables": []}
    if time_mode is not None:
        properties["timeMode"] = time_mode
    return "v2\n" + json.dumps(
        {
            "operatorInfo": {"operatorId": 0, "operatorName": operator},
            "stateStoreInfo": [],
            "operatorPropertiesJson": json.dumps(properties),
        }
    )


@pytest.mark.parametrize(
    ("metadata", "operator", "time_mode", "earlier"),
    [
        ([], None, None, None),
        # The job's own: value states without timers.
        (
            [_spark_metadata("transformWithStateInPandasExec", "NoTime")],
            "value-states",
            "NoTime",
            None,
        ),
        # Release 2's: value states in processing-time mode.
        (
            [_spark_metadata("transformWithStateInPandasExec", "ProcessingTime")],
            "value-states",
            "ProcessingTime",
            "value states in time mode ProcessingTime",
        ),
        # Release 1's group-state operator: version 1, without operator properties.
        (
            ['{"operatorInfo":{"operatorName":"applyInPandasWithState"}}'],
            "group-state",
            None,
            "the group-state operator (applyInPandasWithState)",
        ),
        # Unreadable properties name no time mode.
        (["v2\n{not json"], None, None, None),
    ],
)
def test_a_checkpoint_of_an_earlier_release_is_told_by_its_operator_and_time_mode(
    metadata: list[str], operator: str | None, time_mode: str | None, earlier: str | None
) -> None:
    assert operator_in(metadata) == operator
    assert time_mode_in(metadata) == time_mode
    assert earlier_release(metadata) == earlier


def test_a_restored_checkpoint_starts_where_it_was_put(tmp_path: Path, spark: Any) -> None:
    with tarfile.open(RELEASE_2) as tar:
        tar.extractall(tmp_path, filter="data")
    checkpoint = tmp_path / "checkpoint"
    (before,) = checkpoint_state_metadata(spark, str(checkpoint))
    assert not any(p.startswith(f"file:{checkpoint}/") for p in _paths(before))
    (metadata_file,) = (checkpoint / "state" / "0" / "_metadata" / "v2").glob("[!.]*")
    inode = metadata_file.stat().st_ino

    (relocated_text,) = relocate_state_metadata(spark, str(checkpoint))

    # Rewritten (a new file renamed into place), and read back through Hadoop, which checks
    # it against its new checksum, as what the call returned.
    rewritten = metadata_file.stat().st_ino
    assert rewritten != inode
    assert checkpoint_state_metadata(spark, str(checkpoint)) == [relocated_text]
    (schema,) = _paths(relocated_text)
    assert schema.startswith(f"file:{checkpoint}/state/0/_stateSchema/default/")
    assert Path(schema.removeprefix("file:")).is_file()
    assert operator_in([relocated_text]) == "value-states"
    assert time_mode_in([relocated_text]) == "ProcessingTime"
    assert earlier_release([relocated_text]) == "value states in time mode ProcessingTime"
    # Once pointed here, a second start reads the same and writes nothing.
    assert relocate_state_metadata(spark, str(checkpoint)) == [relocated_text]
    assert metadata_file.stat().st_ino == rewritten
