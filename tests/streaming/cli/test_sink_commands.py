"""Commands over a local SQLite sink, no Kafka: status, list and export read it, and sink
reads fail with COORDINATOR_LOAD_IN_PROGRESS (14) while the job loads."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pyarrow as pa

from connectors.sinks import BatchProgress, open_sink
from state.formats.frames import RECORD_FRAME_SCHEMA
from tests.streaming.cli.support import run


def write_offsets(sink_url: str, status: str, *offsets: tuple[str, str, int, int]) -> None:
    records = [
        {
            "kind": "offset",
            "group_id": g,
            "topic": t,
            "partition": p,
            "offset": o,
            "leader_epoch": -1,
            "metadata": "",
            "commit_timestamp_ms": 1_000,
            "expire_timestamp_ms": None,
            "generation": None,
            "members": None,
            "key": b"k",
            "value": b"v",
        }
        for g, t, p, o in offsets
    ]
    with open_sink(sink_url) as sink:
        table = pa.Table.from_pylist(records, schema=RECORD_FRAME_SCHEMA)
        sink.write_batch(0, table, BatchProgress(0, ingest_offsets={0: 3}, input_rows=2))
        sink.set_status(status, "test")  # type: ignore[arg-type]
        sink.heartbeat()  # a live job wrote this; tests of a dead one age it


def test_status_and_list_read_the_sink(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "ACTIVE", ("g", "t", 0, 5), ("h", "t", 1, 6))
    status = run("status", "--sink-url", url, "--json")
    assert status.code == 0
    data = status.json()
    assert (data["status"], data["last_batch_id"], data["ingest_offsets"]) == (
        "ACTIVE",
        0,
        {"0": 3},
    )
    assert data["last_progress"]["input_rows"] == 2
    table = run("status", "--sink-url", url)
    assert table.code == 0 and table.out.splitlines()[1].split() == ["status", "ACTIVE"]
    groups = run("list", "--sink-url", url, "--json").json()
    assert [(g["group"], g["partitions"]) for g in groups] == [("g", 1), ("h", 1)]
    listed = run("list", "--sink-url", url)
    assert listed.out.splitlines()[0].split() == [
        "GROUP",
        "PARTITIONS",
        "GENERATION",
        "MEMBERS",
        "LAG-SECONDS",
    ]
    assert [line.split()[0] for line in listed.out.splitlines()[1:]] == ["g", "h"]
    exported = run("export", "--sink-url", url, "--all-groups")
    assert list(csv.reader(io.StringIO(exported.out)))[1:] == [
        ["g", "t", "0", "5", "-1", ""],
        ["h", "t", "1", "6", "-1", ""],
    ]


def test_reads_while_the_job_loads_fail_with_code_14(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "LOADING", ("g", "t", 0, 5))
    for argv in (["list"], ["describe", "--group", "g"], ["export", "--group", "g"]):
        result = run(*argv, "--sink-url", url)
        assert result.code == 1, result
        assert "COORDINATOR_LOAD_IN_PROGRESS (14)" in result.err
        assert result.out == ""
    as_json = run("list", "--sink-url", url, "--json")
    assert as_json.code == 1
    assert as_json.json()["error"]["code"] == 14
    assert run("status", "--sink-url", url).code == 0  # status always answers


def test_a_missing_sink_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    result = run("list", "--sink-url", f"sqlite:///{tmp_path / 'nowhere' / 'x.db'}", "--json")
    assert result.code == 1
    assert result.json()["error"]["name"] == "SinkError"
    assert "cannot open sink" in result.err
