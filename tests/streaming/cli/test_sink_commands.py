"""Commands over a local SQLite sink, no Kafka: status, list and export read it, and sink
reads fail with COORDINATOR_LOAD_IN_PROGRESS (14) while the job loads."""

from __future__ import annotations

import csv
import io
import re
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


#: team-a may read its groups and the orders. topics; team-b its own.
TENANTS = """
[[tenants]]
name = "team-a"
ingest_topic = "team-a.in"
responses_topic = "team-a.out"
[[tenants.acls]]
resource_type = "GROUP"
pattern_type = "PREFIXED"
resource_name = "team-a."
operation = "READ"
permission_type = "ALLOW"
[[tenants.acls]]
resource_type = "TOPIC"
pattern_type = "PREFIXED"
resource_name = "orders."
operation = "DESCRIBE"
permission_type = "ALLOW"

[[tenants]]
name = "team-b"
ingest_topic = "team-b.in"
responses_topic = "team-b.out"
"""


def test_with_a_tenant_list_describe_and_export_answer_as_kafkas_offset_fetch(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(
        url,
        "ACTIVE",
        ("team-a.orders", "orders.a", 0, 5),
        ("team-a.orders", "orders.a", 1, 6),
        ("team-a.orders", "payroll.salaries", 0, 3),
        ("team-b.billing", "billing.b", 0, 11),
    )
    config = tmp_path / "job.toml"
    config.write_text(TENANTS, encoding="utf-8")
    common = ("--sink-url", url, "--config", str(config), "--bootstrap-server", kafka_bootstrap)
    as_a = (*common, "--tenant", "team-a")

    everyone = run("list", *common, "--json").json()
    assert [(g["group"], g["partitions"]) for g in everyone] == [
        ("team-a.orders", 3),
        ("team-b.billing", 1),
    ]
    listed = run("list", *as_a, "--json").json()
    assert [(g["group"], g["partitions"]) for g in listed] == [("team-a.orders", 2)]

    described = run("describe", "--all-groups", *as_a, "--json")
    assert described.code == 0, described
    [group] = described.json()
    assert group["group"] == "team-a.orders"
    assert [(p["topic"], p["partition"]) for p in group["partitions"]] == [
        ("orders.a", 0),
        ("orders.a", 1),
    ]
    for command in ("describe", "export"):
        refused = run(command, "--group", "team-b.billing", "--group", "team-a.orders", *as_a)
        assert refused.code == 1, refused
        assert "GROUP_AUTHORIZATION_FAILED (30): group 'team-b.billing'" in refused.err
        assert "billing.b" not in refused.out and "payroll" not in refused.out
        assert "orders.a" in refused.out

    exported = run("export", "--all-groups", *as_a)
    assert list(csv.reader(io.StringIO(exported.out)))[1:] == [
        ["team-a.orders", "orders.a", "0", "5", "-1", ""],
        ["team-a.orders", "orders.a", "1", "6", "-1", ""],
    ]
    unknown = run("list", *common, "--tenant", "team-c")
    assert unknown.code == 2 and "--tenant 'team-c'" in unknown.err


def test_status_shows_who_holds_each_lease_and_who_stands_by(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    write_offsets(url, "ACTIVE", ("g", "t", 0, 5))
    with open_sink(url) as job, open_sink(url) as mirror:
        assert job.acquire_lease("job", "active:1/a", 10_000) is not None
        assert mirror.acquire_lease("mirror", "mirror:3/c", 10_000) is not None
        job.register_standby("job", "standby:2/b", "READY")
        data = run("status", "--sink-url", url, "--json").json()
        held, mirrored = data["leases"]
        assert (held["name"], held["holder"], held["epoch"]) == ("job", "active:1/a", 1)
        assert 8_000 < held["expires_in_ms"] <= 10_000 and 0 <= held["renewed_age_ms"] < 2_000
        (standby,) = held["standbys"]
        assert (standby["holder"], standby["state"]) == ("standby:2/b", "READY")
        assert 0 <= standby["heartbeat_age_ms"] < 2_000
        assert (mirrored["name"], mirrored["standbys"]) == ("mirror", [])
        text = run("status", "--sink-url", url).out
        expires = r"lease job\s+active:1/a \(epoch 1, renewed \d+\.\d s ago, expires in \d+\.\d s\)"
        assert re.search(expires, text), text
        assert re.search(r"standby of job\s+standby:2/b READY \(seen \d+\.\d s ago\)", text)
        assert re.search(r"standby of mirror\s+none", text), text
        job.release_lease()
        assert re.search(r"lease job\s+free \(epoch 1\)", run("status", "--sink-url", url).out)
