"""Spark's state metadata in a query checkpoint (``state/<operator>/_metadata``, version 1 naming
the operator, version 2 under ``v2/`` also the time mode and schema files): which release's state
it holds (:func:`earlier_release`), and a moved checkpoint's schema paths fixed.

Spark 4.1 and 4.2 record version 2's schema files by absolute path, so a checkpoint moved or
restored elsewhere fails to start: :func:`relocate_state_metadata` points them at the
checkpoint's own copies, rewriting each file atomically through Spark's checkpoint file manager.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import SparkSession

from streaming.spark.checkpoint_files import hadoop_path, read_text

log = logging.getLogger(__name__)

#: Spark's names for the value-state operator (the job's) and the group-state one (release 1's).
VALUE_STATES_OPERATOR = "transformWithStateInPandasExec"
GROUP_STATE_OPERATOR = "applyInPandasWithState"
#: The time mode the job's checkpoints record (Spark's name for time mode ``None``).
NO_TIME = "NoTime"

#: A schema file's path: its checkpoint (greedy: a parent named ``state`` is no split), its place.
_SCHEMA_PATH = re.compile(r"^(?P<root>.+)/(?P<inside>state/\d+/_stateSchema/.+)$")


def _metadata_files(spark: SparkSession, location: str) -> Iterator[tuple[Any, Any]]:
    """(Hadoop file system, path) of every state metadata file (versions 1 and 2, no checksums)
    of the checkpoint at ``location``."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    state, fs = hadoop_path(spark, location.rstrip("/") + "/state")
    if not fs.exists(state):
        return
    for operator in sorted((s.getPath() for s in fs.listStatus(state)), key=str):
        root = jvm.org.apache.hadoop.fs.Path(operator, "_metadata")
        if not fs.exists(root):
            continue
        folders = [root]
        v2 = jvm.org.apache.hadoop.fs.Path(root, "v2")
        if fs.exists(v2):
            folders.append(v2)
        for folder in folders:
            for status in fs.listStatus(folder):
                if status.isFile() and not status.getPath().getName().startswith("."):
                    yield fs, status.getPath()


def checkpoint_state_metadata(spark: SparkSession, location: str) -> list[str]:
    """The texts of the state metadata files of the checkpoint at ``location`` (none: [])."""
    return [read_text(spark, fs, path) for fs, path in _metadata_files(spark, location)]


def operator_in(metadata: list[str]) -> str | None:
    """The operator the metadata texts name: "value-states", "group-state" or None."""
    for text in metadata:
        if f'"{VALUE_STATES_OPERATOR}"' in text:
            return "value-states"
        if f'"{GROUP_STATE_OPERATOR}"' in text:
            return "group-state"
    return None


def _version_2(text: str) -> dict[str, Any] | None:
    """The JSON object of a version 2 metadata text (a ``v2`` line, then JSON), else None."""
    version, _, body = text.partition("\n")
    if version.strip() != "v2":
        return None
    try:
        content = json.loads(body)
    except ValueError:
        return None
    return content if isinstance(content, dict) else None


def time_mode_in(metadata: list[str]) -> str | None:
    """The value-state operator's time mode the metadata texts record (``ProcessingTime``,
    ``NoTime``), or None. ``operatorPropertiesJson`` is JSON inside the JSON."""
    for text in metadata:
        content = _version_2(text)
        if content is None:
            continue
        try:
            properties = json.loads(content["operatorPropertiesJson"])
        except (ValueError, KeyError, TypeError):
            continue
        mode = properties.get("timeMode") if isinstance(properties, dict) else None
        if isinstance(mode, str):
            return mode
    return None


def earlier_release(metadata: list[str]) -> str | None:
    """In words, the earlier release's state the metadata texts record: the group-state
    operator (release 1) or value states in processing-time mode (release 2); None for the
    job's own (value states, time mode ``None``) or none."""
    operator = operator_in(metadata)
    if operator == "group-state":
        return "the group-state operator (applyInPandasWithState)"
    mode = time_mode_in(metadata)
    if operator == "value-states" and mode not in (None, NO_TIME):
        return f"value states in time mode {mode}"
    return None


def relocated(text: str, checkpoint: str, exists: Callable[[str], bool]) -> str | None:
    """``text`` (a metadata file) with each schema path of another place pointed at the same
    file in ``checkpoint`` (qualified: ``file:/srv/checkpoint``) where ``exists``; None when
    nothing changes."""
    content = _version_2(text)
    if content is None:
        return None
    changed = False
    for store in content.get("stateStoreInfo") or []:
        paths = store.get("stateSchemaFilePaths") if isinstance(store, dict) else None
        if not isinstance(paths, list):
            continue
        for index, path in enumerate(paths):
            match = _SCHEMA_PATH.match(path) if isinstance(path, str) else None
            if match is None or match["root"] == checkpoint:
                continue
            own = f"{checkpoint}/{match['inside']}"
            if exists(own):
                paths[index] = own
                changed = True
    if not changed:
        return None
    version = text.partition("\n")[0]
    return f"{version}\n{json.dumps(content, separators=(',', ':'))}"


def relocate_state_metadata(spark: SparkSession, location: str) -> list[str]:
    """Point the state metadata of the checkpoint at ``location`` at its own schema files;
    returns the metadata texts as they now stand."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    hadoop = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    Path = jvm.org.apache.hadoop.fs.Path
    files = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    checkpoint: str | None = None
    texts, rewritten = [], 0
    for fs, path in list(_metadata_files(spark, location)):
        if checkpoint is None:  # every file is on the checkpoint's file system
            checkpoint = str(fs.makeQualified(Path(location.rstrip("/"))).toString())
        text = read_text(spark, fs, path)
        new = relocated(text, checkpoint, lambda p, fs=fs: bool(fs.exists(Path(p))))
        if new is not None:
            out = files.create(path.getParent(), hadoop).createAtomic(path, True)
            try:
                out.write(new.encode("utf-8"))
            except Exception:
                out.cancel()
                raise
            out.close()
            rewritten += 1
            text = new
        texts.append(text)
    if rewritten:
        log.info(
            "the checkpoint at %s was moved here: %d state metadata files now name its own "
            "state schema files",
            location,
            rewritten,
        )
    return texts
