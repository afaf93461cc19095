"""Parsing, exit statuses and delegation of the ``consumer-offsets`` entry point (no
services)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.streaming.cli.support import run


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
        ["serve"],
        ["serve", "--sink-url", "sqlite:///x.db", "--kafka-option", "security.protocol=SSL"],
        ["serve", "--sink-url", "sqlite:///x.db", "--log-end-interval", "0"],
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


def test_serve_reports_a_sink_it_cannot_open(tmp_path: Path) -> None:
    result = run("serve", "--sink-url", f"sqlite:///{tmp_path / 'missing' / 'x.db'}")
    assert result.code == 1, result
    assert "cannot open sink" in result.err


def test_help_exits_0_and_lists_every_command() -> None:
    result = run("--help")
    assert result.code == 0
    for command in ("list", "describe", "commit", "reset-offsets", "delete-offsets", "delete"):
        assert command in result.out
    for command in ("export", "import", "status", "run", "mirror", "serve", "kafka"):
        assert command in result.out


def test_run_delegates_to_the_streaming_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    import streaming.cli.run as job_main

    seen: list[Any] = []
    monkeypatch.setattr(job_main, "run", lambda args: seen.append(args) or 0)
    result = run("run", "--embedded", "--bootstrap-servers", "h:1", "--partitions", "8")
    assert result.code == 0
    config = job_main.config_from_args(seen[0])
    assert (config.bootstrap_servers, config.partitions, config.replication_factor) == ("h:1", 8, 1)


def test_kafka_delegates_everything_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import connectors.kafka.local as kafka_local

    seen: list[Any] = []
    monkeypatch.setattr(kafka_local, "main", lambda argv, prog: seen.append((argv, prog)) or 1)
    assert run("kafka", "status", "--data-dir", "x").code == 1
    assert run("kafka", "--help").code == 1
    assert seen == [
        (["status", "--data-dir", "x"], "consumer-offsets kafka"),
        (["--help"], "consumer-offsets kafka"),
    ]


def test_kafka_usage_names_the_subcommand() -> None:
    result = run("kafka", "--help")
    assert result.code == 0
    assert result.out.startswith("usage: consumer-offsets kafka ")
    bad = run("kafka", "bogus")
    assert bad.code == 2 and "consumer-offsets kafka: error:" in bad.err


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


@pytest.mark.parametrize(
    ("argv", "servers", "options"),
    [
        (["list"], "bootstrap_server", "kafka_option"),
        (["commit", "--group", "g", "--topic", "t", "--partition", "0", "--offset", "1"],
         "bootstrap_server", "kafka_option"),
        (["run"], "bootstrap_servers", "kafka_option"),
        (["serve", "--sink-url", "sqlite:///x.db"], "bootstrap_servers", "kafka_option"),
        (["mirror"], "source_bootstrap_servers", "source_kafka_option"),
    ],
)  # fmt: skip
def test_every_command_takes_kafkas_spellings_and_the_old_ones(
    argv: list[str], servers: str, options: str
) -> None:
    from streaming.cli.main import build_parser

    parser = build_parser()
    kafka_style = parser.parse_args(
        [*argv, "--bootstrap-server", "b:9092", "--kafka-option", "a=1", "--kafka-option", "b=x=y"]
    )
    assert getattr(kafka_style, servers) == "b:9092"
    assert getattr(kafka_style, options) == [("a", "1"), ("b", "x=y")]
    old = parser.parse_args([*argv, "--bootstrap-servers", "c:9092"])
    assert getattr(old, servers) == "c:9092"
    if argv[0] != "mirror":
        both = parser.parse_args([*argv, "--kafka-options", "a=1,b=2", "--kafka-option", "c=3"])
        assert getattr(both, options) == [("a", "1"), ("b", "2"), ("c", "3")]
    bad = run(*argv, "--kafka-option", "novalue")
    assert bad.code == 2 and "expected KEY=VALUE" in bad.err


def test_help_loads_no_library_it_does_not_use() -> None:
    """``--help`` (and every command's parser) starts without the sink's SQL toolkit, Arrow,
    pandas, Spark or the Kafka clients: they cost seconds of a 2-core machine's start."""
    probe = (
        "import contextlib, io, sys\n"
        "from streaming.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "heavy = ('sqlalchemy', 'pyarrow', 'pandas', 'pyspark', 'confluent_kafka', 'psycopg')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
