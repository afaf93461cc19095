"""``describe --as-of``: a group's committed offsets as of a past time over a SQLite sink's
history, no Kafka: each partition's commit in force then, its time and how exact it is."""

from __future__ import annotations

from pathlib import Path

from connectors.sinks import open_sink
from connectors.sinks.retention import ThinningMarks, thin_history
from connectors.sinks.values import now_ms
from state.commit_history import MINUTE
from streaming.cli.output import format_timestamp
from tests.connectors.sinks.record_frames import commit, frame, progress
from tests.streaming.cli.support import run


def _write(url: str, *batches: list[tuple[str, int, int, int]]) -> None:
    """One batch per list of (topic, partition, offset, commit time), then thinned now."""
    with open_sink(url, keep_history=True) as sink:
        for batch_id, commits in enumerate(batches):
            records = [commit("g", t, p, o, commit_timestamp_ms=at) for t, p, o, at in commits]
            assert sink.write_batch(batch_id, frame(*records), progress(batch_id))
        thin_history(sink, now_ms(), ThinningMarks(), pause_s=0)
        sink.set_status("ACTIVE", "test")
        sink.heartbeat()


def test_as_of_answers_the_commit_in_force_then_and_how_exact(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    now = now_ms()
    a, b = now - 5 * MINUTE, now - 2 * MINUTE
    # Three hours ago: one commit a 10-minute bucket is kept; offset 2 supersedes 1.
    bucket = now - 3 * 60 * MINUTE
    bucket -= bucket % (10 * MINUTE)
    _write(
        url,
        [("t", 0, 0, bucket - 5 * MINUTE), ("t", 1, 0, bucket - 5 * MINUTE)],
        [("t", 0, 1, bucket + MINUTE)],
        [("t", 0, 2, bucket + 5 * MINUTE)],
        [("t", 0, 100, a), ("t", 1, 50, a)],
        [("t", 0, 200, b), ("t", 2, 300, b)],
    )
    between = format_timestamp(a + 30_000)
    assert between is not None
    for when in (between, str(a + 30_000)):
        done = run("describe", "--sink-url", url, "--group", "g", "--as-of", when, "--json")
        assert done.code == 0, done.err
        (group,) = done.json()
        assert [
            (p["topic"], p["partition"], p["offset"], p["exact"]) for p in group["partitions"]
        ] == [
            ("t", 0, 100, True),
            ("t", 1, 50, True),
        ]
        assert group["partitions"][0]["commit_timestamp_ms"] == a
        assert group["no_commit_then"] == [{"topic": "t", "partition": 2}]
    table = run("describe", "--sink-url", url, "--group", "g", "--as-of", between)
    lines = table.out.splitlines()
    assert lines[0].split() == [
        "GROUP", "TOPIC", "PARTITION", "OFFSET", "COMMITTED-AT", "EXACT-AS-OF", "METADATA"
    ]  # fmt: skip
    assert lines[1].split()[:6] == ["g", "t", "0", "100", format_timestamp(a), "exact"]
    assert "no commit then" in lines[3]

    # In the thinned range t-0's offset 1 is gone (2 superseded it in its bucket): its answer
    # is exact as of the bucket's start; t-1 kept every commit of the bucket: exact.
    old = run(
        "describe", "--sink-url", url, "--group", "g", "--as-of", str(bucket + 2 * MINUTE), "--json"
    )  # fmt: skip
    assert old.code == 0
    (group,) = old.json()
    answers = {p["partition"]: p for p in group["partitions"]}
    assert (answers[0]["offset"], answers[0]["exact"]) == (0, False)
    assert answers[0]["exact_as_of_ms"] == bucket - 1
    assert (answers[1]["offset"], answers[1]["exact"]) == (0, True)

    # history says where it is thinned: one commit a second for minutes, a 10 minutes for hours.
    history = run("history", "--sink-url", url, "--group", "g", "--json").json()
    kept = {(e["partition"], e["offset"]): e["kept_one_per_ms"] for e in history}
    assert kept == {(0, 200): 1000, (2, 300): 1000, (0, 100): 1000, (1, 50): 1000,
                    (0, 2): 600_000, (0, 0): 600_000, (1, 0): 600_000}  # fmt: skip
    shown = run("history", "--sink-url", url, "--group", "g").out.splitlines()
    assert shown[0].split()[5] == "KEPT"
    assert [line.split()[5] for line in shown[1:]].count("1/10min") == 3

    # Before any commit: exit 1 naming the group; a bad time is a usage error naming the flag.
    none = run("describe", "--sink-url", url, "--group", "g", "--as-of", "2001-01-01T00:00:00Z")
    assert none.code == 1 and "group 'g' has no commit at or before" in none.err
    bad = run("describe", "--sink-url", url, "--group", "g", "--as-of", "yesterday")
    assert bad.code == 2 and "--as-of 'yesterday'" in bad.err


def test_a_fallback_without_to_committed_at_is_a_usage_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    _write(url)
    argv = ("reset-offsets", "--sink-url", url, "--group", "g", "--all-topics")
    done = run(*argv, "--to-latest", "--or-earliest")
    assert done.code == 2 and "--or-earliest goes with --to-committed-at" in done.err
    bad = run(*argv, "--to-committed-at", "noon")
    assert bad.code == 2 and "--to-committed-at 'noon'" in bad.err
