"""JobConfig, the mirror's and serve's settings: sources in order (TOML < environment < flags),
validation naming the field, secrets kept out of what is printed, the example configuration."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from streaming.cli.run import field_default
from streaming.cli.serve import ServeSettings, load_serve_settings
from streaming.config import JobConfig, MirrorConfig, load_config, load_mirror_config


def test_sources_override_in_order(tmp_path: Path) -> None:
    toml = tmp_path / "job.toml"
    toml.write_text(
        "sink_write_timeout_s = 5\nretention_check_interval_ms = 1000\nstate_partitions = 3\n"
    )
    env = {
        "CONSUMER_OFFSETS_RETENTION_CHECK_INTERVAL_MS": "2000",
        "CONSUMER_OFFSETS_STATE_PARTITIONS": "4",
    }
    config = load_config(toml, env=env, overrides={"state_partitions": "6"})
    assert config.sink_write_timeout_s == 5
    assert config.retention_check_interval_ms == 2000
    assert config.state_partitions == 6


def test_a_setting_an_earlier_release_had_is_ignored_with_a_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    toml = tmp_path / "job.toml"
    toml.write_text('state_operator = "group-state"\nstate_partitions = 3\n')
    with caplog.at_level("WARNING", logger="streaming.config"):
        config = load_config(toml, env={})
    assert config.state_partitions == 3
    (line,) = [r.getMessage() for r in caplog.records]
    assert "state_operator is no longer a setting, ignored" in line
    assert "migrates a checkpoint of the group-state operator" in line


def test_defaults_follow_kafka() -> None:
    config = load_config(env={})
    assert config.retention_check_interval_ms == 600_000  # offsets.retention.check.interval.ms
    assert config.retention_ms == 7 * 24 * 3600 * 1000  # offsets.retention.minutes = 10080
    assert config.partitions == 50  # offsets.topic.num.partitions
    assert config.state_partitions is None
    assert config.max_offsets_per_trigger == 2_000  # a catch-up in bounded sink writes
    # New ingest topics: the largest divisor of the shard count up to 2.
    assert config.ingest_topic_partitions == 2
    assert JobConfig(partitions=7).ingest_topic_partitions == 1
    assert JobConfig(partitions=50, ingest_partitions=25).ingest_topic_partitions == 25


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sink_write_timeout_s", -1),
        ("retention_check_interval_ms", 0),
        ("state_partitions", 0),
        ("partitions", 0),
        ("rebuild_sink_writes", "workers"),
        ("ingest_partitions", 3),  # does not divide the 50 shards
        ("ingest_partitions", 0),
        ("state_cache_mb", -1),
        ("max_offsets_per_trigger", -1),
    ],
)
def test_invalid_values_are_refused_naming_the_field(field: str, value: int | str) -> None:
    with pytest.raises(ValueError, match=field):
        JobConfig(**{field: value})


def test_unparseable_value_names_the_field() -> None:
    with pytest.raises(ValueError, match="'state_partitions'"):
        load_config(env={"CONSUMER_OFFSETS_STATE_PARTITIONS": "many"})


def test_kafka_bootstrap_servers_is_the_fallback_of_the_job() -> None:
    env = {"KAFKA_BOOTSTRAP_SERVERS": "fallback:9092"}
    assert load_config(env=env).bootstrap_servers == "fallback:9092"
    env["CONSUMER_OFFSETS_BOOTSTRAP_SERVERS"] = "own:9092"
    assert load_config(env=env).bootstrap_servers == "own:9092"


def test_mirror_settings_from_file_environment_and_flags(tmp_path: Path) -> None:
    toml = tmp_path / "mirror.toml"
    toml.write_text(
        'source_bootstrap_servers = "prod:9093"\n'
        'sink_url = "sqlite:///file.db"\n'
        'checkpoint_location = "ckpt"\n'
        "log_end_interval_s = 30\n"
        "[source_kafka_options]\n"
        '"security.protocol" = "SASL_SSL"\n'
        '"sasl.jaas.config" = "ScramLoginModule required password=\\"hunter2\\";"\n'
    )
    env = {
        "CONSUMER_OFFSETS_MIRROR_SINK_URL": "postgresql://u:pw@db/offsets",
        "CONSUMER_OFFSETS_MIRROR_KEEP_HISTORY": "false",
    }
    config = load_mirror_config(toml, env=env, overrides={"cluster_name": "prod"})
    assert (config.source_bootstrap_servers, config.checkpoint_location) == ("prod:9093", "ckpt")
    assert config.sink_url == "postgresql://u:pw@db/offsets"
    assert (config.keep_history, config.cluster_name, config.log_end_interval_s) == (
        False,
        "prod",
        30.0,
    )
    assert config.source_kafka_options["security.protocol"] == "SASL_SSL"
    # Secrets never reach a printed configuration.
    printed = repr(config)
    assert "hunter2" not in printed and "pw@" not in printed
    assert "SASL_SSL" in printed


def test_mirror_settings_name_what_is_missing() -> None:
    with pytest.raises(ValueError, match="--source-bootstrap-servers, --checkpoint-location"):
        load_mirror_config(env={"CONSUMER_OFFSETS_MIRROR_SINK_URL": "sqlite:///x.db"})
    with pytest.raises(ValueError, match="unknown config key 'bootstrap_servers'"):
        load_mirror_config(env={}, overrides={"bootstrap_servers": "x"})


EXAMPLE = Path(__file__).parents[2] / "deploy" / "config.example.toml"
SETTINGS = {None: JobConfig, "mirror": MirrorConfig, "serve": ServeSettings}


def live_example(tmp_path: Path) -> tuple[Path, dict[str | None, set[str]]]:
    """The example configuration with every commented setting made live (``# key = value``
    lines and ``# [[tenants]]`` headers), and the keys of each table its lines mark examples
    (a setting unset by default), the others showing defaults."""
    lines, examples = [], {}
    table: str | None = None
    for line in EXAMPLE.read_text().splitlines():
        header = re.match(r"#? ?\[\[?([\w.]+)\]\]?$", line)
        setting = re.match(r"# ((\w+) = .+)$", line)
        if header:
            table = header.group(1)
            lines.append(line.lstrip("# "))
        elif setting:
            if line.endswith("# example"):
                examples.setdefault(table, set()).add(setting.group(2))
            lines.append(setting.group(1))
        else:
            lines.append(line)
    path = tmp_path / "live.toml"
    path.write_text("\n".join(lines) + "\n")
    return path, examples


def test_the_example_configuration_loads_as_is_and_sets_nothing() -> None:
    assert load_config(EXAMPLE, env={}) == JobConfig()
    required = {
        "source_bootstrap_servers": "k:9092",
        "sink_url": "sqlite:///m.db",
        "checkpoint_location": "c",
    }
    mirror = load_mirror_config(EXAMPLE, env={}, overrides=required)
    assert mirror == MirrorConfig(**required)
    serve = load_serve_settings(EXAMPLE, env={}, overrides={"sink_url": "sqlite:///s.db"})
    assert serve == ServeSettings(sink_url="sqlite:///s.db")


def test_the_example_configuration_names_every_setting_with_its_default(tmp_path: Path) -> None:
    path, examples = live_example(tmp_path)
    data = tomllib.loads(path.read_text())
    loaded = {
        None: load_config(path, env={}),
        "mirror": load_mirror_config(path, env={}),
        "serve": load_serve_settings(path, env={}),
    }
    for table, kind in SETTINGS.items():
        keys = set(data if table is None else data[table])
        for f in dataclasses.fields(kind):
            assert f.name in keys, f"{f.name} of {kind.__name__} is not in {EXAMPLE.name}"
            if f.name not in examples.get(table, set()) and f.name != "tenants":
                shown = getattr(loaded[table], f.name)
                assert shown == field_default(kind, f.name), f"{kind.__name__}.{f.name}"
    assert [t.name for t in loaded[None].tenants] == ["team-a"]


def test_serve_settings_from_its_table_the_jobs_keys_environment_and_flags(
    tmp_path: Path,
) -> None:
    toml = tmp_path / "deployment.toml"
    toml.write_text(
        'sink_url = "sqlite:///job.db"\nbootstrap_servers = "job:9092"\n'
        'kafka_options = { "security.protocol" = "SSL" }\npartitions = 10\n'
        '[serve]\nport = 9000\ncluster_name = "prod"\n'
    )
    env = {"CONSUMER_OFFSETS_SERVE_PORT": "9100"}
    settings = load_serve_settings(toml, env=env, overrides={"cluster_name": "flag"})
    assert (settings.sink_url, settings.bootstrap_servers) == ("sqlite:///job.db", "job:9092")
    assert settings.kafka_options == {"security.protocol": "SSL"}
    assert (settings.port, settings.cluster_name) == (9100, "flag")
    # The job reads the same file without the [serve] table.
    assert load_config(toml, env={}).partitions == 10
    toml.write_text("[serve]\nno_such_setting = 1\n")
    with pytest.raises(ValueError, match=r"unknown config keys in \[serve\].*no_such_setting"):
        load_serve_settings(toml, env={}, overrides={"sink_url": "sqlite:///x.db"})
    with pytest.raises(ValueError, match="missing config: --sink-url"):
        load_serve_settings(env={})


def test_a_setting_read_from_the_file_its_file_variable_names(tmp_path: Path) -> None:
    """``<PREFIX><FIELD>_FILE`` names a file holding the value (a Kubernetes Secret mounted
    as files), for the job, the mirror and serve alike; one trailing newline is not part of
    it. The value never has to be in the environment."""
    url = tmp_path / "writer-url"
    url.write_text("postgresql://writer:pw@db:5432/offsets\n", encoding="utf-8")
    options = tmp_path / "kafka-options"
    options.write_text("sasl.mechanism=PLAIN,security.protocol=SASL_SSL", encoding="utf-8")
    job = load_config(
        env={
            "CONSUMER_OFFSETS_SINK_URL_FILE": str(url),
            "CONSUMER_OFFSETS_KAFKA_OPTIONS_FILE": str(options),
        }
    )
    assert job.sink_url == "postgresql://writer:pw@db:5432/offsets"
    assert job.kafka_options == {"sasl.mechanism": "PLAIN", "security.protocol": "SASL_SSL"}
    mirror = load_mirror_config(
        env={
            "CONSUMER_OFFSETS_MIRROR_SINK_URL_FILE": str(url),
            "CONSUMER_OFFSETS_MIRROR_SOURCE_BOOTSTRAP_SERVERS": "kafka:9092",
            "CONSUMER_OFFSETS_MIRROR_CHECKPOINT_LOCATION": str(tmp_path / "cp"),
        }
    )
    assert mirror.sink_url == job.sink_url
    serve = load_serve_settings(env={"CONSUMER_OFFSETS_SERVE_SINK_URL_FILE": str(url)})
    assert serve.sink_url == job.sink_url


def test_a_file_variable_beside_its_value_or_an_unreadable_file_is_refused(
    tmp_path: Path,
) -> None:
    url = tmp_path / "writer-url"
    url.write_text("sqlite:///a.db", encoding="utf-8")
    both = {
        "CONSUMER_OFFSETS_SINK_URL": "sqlite:///b.db",
        "CONSUMER_OFFSETS_SINK_URL_FILE": str(url),
    }
    with pytest.raises(
        ValueError, match="CONSUMER_OFFSETS_SINK_URL and CONSUMER_OFFSETS_SINK_URL_FILE"
    ):
        load_config(env=both)
    missing = tmp_path / "absent"
    with pytest.raises(ValueError, match=f"CONSUMER_OFFSETS_SINK_URL_FILE: cannot read {missing}"):
        load_config(env={"CONSUMER_OFFSETS_SINK_URL_FILE": str(missing)})
