"""The ``consumer-offsets`` CLI: parsing, tables, reset arithmetic and CSV without any service;
status and the LOADING guard over a local sink; then, marked slow, every command through the
real broker and the real streaming job."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kafka import KafkaProducer

from connectors.sinks.base import BatchProgress, open_sink
from state.coordinator.model import TopicPartition
from state.engine.outputs import RECORD_FRAME_SCHEMA
from streaming.cli import main as cli
from streaming.cli.main import (
    CsvOffset,
    Progress,
    ResetRow,
    ResetTarget,
    TopicSpec,
    UsageError,
    format_table,
    parse_datetime,
    parse_topic_spec,
    plan_reset,
    read_csv,
    write_csv,
)
from tests.fixtures.job import RunningJob, unique_group
from tests.fixtures.kafka import TopicFactory


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run(*argv: str) -> Run:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err)
    return Run(code, out.getvalue(), err.getvalue())


@pytest.fixture(autouse=True)
def _no_config_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CONSUMER_OFFSETS_") or name == "KAFKA_BOOTSTRAP_SERVERS":
            monkeypatch.delenv(name)


# --- parsing and formatting (no services) -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("orders", TopicSpec("orders")),
        ("orders:0", TopicSpec("orders", (0,))),
        ("my.topic-1:2,0,2", TopicSpec("my.topic-1", (2, 0))),
    ],
)
def test_topic_specs(text: str, expected: TopicSpec) -> None:
    assert parse_topic_spec(text) == expected


@pytest.mark.parametrize("text", [":0", "orders:", "orders:a", "orders:-1", "orders:1,,2"])
def test_bad_topic_specs_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--topic"):
        parse_topic_spec(text)


def test_tables_align_columns_and_show_missing_values_as_dashes() -> None:
    table = format_table(
        ("GROUP", "PARTITION", "LAG"), [("payments", 0, 12345), ("g", 10, None), ("x\ny", 1, 0)]
    )
    assert table.splitlines() == [
        "GROUP     PARTITION  LAG",
        "payments  0          12345",
        "g         10         -",
        "x\\ny      1          0",
    ]
    assert format_table(("A",), []) == "A"
    with pytest.raises(ValueError, match="cells"):
        format_table(("A", "B"), [(1,)])


def test_datetimes_are_iso_8601_with_local_time_when_no_zone_is_given() -> None:
    assert parse_datetime("1970-01-01T00:00:01Z") == 1_000
    assert parse_datetime("1970-01-01T02:00:01.5+02:00") == 1_500
    local = datetime(2024, 5, 1, 12, 0, 0).astimezone()
    assert parse_datetime("2024-05-01T12:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(UsageError, match="ISO 8601"):
        parse_datetime("yesterday")
    assert cli.format_timestamp(1_500) == "1970-01-01T00:00:01.500Z"
    assert cli.format_timestamp(-1) is None


T0, T1, T2 = (TopicPartition("t", p) for p in range(3))
GONE = TopicPartition("gone", 0)
EARLIEST = {T0: 10, T1: 0, T2: 0}
LATEST = {T0: 100, T1: 50, T2: 0}
CURRENT = {T0: 40, T1: -1, T2: 0}


def plan(
    target: ResetTarget, by_time: dict[TopicPartition, int | None] | None = None
) -> list[ResetRow]:
    return plan_reset(target, [T0, T1, T2, GONE], CURRENT, EARLIEST, LATEST, by_time)


def new_offsets(rows: list[ResetRow]) -> list[int | None]:
    return [r.new_offset for r in rows]


def test_reset_to_earliest_latest_and_current() -> None:
    assert new_offsets(plan(ResetTarget("earliest"))) == [10, 0, 0, None]
    assert new_offsets(plan(ResetTarget("latest"))) == [100, 50, 0, None]
    current = plan(ResetTarget("current"))
    assert new_offsets(current) == [40, None, 0, None]
    assert current[1].error == "no committed offset to keep"
    # Every plan keeps the partitions in order, with their current offsets.
    assert [(r.topic, r.partition, r.current_offset) for r in current] == [
        ("t", 0, 40),
        ("t", 1, -1),
        ("t", 2, 0),
        ("gone", 0, -1),
    ]
    assert current[3].error == "UNKNOWN_TOPIC_OR_PARTITION (3)"


def test_reset_to_offset_and_shift_by_are_kept_in_the_log_range() -> None:
    rows = plan(ResetTarget("offset", 60))
    assert new_offsets(rows) == [60, 50, 0, None]
    assert rows[0].note is None
    assert rows[1].note == "60 is after the log end offset 50: using 50"
    low = plan(ResetTarget("offset", 5))
    assert new_offsets(low) == [10, 5, 0, None]
    assert low[0].note == "5 is before the log start offset 10: using 10"
    shifted = plan(ResetTarget("shift", -35))
    assert new_offsets(shifted) == [10, None, 0, None]
    assert shifted[1].error == "no committed offset to shift"
    assert new_offsets(plan(ResetTarget("shift", 7))) == [47, None, 0, None]


def test_reset_to_datetime_uses_the_log_end_where_no_message_is_that_recent() -> None:
    rows = plan(ResetTarget("datetime", 1_000), {T0: 42, T1: None, T2: None})
    assert new_offsets(rows) == [42, 50, 0, None]


def test_csv_round_trip_keeps_awkward_metadata() -> None:
    rows = [
        CsvOffset("g", "t", 0, 5, 3, 'has, comma and "quotes"\nand a newline'),
        CsvOffset("g", "t", 1, 6),
        CsvOffset("h,i", "u", 0, 0, -1, ""),
    ]
    buffer = io.StringIO()
    assert write_csv(rows, buffer) == 3
    assert buffer.getvalue().splitlines()[0] == "group,topic,partition,offset,leader_epoch,metadata"
    buffer.seek(0)
    assert read_csv(buffer) == rows


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty file"),
        ("group,topic,partition,offset\n", "expected header"),
        ("group,topic,partition,offset,leader_epoch,metadata\ng,t,x,1,,\n", "line 2: partition"),
        ("group,topic,partition,offset,leader_epoch,metadata\ng,t,0,-1,,\n", "line 2: .* >= 0"),
        ("group,topic,partition,offset,leader_epoch,metadata\ng,t,0\n", "line 2: expected 6"),
        (
            "group,topic,partition,offset,leader_epoch,metadata\ng,t,0,1,,\ng,t,0,2,,\n",
            "line 3.*line 2",
        ),
    ],
)
def test_bad_import_files_name_the_line(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        read_csv(io.StringIO(text))


def test_empty_leader_epoch_and_blank_lines_are_allowed() -> None:
    text = "group,topic,partition,offset,leader_epoch,metadata\ng,t,0,1,,\n\n"
    assert read_csv(io.StringIO(text)) == [CsvOffset("g", "t", 0, 1, -1, "")]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    progress = Progress("importing", 3, quiet)
    progress.update(1)
    progress.finish()
    assert quiet.getvalue() == ""
    terminal = FakeTerminal()
    progress = Progress("importing", 3, terminal)
    progress.update(1)
    progress.update(3)
    progress.finish()
    assert "\rimporting: 1/3" in terminal.getvalue()
    assert "\rimporting: 3/3" in terminal.getvalue()
    assert terminal.getvalue().endswith("\r")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["nonsense"],
        ["describe"],
        ["describe", "--group", "g", "--all-groups"],
        ["commit", "--group", "g", "--topic", "t", "--partition", "x", "--offset", "1"],
        ["reset-offsets", "--group", "g", "--all-topics"],
        ["reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"],
        ["reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--execute", "--dry-run"],
        ["reset-offsets", "--group", "g", "--to-latest"],
        ["delete-offsets", "--group", "g"],
        ["import"],
    ],
)
def test_usage_errors_exit_2(argv: list[str]) -> None:
    result = run(*argv)
    assert result.code == 2, result
    assert "error" in result.err
    assert result.out == ""


def test_bad_values_found_after_parsing_are_usage_errors_too(tmp_path: Path) -> None:
    sink = f"sqlite:///{tmp_path / 'none.db'}"
    result = run(
        "reset-offsets", "--sink-url", sink, "--group", "g", "--topic", "t:a", "--to-latest"
    )
    assert (result.code, "partitions must be" in result.err) == (2, True)
    result = run(
        "reset-offsets", "--sink-url", sink, "--group", "g", "--topic", "t", "--to-datetime", "soon"
    )
    assert (result.code, "ISO 8601" in result.err) == (2, True)
    missing = run("import", "--sink-url", sink, "--file", str(tmp_path / "missing.csv"))
    assert (missing.code, "cannot read" in missing.err) == (2, True)
    bad_config = tmp_path / "bad.toml"
    bad_config.write_text("no_such_key = 1\n")
    result = run("list", "--config", str(bad_config))
    assert (result.code, "unknown config keys" in result.err) == (2, True)


def test_help_exits_0_and_lists_every_command() -> None:
    result = run("--help")
    assert result.code == 0
    for command in ("list", "describe", "commit", "reset-offsets", "delete-offsets", "delete"):
        assert command in result.out
    for command in ("export", "import", "status", "run", "kafka"):
        assert command in result.out


def test_run_delegates_to_the_streaming_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    import streaming.__main__ as job_main

    seen: list[Any] = []
    monkeypatch.setattr(job_main, "run", lambda args: seen.append(args) or 0)
    result = run("run", "--embedded", "--bootstrap-servers", "h:1", "--partitions", "8")
    assert result.code == 0
    config = job_main.config_from_args(seen[0])
    assert (config.bootstrap_servers, config.partitions, config.replication_factor) == ("h:1", 8, 1)


def test_kafka_delegates_everything_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import connectors.kafka.local as kafka_local

    seen: list[Any] = []
    monkeypatch.setattr(kafka_local, "main", lambda argv: seen.append(argv) or 3)
    assert run("kafka", "status", "--data-dir", "x").code == 3
    assert run("kafka", "--help").code == 3
    assert seen == [["status", "--data-dir", "x"], ["--help"]]


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streaming.cli", "describe"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--group" in done.stderr


# --- a local sink (no Kafka) ------------------------------------------------------------------


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
    assert listed.out.splitlines()[0].split() == ["GROUP", "PARTITIONS", "GENERATION", "MEMBERS"]
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


# --- through the real job ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def job_args(running_job: RunningJob) -> list[str]:
    """Common flags pointing the CLI at the module's job (the config file names its topics)."""
    config = running_job.config
    return [
        "--config",
        str(running_job.config_file),
        "--bootstrap-server",
        config.bootstrap_servers,
        "--sink-url",
        config.sink_url,
        "--timeout",
        "60000",
    ]


def produce_messages(
    bootstrap: str, topic: str, counts: dict[int, int], ts: int | None = None
) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for partition, count in counts.items():
        for _ in range(count):
            producer.send(topic, value=b"x", partition=partition, timestamp_ms=ts)
    producer.flush()
    producer.close()


def committed(job: RunningJob, group: str) -> dict[tuple[str, int], int]:
    with open_sink(job.config.sink_url, read_only=True) as sink:
        return {(o.topic, o.partition): o.offset for o in sink.fetch_offsets(group)}


def commit(
    job_args: list[str], group: str, topic: str, partition: int, offset: int, *extra: str
) -> Run:
    return run(
        "commit",
        *job_args,
        "--group",
        group,
        "--topic",
        topic,
        "--partition",
        str(partition),
        "--offset",
        str(offset),
        *extra,
    )


@pytest.fixture
def data_topic(running_job: RunningJob, topic_factory: TopicFactory) -> str:
    """A 3-partition topic holding 7, 3 and 0 messages."""
    topic = topic_factory(partitions=3)
    produce_messages(running_job.config.bootstrap_servers, topic, {0: 7, 1: 3})
    return topic


@pytest.mark.slow
def test_commit_then_describe_shows_lag_against_real_log_end_offsets(
    running_job: RunningJob, job_args: list[str], data_topic: str
) -> None:
    group = unique_group()
    first = commit(job_args, group, data_topic, 0, 2, "--metadata", "first")
    assert (first.code, first.err) == (0, "")
    assert f"Committed offset 2 for {data_topic}-0" in first.out
    as_json = commit(job_args, group, data_topic, 1, 3, "--json")
    assert as_json.code == 0 and as_json.json()["offset"] == 3

    described = run("describe", *job_args, "--group", group, "--json")
    assert described.code == 0, described
    [description] = described.json()
    rows = {p["partition"]: p for p in description["partitions"]}
    assert (rows[0]["committed_offset"], rows[0]["log_end_offset"], rows[0]["lag"]) == (2, 7, 5)
    assert (rows[1]["committed_offset"], rows[1]["log_end_offset"], rows[1]["lag"]) == (3, 3, 0)
    assert rows[0]["metadata"] == "first" and rows[0]["commit_timestamp_ms"] > 0
    assert description["total_lag"] == 5

    table = run("describe", *job_args, "--group", group)
    lines = table.out.splitlines()
    assert lines[0].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "COMMITTED-AT",
        "METADATA",
    ]
    assert lines[1].split()[:6] == [group, data_topic, "0", "2", "7", "5"]
    assert lines[1].split()[7] == "first"

    missing = run("describe", *job_args, "--group", unique_group("nobody"))
    assert missing.code == 1 and "GROUP_ID_NOT_FOUND (69)" in missing.err


@pytest.mark.slow
def test_commit_failures_print_the_kafka_error_and_exit_1(
    running_job: RunningJob, job_args: list[str]
) -> None:
    group = unique_group()
    too_big = "x" * (running_job.config.metadata_max_bytes + 1)
    result = commit(job_args, group, "t", 0, 1, "--metadata", too_big)
    assert result.code == 1
    assert "OFFSET_METADATA_TOO_LARGE (12)" in result.err
    as_json = commit(job_args, group, "t", 0, 1, "--metadata", too_big, "--json")
    assert as_json.code == 1
    error = as_json.json()["error"]
    assert (error["code"], error["name"]) == (12, "OFFSET_METADATA_TOO_LARGE")
    assert error["partitions"] == [
        {"topic": "t", "partition": 0, "error_code": 12, "error": "OFFSET_METADATA_TOO_LARGE (12)"}
    ]
    negative = commit(job_args, group, "t", 0, -5)
    assert negative.code == 2 and "negative offset" in negative.err
    assert committed(running_job, group) == {}


@pytest.mark.slow
def test_reset_offsets_dry_run_changes_nothing_and_execute_changes_the_listed_partitions(
    running_job: RunningJob, job_args: list[str], data_topic: str
) -> None:
    group = unique_group()
    for partition in range(3):
        assert commit(job_args, group, data_topic, partition, 1 if partition < 2 else 0).code == 0
    before = committed(running_job, group)

    dry = run(
        "reset-offsets", *job_args, "--group", group, "--topic", f"{data_topic}:0,1", "--to-latest"
    )
    assert dry.code == 0, dry
    assert "dry run" in dry.err
    lines = dry.out.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    assert [line.split()[2:] for line in lines[1:]] == [["0", "1", "7"], ["1", "1", "3"]]
    assert committed(running_job, group) == before

    done = run(
        "reset-offsets",
        *job_args,
        "--group",
        group,
        "--topic",
        f"{data_topic}:0,2",
        "--to-latest",
        "--execute",
        "--json",
    )
    assert done.code == 0, done
    answer = done.json()
    assert answer["executed"] is True
    assert [(p["partition"], p["new_offset"]) for p in answer["partitions"]] == [(0, 7), (2, 0)]
    assert committed(running_job, group) == {
        (data_topic, 0): 7,
        (data_topic, 1): 1,
        (data_topic, 2): 0,
    }

    shifted = run(
        "reset-offsets",
        *job_args,
        "--group",
        group,
        "--all-topics",
        "--shift-by",
        "-5",
        "--execute",
    )
    assert shifted.code == 0, shifted
    assert "is before the log start offset 0: using 0" in shifted.err
    assert committed(running_job, group) == {
        (data_topic, 0): 2,
        (data_topic, 1): 0,
        (data_topic, 2): 0,
    }

    earliest = run(
        "reset-offsets",
        *job_args,
        "--group",
        group,
        "--topic",
        data_topic,
        "--to-earliest",
        "--execute",
    )
    assert earliest.code == 0
    assert committed(running_job, group) == {(data_topic, p): 0 for p in range(3)}


@pytest.mark.slow
def test_reset_to_datetime_uses_the_brokers_timestamps(
    running_job: RunningJob, job_args: list[str], topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=1)
    bootstrap = running_job.config.bootstrap_servers
    produce_messages(bootstrap, topic, {0: 2}, ts=1_700_000_000_000)  # 2023-11-14T22:13:20Z
    produce_messages(bootstrap, topic, {0: 3}, ts=1_700_000_100_000)
    group = unique_group()
    result = run(
        "reset-offsets",
        *job_args,
        "--group",
        group,
        "--topic",
        topic,
        "--to-datetime",
        "2023-11-14T22:14:00Z",
        "--execute",
    )
    assert result.code == 0, result
    assert committed(running_job, group) == {(topic, 0): 2}


@pytest.mark.slow
def test_a_group_with_members_refuses_reset_and_delete_like_kafka(
    running_job: RunningJob, job_args: list[str], data_topic: str
) -> None:
    from tests.connectors.client.test_commit_client import add_member

    group = unique_group()
    add_member(running_job, group, data_topic)
    reset = run(
        "reset-offsets",
        *job_args,
        "--group",
        group,
        "--topic",
        data_topic,
        "--to-latest",
        "--execute",
    )
    assert reset.code == 1
    assert "has 1 member(s)" in reset.err
    assert "UNKNOWN_MEMBER_ID (25)" in reset.err
    deleted = run("delete", *job_args, "--group", group)
    assert deleted.code == 1
    assert "NON_EMPTY_GROUP (68)" in deleted.err
    assert [g["group"] for g in run("list", *job_args, "--json").json()].count(group) == 1


@pytest.mark.slow
def test_delete_offsets_and_delete(
    running_job: RunningJob, job_args: list[str], data_topic: str
) -> None:
    group = unique_group()
    for partition in range(3):
        assert commit(job_args, group, data_topic, partition, 1).code == 0
    result = run("delete-offsets", *job_args, "--group", group, "--topic", f"{data_topic}:1")
    assert result.code == 0, result
    assert result.out.splitlines()[1].split() == [data_topic, "1", "Successful"]
    assert committed(running_job, group) == {(data_topic, 0): 1, (data_topic, 2): 1}

    gone = run("delete", *job_args, "--group", group)
    assert gone.code == 0 and "was successful" in gone.out
    assert committed(running_job, group) == {}
    again = run("delete", *job_args, "--group", group, "--json")
    assert again.code == 1
    [entry] = again.json()["groups"]
    assert (entry["deleted"], entry["error"]["code"]) == (False, 69)
    assert "GROUP_ID_NOT_FOUND (69)" in again.err


@pytest.mark.slow
def test_export_and_import_round_trip(
    running_job: RunningJob, job_args: list[str], tmp_path: Path
) -> None:
    source, target = unique_group("export"), unique_group("import")
    assert commit(job_args, source, "t", 0, 11, "--metadata", 'a, "quoted"\nline').code == 0
    assert commit(job_args, source, "t", 1, 12, "--leader-epoch", "5").code == 0
    assert commit(job_args, source, "u", 0, 13).code == 0
    exported = tmp_path / "offsets.csv"
    result = run("export", *job_args, "--group", source, "--file", str(exported), "--json")
    assert result.code == 0 and result.json() == {"file": str(exported), "groups": 1, "offsets": 3}

    # Import the same offsets under another group name.
    with exported.open(newline="", encoding="utf-8") as handle:
        rows = read_csv(handle)
    renamed = tmp_path / "renamed.csv"
    with renamed.open("w", newline="", encoding="utf-8") as handle:
        write_csv(
            [
                CsvOffset(target, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata)
                for r in rows
            ],
            handle,
        )

    dry = run("import", *job_args, "--file", str(renamed))
    assert dry.code == 0 and "dry run" in dry.err
    assert committed(running_job, target) == {}
    assert [line.split()[2:5] for line in dry.out.splitlines()[1:4]] == [
        ["0", "-1", "11"],
        ["1", "-1", "12"],
        ["0", "-1", "13"],
    ]

    done = run("import", *job_args, "--file", str(renamed), "--execute", "--json")
    assert done.code == 0, done
    assert done.json()["executed"] is True
    with open_sink(running_job.config.sink_url, read_only=True) as sink:
        original = [
            (o.topic, o.partition, o.offset, o.leader_epoch, o.metadata)
            for o in sink.fetch_offsets(source)
        ]
        copied = [
            (o.topic, o.partition, o.offset, o.leader_epoch, o.metadata)
            for o in sink.fetch_offsets(target)
        ]
    assert copied == original
    assert ("t", 0, 11, -1, 'a, "quoted"\nline') in copied
    assert ("t", 1, 12, 5, "") in copied

    again = tmp_path / "again.csv"
    assert run("export", *job_args, "--group", target, "--file", str(again)).code == 0
    assert again.read_text(encoding="utf-8") == renamed.read_text(encoding="utf-8")


@pytest.mark.slow
def test_import_reports_failed_groups_and_exits_1(
    running_job: RunningJob, job_args: list[str], tmp_path: Path
) -> None:
    good, bad = unique_group("good"), unique_group("bad")
    too_big = "x" * (running_job.config.metadata_max_bytes + 1)
    path = tmp_path / "mixed.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        write_csv(
            [
                CsvOffset(good, "t", 0, 1),
                CsvOffset(bad, "t", 0, 2, -1, too_big),
                CsvOffset(bad, "t", 1, 3),
            ],
            handle,
        )
    result = run("import", *job_args, "--file", str(path), "--execute")
    assert result.code == 1
    assert f"group {bad!r}" in result.err and "OFFSET_METADATA_TOO_LARGE (12)" in result.err
    assert committed(running_job, good) == {("t", 0): 1}
    # Kafka applies the valid partitions of a commit and rejects the others.
    assert committed(running_job, bad) == {("t", 1): 3}


@pytest.mark.slow
def test_list_and_status_through_the_job(running_job: RunningJob, job_args: list[str]) -> None:
    group = unique_group()
    assert commit(job_args, group, "t", 0, 1).code == 0
    assert group in [g["group"] for g in run("list", *job_args, "--json").json()]
    status = run("status", *job_args, "--json").json()
    assert status["status"] == "ACTIVE" and status["last_batch_id"] >= 0


@pytest.mark.slow
def test_the_installed_command_exits_with_the_kafka_error(
    running_job: RunningJob, job_args: list[str]
) -> None:
    script = Path(sys.executable).with_name("consumer-offsets")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "streaming.cli"]
    group = unique_group()
    too_big = "x" * (running_job.config.metadata_max_bytes + 1)
    done = subprocess.run(
        [
            *command,
            "commit",
            *job_args,
            "--group",
            group,
            "--topic",
            "t",
            "--partition",
            "0",
            "--offset",
            "1",
            "--metadata",
            too_big,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == 12
    assert "OFFSET_METADATA_TOO_LARGE (12)" in done.stderr
