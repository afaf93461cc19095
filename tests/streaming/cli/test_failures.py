"""Failures a user can trust, without Kafka: one line per error and the right exit status,
requests that can never succeed refused before anything is sent, and the job's liveness read
from the sink's heartbeat (a real SQLite sink; Kafka at a port nothing listens on)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectors.client.liveness import STALE_AFTER_MS
from connectors.sinks import open_sink
from tests.streaming.cli.support import run
from tests.streaming.cli.test_sink_commands import write_offsets

#: Nothing listens here: Kafka is unreachable.
NO_KAFKA = "127.0.0.1:1"


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The installed command in a process of its own, as a user runs it."""
    script = Path(sys.executable).with_name("consumer-offsets")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "streaming.cli"]
    return subprocess.run(
        [*command, *argv], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["list", "--sink-url", "/tmp/x.db"], "for that SQLite file: sqlite:////tmp/x.db"),
        (["run", "--sink-url", "/tmp/x.db"], "sqlite:///relative/path.db"),
        (["list", "--sink-url", "mysql://u:secret@h/db"], "unsupported sink URL scheme 'mysql'"),
        (["serve", "--sink-url", "mysql://u:secret@h/db"], "postgresql://user:password@"),
    ],
)
def test_a_bad_sink_url_is_one_line_naming_the_accepted_forms(
    argv: list[str], expected: str
) -> None:
    done = cli(*argv)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert "secret" not in done.stderr and "Kafka cluster" not in done.stderr


def test_an_unexpected_failure_is_one_line_unless_debug(tmp_path: Path) -> None:
    folder = tmp_path / "not-a-dir"
    folder.write_text("a file where the sink's folder should be")
    url = f"sqlite:///{folder / 'x.db'}"
    quiet = cli("list", "--sink-url", url)
    assert quiet.returncode == 1 and quiet.stderr.count("\n") == 1, quiet.stderr
    assert "Traceback" not in quiet.stderr
    loud = cli("list", "--sink-url", url, "--log-level", "debug")
    assert loud.returncode == 1 and "Traceback" in loud.stderr


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["commit", "--partition", "-1", "--topic", "t"], "--partition must be >= 0, got -1"),
        (
            ["commit", "--partition", "100000", "--topic", "t"],
            "--partition must be < 100,000 (the job's cap), got 100000",
        ),
        (["commit", "--partition", "0", "--topic", "bad topic!"], "can never exist"),
        (["commit", "--partition", "0", "--topic", "t" * 250], "can never exist"),
        (["commit", "--partition", "0", "--topic", ".."], "not '.' or '..'"),
    ],
)
def test_commits_that_can_never_succeed_exit_2_at_once(
    tmp_path: Path, argv: list[str], expected: str
) -> None:
    started = time.monotonic()
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    result = run(*argv, "--group", "g", "--offset", "1", "--bootstrap-server", NO_KAFKA,
                 "--sink-url", url)  # fmt: skip
    assert (result.code, result.out) == (2, "")
    assert expected in result.err and result.err.count("\n") == 1
    assert time.monotonic() - started < 5
    assert not (tmp_path / "offsets.db").exists()  # nothing was read either


def test_other_requests_that_can_never_succeed_exit_2(tmp_path: Path) -> None:
    common = ["--bootstrap-server", NO_KAFKA, "--sink-url", f"sqlite:///{tmp_path / 'x.db'}"]
    empty = run("delete-offsets", *common, "--group", "", "--topic", "t")
    assert empty.code == 2 and "INVALID_GROUP_ID" in empty.err
    bad = run("reset-offsets", *common, "--group", "g", "--topic", "a/b", "--to-latest")
    assert bad.code == 2 and "can never exist" in bad.err
    partition = run("reset-offsets", *common, "--group", "g", "--topic", "t:-1", "--to-latest")
    assert partition.code == 2 and "non-negative" in partition.err
    history = run("history", *common, "--group", "g", "--topic", "t", "--partition", "-2")
    assert history.code == 2 and "--partition must be >= 0, got -2" in history.err


COMMIT = ["commit", "--group", "g", "--topic", "t", "--partition", "0", "--offset", "1"]


def stale(url: str, status: str) -> None:
    """A sink whose job recorded its last heartbeat long ago."""
    with open_sink(url, clock=lambda: int(time.time() * 1000) - 10 * STALE_AFTER_MS) as sink:
        sink.heartbeat()
        sink.set_status(status, "test")  # type: ignore[arg-type]


def test_status_shows_active_only_while_the_heartbeat_is_fresh(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "ACTIVE", ("g", "t", 0, 5))
    with open_sink(url) as sink:
        sink.heartbeat()
    fresh = run("status", "--sink-url", url, "--json").json()
    assert (fresh["status"], fresh["stored_status"]) == ("ACTIVE", "ACTIVE")
    assert fresh["heartbeat_age_ms"] < STALE_AFTER_MS
    stale(url, "ACTIVE")
    gone = run("status", "--sink-url", url, "--json").json()
    assert (gone["status"], gone["stored_status"]) == ("NOT RESPONDING", "ACTIVE")
    table = run("status", "--sink-url", url)
    assert table.out.splitlines()[1].split()[1:] == ["NOT", "RESPONDING"]
    assert "last seen" in table.out and "ago" in table.out
    listed = run("list", "--sink-url", url)
    assert listed.code == 0 and "note: the offsets job is NOT RESPONDING (last seen" in listed.err


@pytest.mark.parametrize(
    ("status", "argv"),
    [
        ("STOPPED", COMMIT),
        ("ACTIVE", COMMIT),
        ("ACTIVE", ["delete", "--group", "g"]),
        ("ACTIVE", ["delete-offsets", "--group", "g", "--topic", "t:0"]),
        ("STOPPED", ["reset-offsets", "--group", "g", "--topic", "t:0", "--to-offset", "1",
                     "--execute"]),
    ],
)  # fmt: skip
def test_requests_to_a_stopped_or_silent_job_are_refused_at_once(
    tmp_path: Path, status: str, argv: list[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, status, ("g", "t", 0, 5))
    stale(url, status)
    started = time.monotonic()
    result = run(*argv, "--bootstrap-server", NO_KAFKA, "--sink-url", url)
    assert time.monotonic() - started < 5
    assert result.code == 1 and result.err.count("\n") == 1, result.err
    expected = "STOPPED" if status == "STOPPED" else "NOT RESPONDING (last seen"
    assert f"the offsets job is {expected}" in result.err
    assert "nothing was sent" in result.err and "--force" in result.err
    as_json = run(*argv, "--bootstrap-server", NO_KAFKA, "--sink-url", url, "--json")
    assert as_json.code == 1 and as_json.json()["error"]["name"] == "JobNotResponding"


@pytest.mark.parametrize(
    "argv",
    [
        COMMIT,
        ["reset-offsets", "--group", "g", "--all-topics", "--to-committed-at", "1000",
         "--execute"],
    ],
)  # fmt: skip
def test_a_mirrors_sink_takes_no_request_for_the_job(tmp_path: Path, argv: list[str]) -> None:
    """A mirror writes its sink, not the job: a request sent to the job is refused at once
    (a plain cluster has no job to apply it), naming Kafka's own tool for the offsets."""
    url = f"sqlite:///{tmp_path / 'mirror.db'}?table_prefix=mirror_"
    write_offsets(url, "ACTIVE", ("g", "t", 0, 5))
    with open_sink(url) as sink:
        sink.bind_source_cluster("cluster-id", "prod")
    started = time.monotonic()
    result = run(*argv, "--bootstrap-server", NO_KAFKA, "--sink-url", url)
    assert time.monotonic() - started < 5
    assert result.code == 1 and result.err.count("\n") == 1, result.err
    assert "mirror of cluster prod" in result.err and "nothing was sent" in result.err
    assert "kafka-consumer-groups.sh" in result.err and "--force" in result.err
    as_json = run(*argv, "--bootstrap-server", NO_KAFKA, "--sink-url", url, "--json")
    assert as_json.code == 1 and as_json.json()["error"]["name"] == "MirrorSink"


def test_import_refuses_only_when_it_would_send(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "STOPPED", ("g", "t", 0, 5))
    path = tmp_path / "kafka-export.csv"
    path.write_text("t,0,7\n")  # kafka-consumer-groups.sh --reset-offsets --export, one group
    common = ["--bootstrap-server", NO_KAFKA, "--sink-url", url, "--from-file", str(path)]
    dry = run("import", *common, "--group", "g")
    assert dry.code == 0 and dry.out.splitlines()[1].split() == ["g", "t", "0", "5", "7"]
    done = run("import", *common, "--group", "g", "--execute")
    assert done.code == 1 and "the offsets job is STOPPED" in done.err


def test_describe_with_kafka_unreachable_shows_the_sinks_offsets_and_one_warning(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "ACTIVE", ("g", "t", 0, 5), ("g", "t", 1, 6))
    with open_sink(url) as sink:
        sink.heartbeat()
    result = run("describe", "--group", "g", "--bootstrap-server", NO_KAFKA, "--sink-url", url)
    assert result.code == 0, result.err
    assert result.err.splitlines() == [
        f"warning: cannot reach Kafka at {NO_KAFKA} (NoBrokersAvailable): lag unknown"
    ]
    rows = [line.split()[:6] for line in result.out.splitlines()[1:]]
    assert rows == [["g", "t", "0", "5", "-", "-"], ["g", "t", "1", "6", "-", "-"]]


def test_a_starting_job_is_shown_so_and_a_commit_waits_for_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "STARTING", ("g", "t", 0, 5))
    with open_sink(url) as sink:
        sink.heartbeat()
    shown = run("status", "--sink-url", url, "--json").json()
    assert (shown["status"], shown["stored_status"]) == ("STARTING", "STARTING")
    # Not refused: sent, to be answered by the job's first micro-batch (here Kafka is down).
    sent = run(*COMMIT, "--bootstrap-server", NO_KAFKA, "--sink-url", url, "--timeout", "1000")
    assert sent.err.startswith("note: the offsets job is STARTING; waiting for its first"), sent.err
    assert "nothing was sent" not in sent.err
