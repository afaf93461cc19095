"""What a newcomer meets: ``--help`` that gives each setting's meaning and default, ``serve
--config``, and errors that say what to do next (a topic the cluster lacks, partitions without an
offset to shift, a changed partition count, a bootstrap server nothing listens on). Real broker,
real SQLite sinks."""

from __future__ import annotations

import dataclasses
import io
import time
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient

from connectors.kafka.admin import TopicConfigurationError
from streaming.cli.failures import report_failure
from streaming.cli.main import build_parser
from streaming.cli.run import field_default
from streaming.cli.serve import ServeSettings, serve_config_from_args
from streaming.config import JobConfig, MirrorConfig, embedded_default
from tests.fixtures.kafka import TopicFactory, topic_name
from tests.streaming.cli.support import run
from tests.streaming.cli.test_sink_commands import write_offsets

#: Nothing listens here.
NO_KAFKA = "127.0.0.1:1"


def flat(text: str) -> str:
    """``--help`` output on one line (argparse wraps it to the terminal)."""
    return " ".join(text.split())


@pytest.mark.parametrize(
    ("command", "kind", "skip"),
    [
        ("run", JobConfig, {"kafka_options", "tenants"}),
        ("mirror", MirrorConfig, {"keep_history"}),
        ("serve", ServeSettings, set()),
    ],
)
def test_help_gives_each_settings_meaning_and_default(
    command: str, kind: type, skip: set[str]
) -> None:
    result = run(command, "--help")
    assert result.code == 0
    text = flat(result.out)
    assert "override" not in text
    for f in dataclasses.fields(kind):
        default = field_default(kind, f.name)
        if f.name in skip or default in (None, (), {}, "", dataclasses.MISSING):
            continue
        shown = str(default).lower() if isinstance(default, bool) else str(default)
        assert f"(default: {shown})" in text, f.name
    assert "deploy/config.example.toml" in text


def test_serve_takes_its_settings_from_the_config_files_serve_table(tmp_path: Path) -> None:
    config = tmp_path / "deployment.toml"
    missing = tmp_path / "missing" / "offsets.db"
    config.write_text(
        f'sink_url = "sqlite:///{missing}"\n'
        '[[tenants]]\nname = "team-a"\ningest_topic = "a.in"\nresponses_topic = "a.out"\n'
        "[serve]\nport = 9001\n"
    )
    args = build_parser().parse_args(["serve", "--config", str(config), "--host", "0.0.0.0"])
    served, tenants = serve_config_from_args(args)
    assert served.sink_url == f"sqlite:///{missing}"  # the job's, from the top level
    assert [t.name for t in tenants] == ["team-a"]  # --tenants: the same file
    assert (args.host, args.port) == ("0.0.0.0", 9001)
    opened = run("serve", "--config", str(config))
    assert opened.code == 1 and "cannot open sink" in opened.err  # the file's sink was used
    config.write_text('[serve]\nsink_url = "sqlite:///x.db"\nlog_end_interval_s = 0\n')
    bad = run("serve", "--config", str(config))
    assert bad.code == 2 and "log_end_interval_s must be > 0" in bad.err


def test_serve_with_the_example_config_serves_the_jobs_default_sink() -> None:
    # The example sets no sink_url anywhere: the job it configures writes its default sink,
    # which serve's --help says it falls back to.
    example = str(Path(__file__).parents[3] / "deploy" / "config.example.toml")
    args = build_parser().parse_args(["serve", "--config", example])
    served, _ = serve_config_from_args(args)
    assert served.sink_url == JobConfig().sink_url
    help_text = flat(run("serve", "--help").out)
    assert "top-level (the job's) sink_url, else the job's default sink" in help_text


def test_a_wrong_bootstrap_server_fails_commit_in_seconds(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "ACTIVE", ("g", "t", 0, 5))  # a live job, so the commit is sent
    started = time.monotonic()
    result = run(
        "commit", "--bootstrap-server", NO_KAFKA, "--sink-url", url,
        "--group", "g", "--topic", "t", "--partition", "0", "--offset", "7",
    )  # fmt: skip
    assert time.monotonic() - started < 10  # not the 30 s --timeout
    assert result.code == 1 and result.err.count("\n") == 1, result.err
    assert f"cannot reach Kafka at {NO_KAFKA}" in result.err
    assert "Nothing was sent" in result.err


@pytest.fixture
def sink_url(tmp_path: Path) -> str:
    """A live job's sink where group ``g`` committed 5 on partition 2 of topic ``orders``."""
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "ACTIVE", ("g", "orders", 2, 5))
    return url


def test_reset_of_a_topic_the_cluster_lacks_says_so_and_how_to_create_it(
    kafka_bootstrap: str, sink_url: str
) -> None:
    common = ["--bootstrap-server", kafka_bootstrap, "--sink-url", sink_url, "--group", "g"]
    absent = topic_name("absent")
    for spec in (absent, f"{absent}:0,1"):
        result = run("reset-offsets", *common, "--topic", spec, "--to-earliest")
        assert result.code == 1
        last = result.err.splitlines()[-1]
        assert f"topic '{absent}' does not exist on the Kafka cluster at {kafka_bootstrap}" in last
        assert (
            f"--list) or create it (kafka-topics.sh --bootstrap-server {kafka_bootstrap} " in last
        )


def test_shift_by_names_the_partitions_without_an_offset_and_the_way_out(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(partitions=3)
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "ACTIVE", ("g", topic, 2, 5))
    result = run(
        "reset-offsets", "--bootstrap-server", kafka_bootstrap, "--sink-url", url,
        "--group", "g", "--topic", f"{topic}:0,1,2", "--shift-by", "-1", "--execute",
    )  # fmt: skip
    assert result.code == 1
    last = result.err.splitlines()[-1]
    assert "2 partition(s) cannot be reset, nothing was committed" in last
    assert f"no committed offset on {topic}-0, {topic}-1 to shift" in last
    assert f"(--topic {topic}:0,1 --to-earliest, --to-latest or --to-offset N)" in last
    assert f"or shift only the others (--topic {topic}:2)" in last


def test_a_changed_partition_count_says_what_differs_and_what_to_do(
    kafka_bootstrap: str, kafka_admin: KafkaAdminClient
) -> None:
    from streaming.spark.topics import ensure_topics

    prefix = topic_name("partitions")
    names = {
        f"{kind}_topic": f"{prefix}.{kind}"
        for kind in ("ingest", "offsets", "responses", "dead_letter")
    }
    created = embedded_default(bootstrap_servers=kafka_bootstrap, partitions=4, **names)
    try:
        ensure_topics(created)
        changed = dataclasses.replace(created, partitions=6, ingest_partitions=2)
        with pytest.raises(TopicConfigurationError) as raised:
            ensure_topics(changed)
        out, err = io.StringIO(), io.StringIO()
        assert report_failure(raised.value, out, err) == 1
        line = err.getvalue()
        assert line.count("\n") == 1 and "unexpected" not in line
        assert f"topic '{prefix}.offsets' has 4 partitions, expected 6" in line
        assert "set partitions = 4 (--partitions 4) to keep this deployment" in line
        assert "export and import --execute" in line
    finally:
        kafka_admin.delete_topics(list(names.values()))
