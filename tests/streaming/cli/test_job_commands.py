"""Every command through the real broker and the real streaming job (slow)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from connectors.sinks import open_sink
from streaming.cli.commands.transfer import CsvOffset, read_csv, write_csv
from tests.fixtures.job import RunningJob, unique_group
from tests.fixtures.kafka import TopicFactory
from tests.streaming.cli.support import Run, run


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


def reset(job_args: list[str], group: str, *flags: str) -> Run:
    """``reset-offsets --group group *flags`` against the module's job."""
    return run("reset-offsets", *job_args, "--group", group, *flags)


def per_partition(topic: str, *offsets: int) -> dict[tuple[str, int], int]:
    """``{(topic, p): offsets[p]}``, the shape :func:`committed` answers."""
    return {(topic, p): offset for p, offset in enumerate(offsets)}


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
    assert " ".join(lines[0].split()) == (
        "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG LAG-SECONDS COMMITTED-AT METADATA"
    )
    assert lines[1].split()[:6] == [group, data_topic, "0", "2", "7", "5"]
    assert lines[1].split()[-1] == "first"

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

    dry = reset(job_args, group, "--topic", f"{data_topic}:0,1", "--to-latest")
    assert dry.code == 0, dry
    assert "dry run" in dry.err
    lines = dry.out.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    assert [line.split()[2:] for line in lines[1:]] == [["0", "1", "7"], ["1", "1", "3"]]
    assert committed(running_job, group) == before

    done = reset(
        job_args, group, "--topic", f"{data_topic}:0,2", "--to-latest", "--execute", "--json"
    )
    assert done.code == 0, done
    answer = done.json()
    assert answer["executed"] is True
    assert [(p["partition"], p["new_offset"]) for p in answer["partitions"]] == [(0, 7), (2, 0)]
    assert committed(running_job, group) == per_partition(data_topic, 7, 1, 0)

    shifted = reset(job_args, group, "--all-topics", "--shift-by", "-5", "--execute")
    assert shifted.code == 0, shifted
    assert "is before the log start offset 0: using 0" in shifted.err
    assert f"committed: 3 partition(s) of group {group!r} reset, as above" in shifted.err
    assert committed(running_job, group) == per_partition(data_topic, 2, 0, 0)

    earliest = reset(job_args, group, "--topic", data_topic, "--to-earliest", "--execute")
    assert earliest.code == 0
    assert committed(running_job, group) == per_partition(data_topic, 0, 0, 0)


@pytest.mark.slow
def test_reset_to_datetime_uses_the_brokers_timestamps(
    running_job: RunningJob, job_args: list[str], topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=1)
    bootstrap = running_job.config.bootstrap_servers
    produce_messages(bootstrap, topic, {0: 2}, ts=1_700_000_000_000)  # 2023-11-14T22:13:20Z
    produce_messages(bootstrap, topic, {0: 3}, ts=1_700_000_100_000)
    group = unique_group()
    result = reset(
        job_args, group, "--topic", topic, "--to-datetime", "2023-11-14T22:14:00Z", "--execute"
    )
    assert result.code == 0, result
    assert committed(running_job, group) == {(topic, 0): 2}


@pytest.mark.slow
def test_reset_to_committed_at_puts_the_group_back_where_it_was(
    running_job: RunningJob, job_args: list[str], data_topic: str
) -> None:
    group = unique_group()
    assert commit(job_args, group, data_topic, 0, 2).code == 0
    assert commit(job_args, group, data_topic, 1, 1).code == 0
    time.sleep(0.2)
    then = int(time.time() * 1000)
    time.sleep(0.2)
    for partition, offset in enumerate((6, 3, 0)):  # the group moves on; p2's first commit
        assert commit(job_args, group, data_topic, partition, offset).code == 0
    moved = per_partition(data_topic, 6, 3, 0)
    assert committed(running_job, group) == moved

    dry = reset(job_args, group, "--all-topics", "--to-committed-at", str(then), "--json")
    assert dry.code == 0, dry
    rows = [
        (p["partition"], p["current_offset"], p["new_offset"]) for p in dry.json()["partitions"]
    ]
    assert rows == [(0, 6, 2), (1, 3, 1), (2, 0, None)]
    assert f"{data_topic}-2: no commit at or before that time: left alone" in dry.err
    assert committed(running_job, group) == moved

    done = reset(job_args, group, "--all-topics", "--to-committed-at", str(then), "--execute")
    assert done.code == 0, done
    assert committed(running_job, group) == per_partition(data_topic, 2, 1, 0)


@pytest.mark.slow
def test_a_group_with_members_refuses_reset_and_delete_like_kafka(
    running_job: RunningJob, job_args: list[str], data_topic: str
) -> None:
    from tests.connectors.client.test_commit_client import add_member

    group = unique_group()
    add_member(running_job, group, data_topic)
    refused = reset(job_args, group, "--topic", data_topic, "--to-latest", "--execute")
    assert refused.code == 1
    assert "has 1 member(s)" in refused.err
    assert "UNKNOWN_MEMBER_ID (25)" in refused.err
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


def readme_sequence() -> list[list[str]]:
    """The README's "Locally" command sequence (the block that commits to ``orders``), each
    line's arguments after ``$cli``, comments dropped."""
    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    blocks = readme.split("```bash\n")[1:]
    block = next(b.split("```")[0] for b in blocks if "$cli commit --group g --topic orders" in b)
    return [
        shlex.split(line, comments=True)[1:]
        for line in block.splitlines()
        if line.startswith("$cli ")
    ]


@pytest.mark.slow
def test_the_readmes_sequence_runs_as_shown(
    running_job: RunningJob, job_args: list[str], topic_factory: TopicFactory, tmp_path: Path
) -> None:
    """Every command of the README's sequence exits 0 against a real job, with only the names
    made unique (group ``g``, topic ``orders``, the CSV file) and the job's flags added; the
    offsets it leaves are the ones the README's steps make. Last in the module: its
    ``import`` commits every exported group again."""
    topic = topic_factory(partitions=2)
    produce_messages(running_job.config.bootstrap_servers, topic, {0: 100, 1: 100})
    group = unique_group("readme")
    names = {"g": group, "orders": topic, "offsets.csv": str(tmp_path / "offsets.csv")}
    sequence = readme_sequence()
    assert [a[0] for a in sequence][:3] == ["status", "commit", "commit"], sequence
    for argv in sequence:
        args = [names.get(a, a.replace("orders:", f"{topic}:")) for a in argv]
        result = run(args[0], *job_args, *args[1:])
        assert result.code == 0, (args, result.err)
    # commit 42/17, shift by -10, export, delete, import: as exported.
    assert committed(running_job, group) == {(topic, 0): 32, (topic, 1): 7}
