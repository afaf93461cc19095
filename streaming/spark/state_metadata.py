"""Spark's state metadata in a query checkpoint: what the job reads from it, and how a moved
checkpoint is made to start again.

Spark keeps, per stateful operator, metadata files under ``state/<operator>/_metadata``: version 1
(the group-state operator's) names the operator; version 2 (``_metadata/v2/<batch>``, the
value-state operator's) also records the time mode and the state schema files. Spark refuses
either changed, so the job reads them before it starts the query: a checkpoint of an earlier
release (:func:`earlier_release`) is migrated to a new one (``streaming.spark.start_plan``).

Spark 4.1 writes version 2's schema files by absolute path (``stateSchemaFilePaths``,
``file:/…/checkpoint/state/0/_stateSchema/default/0_<uuid>``). A checkpoint that was moved, or
restored from a backup to another place, then fails to start: Spark opens the schema file where
the checkpoint was. :func:`relocate_state_metadata` points such paths at the checkpoint's own
copy of the same file, when it has one, before the query starts. Each file is rewritten whole
through Spark's own checkpoint file manager (a temporary file renamed into place, with its
checksum), so a crash leaves the old text or the new one.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Spark's names for the value-state operator (the job's) and the group-state operator (release
#: 1's) in a checkpoint's state metadata.
VALUE_STATES_OPERATOR = "transformWithStateInPandasExec"
GROUP_STATE_OPERATOR = "applyInPandasWithState"
#: The time mode the job's checkpoints record (Spark's name for time mode ``None``).
NO_TIME = "NoTime"

#: A schema file's path: the checkpoint it was written in, then its place inside it. The root is
#: greedy, so a checkpoint under a directory itself named ``state`` still splits at the last one.
_SCHEMA_PATH = re.compile(r"^(?P<root>.+)/(?P<inside>state/\d+/_stateSchema/.+)$")


def _metadata_files(spark: SparkSession, location: str) -> Iterator[tuple[Any, Any]]:
    """(Hadoop file system, path) of every state metadata file of the checkpoint at
    ``location``: each operator's version 1 files and version 2 files, checksums left out."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    state = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/state")
    fs = state.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
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


def _read_text(spark: SparkSession, fs: Any, path: Any) -> str:
    stream = fs.open(path)
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def checkpoint_state_metadata(spark: SparkSession, location: str) -> list[str]:
    """The texts of Spark's state metadata files of the checkpoint at ``location`` (any Hadoop
    file system); empty when it holds no state yet."""
    return [_read_text(spark, fs, path) for fs, path in _metadata_files(spark, location)]


def operator_in(metadata: list[str]) -> str | None:
    """The state operator that state metadata texts (:func:`checkpoint_state_metadata`) name,
    "value-states" or "group-state"; None when none does."""
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
    """The time mode that state metadata texts (:func:`checkpoint_state_metadata`) record for
    the value-state operator, in Spark's words (``ProcessingTime``, ``NoTime``); None when none
    records one. A version 2 object's ``operatorPropertiesJson`` is itself JSON."""
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
    """What earlier release's state the metadata texts record, in words, when it is not the
    job's (value states in time mode ``None``): the group-state operator (release 1) or value
    states in processing-time mode (release 2); None for the job's own or no state."""
    operator = operator_in(metadata)
    if operator == "group-state":
        return "the group-state operator (applyInPandasWithState)"
    mode = time_mode_in(metadata)
    if operator == "value-states" and mode not in (None, NO_TIME):
        return f"value states in time mode {mode}"
    return None


def relocated(text: str, checkpoint: str, exists: Callable[[str], bool]) -> str | None:
    """``text`` (a state metadata file) with every schema file path that names another
    checkpoint's place pointed at the same file in ``checkpoint`` (a qualified path, such as
    ``file:/srv/checkpoint``), when ``exists`` says the checkpoint has it; None when nothing
    changes (version 1, paths already its own, or files it does not have)."""
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
    """Point the checkpoint at ``location``'s state metadata at its own schema files where it
    names those of the place it was moved from (see the module's docstring); returns the
    metadata texts as they now stand (what :func:`checkpoint_state_metadata` reads), so that
    the job reads them once."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    hadoop = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    Path = jvm.org.apache.hadoop.fs.Path
    files = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    checkpoint: str | None = None
    texts, rewritten = [], 0
    for fs, path in list(_metadata_files(spark, location)):
        if checkpoint is None:  # every file is on the checkpoint's file system
            checkpoint = str(fs.makeQualified(Path(location.rstrip("/"))).toString())
        text = _read_text(spark, fs, path)
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


__all__ = [
    "GROUP_STATE_OPERATOR",
    "VALUE_STATES_OPERATOR",
    "checkpoint_state_metadata",
    "earlier_release",
    "operator_in",
    "relocate_state_metadata",
    "relocated",
    "time_mode_in",
]
