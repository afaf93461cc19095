"""Every setting of the job and the mirror read as Spark and Kafka will read it, a bad one
refused naming its field before the lease is taken: the trigger interval as Spark 4's
``trigger(processingTime=...)`` parses it (the expected figures are what Spark 4.1's JVM
answered for each string), topics, servers, codecs, starting offsets and the master."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from streaming.config import JobConfig, MirrorConfig
from streaming.setting_checks import interval_ms

#: String -> milliseconds, as ``Trigger.ProcessingTime(s).intervalMs()`` gave them.
SPARK_READS = {
    "100 milliseconds": 100,
    "1 second": 1000,
    "5 seconds": 5000,
    "1 minute": 60_000,
    "1 Second": 1000,
    "  10   seconds  ": 10_000,
    "1\tsecond": 1000,
    "1.5 seconds": 1500,
    ".5 seconds": 500,
    "1 minute 30 seconds": 90_000,
    "3 microseconds 999 milliseconds": 999,
    "500 microseconds": 0,
    "0 seconds": 0,
    "2 hours": 7_200_000,
    "1 day": 86_400_000,
    "1 week": 604_800_000,
    "interval 1 second": 1000,
}
#: Strings Spark refuses (INVALID_INTERVAL_FORMAT, or a month/negative trigger).
SPARK_REFUSES = [
    "soon", "500 ms", "1 sec", "1 secondsx", "1.5 minutes", "10", "seconds", "", "1 month",
    "1 year", "-1 second",
]  # fmt: skip


@pytest.mark.parametrize(("text", "ms"), SPARK_READS.items())
def test_intervals_are_read_as_spark_reads_them(text: str, ms: int) -> None:
    assert interval_ms("trigger_interval", text) == ms


@pytest.mark.parametrize("text", SPARK_REFUSES)
def test_intervals_spark_refuses_are_refused_naming_the_field(text: str) -> None:
    with pytest.raises(ValueError, match=r"^trigger_interval: .*e\.g\. \"100 milliseconds\""):
        interval_ms("trigger_interval", text)


MIRROR = {"source_bootstrap_servers": "h:9092", "sink_url": "sqlite:///m.db"}


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        (JobConfig, "trigger_interval", "soon"),
        (JobConfig, "compression", "lz5"),
        (JobConfig, "compression", "none"),  # a producer codec, not a topic's
        (JobConfig, "starting_offsets", "newest"),
        (JobConfig, "starting_offsets", '{"t": {"0": "x"}}'),
        (JobConfig, "metadata_max_bytes", -1),
        (JobConfig, "min_insync_replicas", 0),
        (JobConfig, "ingest_topic", "bad topic"),
        (JobConfig, "dead_letter_topic", ".."),
        (JobConfig, "bootstrap_servers", ""),
        (JobConfig, "bootstrap_servers", "broker"),
        (JobConfig, "bootstrap_servers", "broker:99999"),
        (JobConfig, "checkpoint_location", " "),
        (JobConfig, "sink_url", ""),
        (JobConfig, "spark_master", "locl[2]"),
        (MirrorConfig, "trigger_interval", "500 ms"),
        (MirrorConfig, "log_end_interval_s", 0),
        (MirrorConfig, "cluster_name", ""),
        (MirrorConfig, "source_bootstrap_servers", "h"),
        (MirrorConfig, "checkpoint_location", ""),
    ],
)
def test_every_bad_setting_is_refused_naming_its_field(kind: Any, field: str, value: Any) -> None:
    base = {**MIRROR, "checkpoint_location": "ckpt"} if kind is MirrorConfig else {}
    with pytest.raises(ValueError, match=f"^{field}"):
        kind(**{**base, field: value})


def test_good_values_of_the_same_fields_pass() -> None:
    config = JobConfig(
        bootstrap_servers="SASL_SSL://a.example:9093, b:9094,[::1]:9092",
        compression="zstd",
        starting_offsets='{"consumer-offsets.commits": {"0": 42, "1": -2}}',
        spark_master="local[2, 3]",
        trigger_interval="interval 2 seconds",
    )
    assert config.compression == "zstd"
    for master in ("local", "local[*]", "spark://h:7077", "yarn", "k8s://https://h:6443"):
        assert JobConfig(spark_master=master).spark_master == master


def test_run_refuses_a_bad_trigger_interval_in_seconds_naming_it() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "streaming", "--trigger-interval", "soon"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "consumer-offsets: error: configuration: trigger_interval: cannot read 'soon'"
    )
    # Refused while reading the settings: no broker, lease or Spark was asked (the
    # interpreter's start-up is most of it).
    assert time.monotonic() - started < 20
