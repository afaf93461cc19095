"""Contract tests of the queryable sink, run identically against every implementation.

Backends: SQLite; PostgreSQL with its default COPY threshold (the small batches here go through
``executemany``); PostgreSQL with ``copy_threshold=0`` (every batch goes through COPY).
"""

from __future__ import annotations

import multiprocessing as mp
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pytest

from connectors.sinks import (
    BatchProgress,
    CommittedOffset,
    GroupListing,
    Sink,
    SinkError,
    SinkWriteError,
    absolute_sink_url,
    open_sink,
    redact_url,
)
from connectors.sinks.batch import prepare_batch, prepare_snapshot
from connectors.sinks.sqlite import SqliteSink
from state.coordinator.model import TopicPartition
from state.formats.frames import MEMBER_FRAME_SCHEMA
from tests.connectors.sinks.backends import Backend
from tests.connectors.sinks.record_frames import (
    commit,
    frame,
    group_metadata,
    group_tombstone,
    offsets_of,
    progress,
    tombstone,
)

# --- applying records -------------------------------------------------------------------------


def test_upsert_keeps_the_latest_commit(sink: Sink) -> None:
    assert sink.write_batch(0, frame(commit("g", "t", 0, 5, metadata="a")), progress(0))
    assert sink.write_batch(
        1, frame(commit("g", "t", 0, 9, leader_epoch=4, metadata="b")), progress(1)
    )

    [stored] = sink.fetch_offsets("g")
    assert stored == CommittedOffset("g", "t", 0, 9, 4, "b", 1_000, None)


def test_rewind_replaces_a_higher_offset(sink: Sink) -> None:
    sink.write_batch(0, frame(commit("g", "t", 0, 100)), progress(0))
    sink.write_batch(1, frame(commit("g", "t", 0, 3)), progress(1))

    assert offsets_of(sink, "g") == {("t", 0): 3}


def test_commit_fields_round_trip(sink: Sink) -> None:
    sink.write_batch(
        0,
        frame(
            commit(
                "g",
                "t",
                7,
                2**40,
                leader_epoch=12,
                metadata="m",
                commit_timestamp_ms=123,
                expire_timestamp_ms=456,
            ),
            commit("g", "t", 8, 1, leader_epoch=None, metadata=None, commit_timestamp_ms=None),
        ),
        progress(0),
    )

    assert sink.fetch_offsets("g") == [
        CommittedOffset("g", "t", 7, 2**40, 12, "m", 123, 456),
        # Omitted optional fields take Kafka's defaults.
        CommittedOffset("g", "t", 8, 1, -1, "", -1, None),
    ]


def test_tombstone_deletes_the_offset(sink: Sink) -> None:
    sink.write_batch(0, frame(commit("g", "t", 0, 5), commit("g", "t", 1, 6)), progress(0))
    sink.write_batch(1, frame(tombstone("g", "t", 0), tombstone("g", "t", 99)), progress(1))

    assert offsets_of(sink, "g") == {("t", 1): 6}
    [answer] = sink.fetch_offsets("g", [TopicPartition("t", 0)])
    assert (answer.offset, answer.leader_epoch, answer.metadata) == (-1, -1, "")


def test_commits_are_counted_per_group_once_per_batch_and_forgotten_with_the_group(
    sink: Sink,
) -> None:
    two = frame(commit("g", "t", 0, 5), commit("g", "t", 1, 6), commit("h\x00", "t", 0, 1))
    assert sink.write_batch(0, two, progress(0, group_commits={"g": 2, "h\x00": 1}))
    assert sink.write_batch(1, frame(commit("g", "t", 0, 7)), progress(1, group_commits={"g": 1}))
    # A replayed batch changes nothing, its commits included.
    assert not sink.write_batch(
        1, frame(commit("g", "t", 0, 7)), progress(1, group_commits={"g": 1})
    )
    assert sink.group_commits() == {"g": 3, "h\x00": 1}
    # One of g's offsets deleted: its counter stays; all of h's: h's counter goes.
    sink.write_batch(2, frame(tombstone("g", "t", 0), tombstone("h\x00", "t", 0)), progress(2))
    assert sink.group_commits() == {"g": 3}
    sink.write_batch(3, frame(commit("h\x00", "t", 0, 2)), progress(3, group_commits={"h\x00": 1}))
    assert sink.group_commits() == {"g": 3, "h\x00": 1}


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        pytest.param(
            [commit("g", "t", 0, 5), tombstone("g", "t", 0), commit("g", "t", 0, 3)],
            {("t", 0): 3},
            id="commit-tombstone-commit",
        ),
        pytest.param([commit("g", "t", 0, 3), tombstone("g", "t", 0)], {}, id="commit-tombstone"),
        pytest.param(
            [commit("g", "t", 0, 9), commit("g", "t", 0, 2)], {("t", 0): 2}, id="rewind-in-batch"
        ),
        pytest.param(
            [tombstone("g", "t", 1), commit("g", "t", 1, 4), commit("g", "t", 0, 8)],
            {("t", 0): 8, ("t", 1): 4},
            id="tombstone-then-commit",
        ),
    ],
)
def test_batch_is_deduplicated_to_the_last_record_per_key(
    sink: Sink, records: list[dict[str, Any]], expected: dict[tuple[str, int], int]
) -> None:
    sink.write_batch(0, frame(commit("g", "t", 0, 77)), progress(0))
    sink.write_batch(1, frame(*records), progress(1))

    assert offsets_of(sink, "g") == expected


def test_group_metadata_records(sink: Sink) -> None:
    sink.write_batch(
        0,
        frame(
            group_metadata("a", 1, 3),
            group_metadata("a", 2, 1),  # the last per group wins
            commit("a", "t", 0, 1),
            commit("a", "t", 1, 1),
            commit("b", "t", 0, 1),
            group_metadata("c", 5, 0),
        ),
        progress(0),
    )
    assert sink.list_groups() == [
        GroupListing("a", partitions=2, generation=2, members=1),
        GroupListing("b", partitions=1),
        GroupListing("c", partitions=0, generation=5, members=0),
    ]

    # A group tombstone removes the metadata only: DeleteGroups emits offset tombstones itself.
    sink.write_batch(1, frame(group_tombstone("a"), group_tombstone("c")), progress(1))
    assert sink.list_groups() == [GroupListing("a", 2), GroupListing("b", 1)]


def _members(*changes: tuple[str, str, bool]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"group_id": g, "member_id": m, "alive": alive} for g, m, alive in changes],
        schema=MEMBER_FRAME_SCHEMA,
    )


def test_consumer_protocol_members_are_counted_per_group(sink: Sink) -> None:
    epoch = {**group_metadata("k", 4, 0), "members": None}  # a consumer group's epoch row
    members = _members(("k", "m1", True), ("k", "m2", True), ("k", "m3", True), ("k", "m3", False))
    assert sink.write_batch(0, frame(epoch, commit("k", "t", 0, 1)), progress(0), members)
    assert sink.list_groups() == [GroupListing("k", partitions=1, generation=4, members=2)]

    # A replayed batch changes nothing; a member leaves; the group deleted, its members left.
    assert not sink.write_batch(0, frame(), progress(0), _members(("k", "m9", True)))
    sink.write_batch(1, frame(), progress(1), _members(("k", "m1", False)))
    assert sink.list_groups()[0].members == 1
    sink.write_batch(2, frame(group_tombstone("k")), progress(2), _members(("k", "m2", False)))
    assert sink.list_groups() == [GroupListing("k", partitions=1)]

    with pytest.raises(ValueError, match="MEMBER_SCHEMA"):
        sink.write_batch(3, frame(), progress(3), pa.table({"group_id": ["k"]}))
    sink.write_batch(3, frame(epoch), progress(3), _members(("k", "m1", True)))
    sink.reset("LOADING")
    sink.write_batch(0, frame(epoch), progress(0))
    assert sink.list_groups() == [GroupListing("k", partitions=0, generation=4, members=0)]


def test_random_batches_match_in_order_replay(make_sink: Callable[..., Sink]) -> None:
    """Many keys, repeated keys and tombstones; batches big enough for PostgreSQL's COPY path."""
    rng = random.Random(20240607)
    sink = make_sink(keep_history=True)
    groups = ["g1", "g'2", 'g"3', "ü-4", "n\x00-5", "\uffff0-6"]
    model: dict[tuple[str, str, int], int] = {}
    commits = 0
    for batch_id in range(6):
        records = []
        for _ in range(rng.choice([5, 1_500])):
            key = (rng.choice(groups), rng.choice(["t", "u"]), rng.randrange(40))
            if rng.random() < 0.25:
                records.append(tombstone(*key))
                model.pop(key, None)
            else:
                offset = rng.randrange(10_000)
                records.append(commit(*key, offset))
                model[key] = offset
                commits += 1
        assert sink.write_batch(batch_id, frame(*records), progress(batch_id))

    stored = {(g, o.topic, o.partition): o.offset for g in groups for o in sink.fetch_offsets(g)}
    assert stored == model
    assert sum(len(sink.history(g, limit=100_000)) for g in groups) == commits


# --- idempotency and progress -------------------------------------------------------------------


def test_snapshots_fill_the_sink_ahead_of_their_batch(make_sink: Callable[..., Sink]) -> None:
    sink = make_sink(keep_history=True)
    snapshot = frame(group_metadata("a", 3, 2), commit("a", "t", 0, 5), commit("b", "t", 1, 7))
    assert sink.write_snapshot(0, snapshot)
    assert sink.write_snapshot(0, frame(commit("c", "t", 0, 1)))  # another shard's
    assert sink.status().last_batch_id == -1  # the batch itself is not written yet
    assert sink.write_batch(0, frame(commit("a", "t", 0, 6)), progress(0))

    assert offsets_of(sink, "a") == {("t", 0): 6}
    assert offsets_of(sink, "b") == {("t", 1): 7}
    assert offsets_of(sink, "c") == {("t", 0): 1}
    assert sink.list_groups()[0] == GroupListing("a", partitions=1, generation=3, members=2)
    assert [h.offset for h in sink.history("a")] == [6]  # a snapshot is state, not commits

    # The batch replayed after a restart: its snapshot changes nothing either.
    assert not sink.write_snapshot(0, frame(commit("a", "t", 0, 5)))
    assert offsets_of(sink, "a") == {("t", 0): 6}
    with pytest.raises(SinkError, match="read-only"):
        make_sink(read_only=True).write_snapshot(1, snapshot)


def test_loaded_shards_fill_the_sink_without_a_batch_id(make_sink: Callable[..., Sink]) -> None:
    sink = make_sink(keep_history=True)
    loaded = frame(group_metadata("a", 3, 2), commit("a", "t", 0, 5), commit("b", "t", 1, 7))
    sink.write_loaded(loaded)
    sink.write_loaded(frame(commit("c", "t", 0, 1)))  # another shard's, from another worker
    sink.write_loaded(loaded)  # a replayed rebuild writes the same rows again
    assert sink.status().last_batch_id == -1
    assert offsets_of(sink, "a") == {("t", 0): 5}
    assert offsets_of(sink, "c") == {("t", 0): 1}
    assert sink.list_groups()[0] == GroupListing("a", partitions=1, generation=3, members=2)
    assert sink.history("a") == []  # state, not commits

    # The batch that loaded them is written after them and wins.
    assert sink.write_batch(0, frame(commit("a", "t", 0, 6), tombstone("b", "t", 1)), progress(0))
    assert offsets_of(sink, "a") == {("t", 0): 6}
    assert offsets_of(sink, "b") == {}
    with pytest.raises(SinkError, match="read-only"):
        make_sink(read_only=True).write_loaded(loaded)


def test_replayed_batch_id_changes_nothing(sink: Sink) -> None:
    assert sink.write_batch(3, frame(commit("g", "t", 0, 5)), progress(3, ingest_offsets={0: 10}))
    before = sink.status()

    assert not sink.write_batch(3, frame(commit("g", "t", 0, 6)), progress(3, input_rows=9))
    assert not sink.write_batch(2, frame(tombstone("g", "t", 0)), progress(2))

    assert offsets_of(sink, "g") == {("t", 0): 5}
    assert sink.status() == before


def test_progress_is_recorded_with_the_batch(sink: Sink) -> None:
    status = sink.status()
    assert (status.last_batch_id, status.ingest_offsets, status.last_progress) == (-1, {}, None)

    done = BatchProgress(
        batch_id=0,
        ingest_offsets={0: 17, 12: 2**40},
        input_rows=20,
        commits_applied=15,
        rejected=2,
        tombstones=3,
        state_keys=99,
        duration_ms=41,
        timestamp_ms=1_700_000_000_000,
    )
    assert sink.write_batch(0, frame(), done)  # an empty batch still records progress

    status = sink.status()
    assert status.last_batch_id == 0
    assert status.ingest_offsets == {0: 17, 12: 2**40}
    assert status.last_progress == done


def test_status_round_trip(sink: Sink) -> None:
    assert sink.status().status == "STOPPED"
    sink.set_status("LOADING", "replaying __consumer_offsets")
    assert (sink.status().status, sink.status().detail) == (
        "LOADING",
        "replaying __consumer_offsets",
    )

    sink.write_batch(0, frame(commit("g", "t", 0, 1)), progress(0))
    assert sink.status().status == "LOADING"  # batches do not change the status

    sink.set_status("ACTIVE")
    status = sink.status()
    assert (status.status, status.detail, status.last_batch_id) == ("ACTIVE", "", 0)

    with pytest.raises(ValueError, match="status must be one of"):
        sink.set_status("RUNNING")  # type: ignore[arg-type]


def test_status_survives_reopening(make_sink: Callable[..., Sink]) -> None:
    first = make_sink()
    first.write_batch(4, frame(commit("g", "t", 0, 5)), progress(4, ingest_offsets={1: 2}))
    first.set_status("ACTIVE", "ok")
    first.close()

    second = make_sink()
    assert (second.status().status, second.status().ingest_offsets) == ("ACTIVE", {1: 2})
    assert offsets_of(second, "g") == {("t", 0): 5}
    assert not second.write_batch(4, frame(), progress(4))


# --- reading ----------------------------------------------------------------------------------


def test_fetch_all_partitions_of_a_group(sink: Sink) -> None:
    sink.write_batch(
        0,
        frame(
            commit("g", "b", 1, 11),
            commit("g", "a", 10, 10),
            commit("g", "a", 2, 2),
            commit("other", "a", 0, 0),
        ),
        progress(0),
    )

    assert [(o.topic, o.partition, o.offset) for o in sink.fetch_offsets("g")] == [
        ("a", 2, 2),
        ("a", 10, 10),
        ("b", 1, 11),
    ]
    assert sink.fetch_offsets("unknown") == []


def test_fetch_listed_partitions_answers_minus_one_for_unknown(sink: Sink) -> None:
    sink.write_batch(0, frame(commit("g", "a", 0, 5), commit("g", "b", 3, 7)), progress(0))
    asked = [
        TopicPartition("b", 3),
        TopicPartition("a", 1),
        TopicPartition("nope", 0),
        TopicPartition("a", 0),
    ]

    answers = sink.fetch_offsets("g", asked)

    assert [(o.topic, o.partition, o.offset) for o in answers] == [
        ("b", 3, 7),
        ("a", 1, -1),
        ("nope", 0, -1),
        ("a", 0, 5),
    ]
    assert answers[1] == CommittedOffset("g", "a", 1, -1, -1, "", -1, None)
    assert [o.offset for o in sink.fetch_offsets("other", asked)] == [-1, -1, -1, -1]
    assert sink.fetch_offsets("g", []) == []


def test_fetch_many_listed_partitions(sink: Sink) -> None:
    sink.write_batch(0, frame(*(commit("g", "t", p, p) for p in range(0, 1_200, 2))), progress(0))

    answers = sink.fetch_offsets("g", [TopicPartition("t", p) for p in range(1_200)])

    assert [o.offset for o in answers] == [p if p % 2 == 0 else -1 for p in range(1_200)]


def test_list_groups_sorts_by_code_point(sink: Sink) -> None:
    names = ["é", "Z", "a", "😀", "a b", "A"]
    sink.write_batch(0, frame(*(commit(n, "t", 0, 1) for n in names)), progress(0))

    assert [g.group_id for g in sink.list_groups()] == sorted(names)


def test_history_when_kept(make_sink: Callable[..., Sink]) -> None:
    sink = make_sink(keep_history=True)
    sink.write_batch(
        0,
        frame(commit("g", "t", 0, 1), commit("g", "t", 0, 2), commit("g", "u", 0, 9)),
        progress(0),
    )
    sink.write_batch(
        1, frame(commit("g", "t", 0, 3, metadata="x"), tombstone("g", "t", 0)), progress(1)
    )
    # A replay must not append the batch's commits again.
    assert not sink.write_batch(1, frame(commit("g", "t", 0, 3)), progress(1))

    assert [(h.topic, h.offset, h.batch_id) for h in sink.history("g")] == [
        ("t", 3, 1),
        ("u", 9, 0),
        ("t", 2, 0),
        ("t", 1, 0),
    ]
    assert [h.offset for h in sink.history("g", "t", 0, limit=2)] == [3, 2]
    assert [h.offset for h in sink.history("g", "u")] == [9]
    assert sink.history("other") == []
    assert sink.history("g")[0].metadata == "x"
    with pytest.raises(ValueError, match="partition requires topic"):
        sink.history("g", partition=0)


def test_recent_history_keeps_each_partitions_newest_commits(
    make_sink: Callable[..., Sink],
) -> None:
    sink = make_sink(keep_history=True)
    # Partition t-0 commits far more often than t-1: its commits must not crowd t-1's out.
    sink.write_batch(0, frame(*(commit("g", "t", 0, i) for i in range(6))), progress(0))
    sink.write_batch(
        1,
        frame(commit("g", "t", 1, 50), commit("g", "t", 0, 6), commit("h", "t", 0, 99)),
        progress(1),
    )
    sink.write_batch(2, frame(commit("g", "t", 1, 51)), progress(2))
    windows = sink.recent_history("g", 3)
    assert {tp: [h.offset for h in entries] for tp, entries in windows.items()} == {
        ("t", 0): [6, 5, 4],
        ("t", 1): [51, 50],
    }
    assert sink.recent_history("nobody", 3) == {}
    with pytest.raises(ValueError, match="per_partition"):
        sink.recent_history("g", 0)


def test_groups_recent_commits_are_each_groups_recent_history(
    make_sink: Callable[..., Sink],
) -> None:
    sink = make_sink(keep_history=True)
    sink.write_batch(0, frame(*(commit("g", "t", 0, i) for i in range(6))), progress(0))
    sink.write_batch(
        1,
        frame(commit("g", "t", 1, 50), commit("h\x00", "t", 0, 99), commit("i", "t", 0, 7)),
        progress(1),
    )
    groups = ["g", "h\x00", "nobody"]
    windows = sink.groups_recent_commits(groups, 3)
    assert windows == {
        (group, tp[0], tp[1]): [(h.offset, h.commit_timestamp_ms) for h in entries]
        for group in groups
        for tp, entries in sink.recent_history(group, 3).items()
    }
    assert [o for o, _ in windows[("g", "t", 0)]] == [5, 4, 3]
    assert sink.groups_recent_commits([], 3) == {}
    with pytest.raises(ValueError, match="per_partition"):
        sink.groups_recent_commits(groups, 0)


def test_history_not_kept_by_default(sink: Sink) -> None:
    sink.write_batch(0, frame(commit("g", "t", 0, 1)), progress(0))

    assert sink.keep_history is False
    assert sink.history("g") == []


# --- hostile input ----------------------------------------------------------------------------

HOSTILE = [
    "x'); DROP TABLE consumer_offsets;--",
    'quote"d',
    "back\\slash",
    "percent %s and ? and $1",
    "line\nbreak\ttab\r",
    "\x1b[31mescape",
    "naïve-群组-🚀",
    " ",
]


def test_hostile_names_are_stored_verbatim(sink: Sink) -> None:
    sink.write_batch(
        0,
        frame(
            *(commit(name, name, i, i, metadata=name) for i, name in enumerate(HOSTILE)),
            *(group_metadata(name, 1, 1) for name in HOSTILE),
        ),
        progress(0),
    )

    for i, name in enumerate(HOSTILE):
        assert sink.fetch_offsets(name) == [CommittedOffset(name, name, i, i, -1, name, 1_000)]
        assert sink.fetch_offsets(name, [TopicPartition(name, i)])[0].offset == i
    assert [g.group_id for g in sink.list_groups()] == sorted(HOSTILE)
    # The tables are all still there and answer.
    assert sink.status().last_batch_id == 0


def test_names_and_metadata_with_nul_are_stored_and_read_back(
    make_sink: Callable[..., Sink],
) -> None:
    """Kafka strings may hold NUL, which PostgreSQL text cannot: the sinks store them escaped
    (``connectors.sinks.text``) and every reader returns them as they were."""
    sink = make_sink(keep_history=True)
    sink.write_batch(0, frame(commit("g", "t", 0, 1), commit("g", "t", 1, 1)), progress(0))
    sink.write_batch(
        1,
        frame(
            commit("nul\x00group", "t", 0, 5),
            commit("nul\x00group", "t", 1, 6),
            commit("g", "nul\x00topic", 0, 7),
            commit("g", "t", 0, 8, metadata="nul\x00metadata"),
            commit("esc\uffffape", "t\uffff0", 0, 9, metadata="\uffff\x00"),
            tombstone("nul\x00group", "t", 1),
        ),
        progress(1),
    )

    assert offsets_of(sink, "nul\x00group") == {("t", 0): 5}
    assert offsets_of(sink, "g") == {("t", 0): 8, ("t", 1): 1, ("nul\x00topic", 0): 7}
    (fetched,) = sink.fetch_offsets("g", [TopicPartition("t", 0)])
    assert fetched.metadata == "nul\x00metadata"
    (escaped,) = sink.fetch_offsets("esc\uffffape", [TopicPartition("t\uffff0", 0)])
    assert (escaped.offset, escaped.metadata) == (9, "\uffff\x00")
    assert [g.group_id for g in sink.list_groups()] == ["esc\uffffape", "g", "nul\x00group"]
    history = sink.history("nul\x00group", "t")
    assert [(h.group_id, h.topic, h.offset) for h in history] == [
        ("nul\x00group", "t", 6),
        ("nul\x00group", "t", 5),
    ]
    assert [h.topic for h in sink.history("g", "nul\x00topic")] == ["nul\x00topic"]


def test_status_detail_with_nul_is_kept_readable(sink: Sink) -> None:
    sink.set_status("STOPPED", "error: \x00 in input")

    assert sink.status().detail == "error: \ufffd in input"


def test_a_batchs_offsets_are_written_in_key_order_and_its_history_in_log_order() -> None:
    """The sinks' B-trees take a batch's offsets in key order (a 200k-row batch of small
    commits: twice as fast on SQLite); history keeps the order the log has."""
    records = frame(
        commit("b", "t", 1, 5),
        tombstone("a", "u", 0),
        commit("a", "u", 3, 6),
        commit("b", "t", 0, 7),
        commit("a", "t", 2, 8),
        tombstone("b", "t", 2),
    )
    batch = prepare_batch(records)
    keys = ("group_id", "topic", "partition")
    upserts = [tuple(row[k] for k in keys) for row in batch.offset_upserts.to_pylist()]
    deletes = [tuple(row[k] for k in keys) for row in batch.offset_deletes.to_pylist()]
    assert upserts == [("a", "t", 2), ("a", "u", 3), ("b", "t", 0), ("b", "t", 1)]
    assert deletes == [("a", "u", 0), ("b", "t", 2)]
    assert batch.history["offset"].to_pylist() == [5, 6, 7, 8]


def test_a_snapshot_is_prepared_as_a_batch_of_it_would_be() -> None:
    """``prepare_snapshot`` skips ``prepare_batch``'s reduction (a snapshot holds a record per
    key) and history, and prepares the same rows to write."""
    records = frame(
        group_metadata("a", 3, 2),
        commit("a", "t", 0, 5, metadata=None),
        commit("a", "t", 1, 6, leader_epoch=None, commit_timestamp_ms=None),
        commit("b\x00", "u", 1, 7, metadata="m\x00"),
    )
    batch, snapshot = prepare_batch(records), prepare_snapshot(records)
    for name in ("offset_upserts", "offset_deletes", "group_upserts", "group_deletes"):
        assert sorted(map(repr, getattr(snapshot, name).to_pylist())) == sorted(
            map(repr, getattr(batch, name).to_pylist())
        ), name
    assert snapshot.history.num_rows == 0
    with pytest.raises(ValueError, match="a tombstone in a shard's snapshot"):
        prepare_snapshot(frame(commit("a", "t", 0, 5), tombstone("a", "t", 1)))


def test_a_snapshot_with_a_tombstone_is_refused_before_writing(sink: Sink) -> None:
    with pytest.raises(ValueError, match="record 1 of the batch: a tombstone"):
        sink.write_loaded(frame(commit("a", "t", 0, 5), tombstone("b", "t", 1)))
    assert offsets_of(sink, "a") == {}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (frame({**commit("g", "t", 0, 1), "kind": "member"}), "unknown kind"),
        (frame({**commit("g", "t", 0, 1), "offset": None}), "commit without offset"),
        (frame({**commit("g", "t", 0, 1), "topic": None}), "offset record without topic"),
        (frame(commit("g", "t", 0, 1)).drop_columns(["members"]), "lack RECORD_FRAME_SCHEMA"),
    ],
)
def test_frames_breaking_the_contract_are_refused_before_writing(
    sink: Sink, table: pa.Table, message: str
) -> None:
    sink.write_batch(0, frame(commit("g", "t", 0, 1)), progress(0))

    with pytest.raises(ValueError, match=message):
        sink.write_batch(1, table, progress(1))

    assert offsets_of(sink, "g") == {("t", 0): 1}
    assert sink.status().last_batch_id == 0


def test_write_arguments_are_checked(sink: Sink) -> None:
    with pytest.raises(ValueError, match="progress is for batch 2"):
        sink.write_batch(1, frame(), progress(2))
    with pytest.raises(ValueError, match="batch_id must be"):
        sink.write_batch(-1, frame(), progress(-1))


# --- failures ---------------------------------------------------------------------------------


def _kill_connection(sink: Sink, backend: Backend) -> None:
    """Close the sink's connection under it, as a crash or network failure would."""
    if isinstance(sink, SqliteSink):
        assert sink._conn is not None
        sink._conn.close()
        return
    import psycopg

    pid = sink._conn.info.backend_pid  # type: ignore[attr-defined]
    with psycopg.connect(backend.admin_url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone() == (True,)


def test_failed_batch_leaves_the_previous_state(
    make_sink: Callable[..., Sink], backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = make_sink(keep_history=True)
    sink.write_batch(0, frame(commit("g", "t", 0, 1), commit("g", "t", 1, 1)), progress(0))
    big = frame(*(commit("g", "t", p, 50) for p in range(2_000)), tombstone("g", "t", 1))

    real = sink._record_progress  # type: ignore[attr-defined]

    def crash_mid_batch(*args: Any) -> None:
        # The records are applied; the connection dies before the progress row is written.
        _kill_connection(sink, backend)
        real(*args)

    monkeypatch.setattr(sink, "_record_progress", crash_mid_batch)
    with pytest.raises(SinkWriteError, match="batch 1 not written"):
        sink.write_batch(1, big, progress(1))
    monkeypatch.undo()

    with make_sink() as reader:
        assert offsets_of(reader, "g") == {("t", 0): 1, ("t", 1): 1}
        assert reader.status().last_batch_id == 0
        assert len(reader.history("g")) == 2
    # The same sink reconnects and the replayed batch applies.
    assert sink.write_batch(1, big, progress(1))
    stored = offsets_of(sink, "g")
    assert (len(stored), ("t", 1) in stored) == (1_999, False)
    assert sink.status().last_batch_id == 1


@pytest.mark.postgres
def test_connection_lost_between_batches_is_replaced(
    postgres_sink_url: str, postgres_url: str
) -> None:
    backend = Backend("postgres", postgres_sink_url, {}, postgres_url)
    with open_sink(postgres_sink_url) as sink:
        sink.write_batch(0, frame(commit("g", "t", 0, 1)), progress(0))
        _kill_connection(sink, backend)

        # Nothing of batch 1 had started: the sink reconnects instead of failing the batch.
        assert sink.write_batch(1, frame(commit("g", "t", 0, 2)), progress(1))
        _kill_connection(sink, backend)
        assert offsets_of(sink, "g") == {("t", 0): 2}  # reads reconnect too


# --- concurrency and configuration ------------------------------------------------------------

_READER_PARTITIONS = 100


def _read_while_writing(url: str, ready: Any, stop: Any, results: Any) -> None:
    """Reader process: every fetch must see one whole batch (all partitions at one offset)."""
    reads, torn, regressions, errors, last = 0, 0, 0, [], -1
    try:
        with open_sink(url, read_only=True) as sink:
            ready.put(True)
            while True:
                finished = stop.is_set()
                seen = {o.offset for o in sink.fetch_offsets("g")}
                reads += 1
                torn += len(seen) > 1
                if seen:
                    current = seen.pop()
                    regressions += current < last
                    last = current
                if finished:
                    break
    except Exception as exc:
        ready.put(False)
        errors.append(repr(exc))
    results.put((reads, torn, regressions, errors, last))


def test_readers_in_other_processes_see_whole_batches(
    make_sink: Callable[..., Sink], backend: Backend
) -> None:
    writer = make_sink()
    batches = 120
    ctx = mp.get_context("spawn")
    ready, stop, results = ctx.Queue(), ctx.Event(), ctx.Queue()
    readers = [
        ctx.Process(target=_read_while_writing, args=(backend.url, ready, stop, results))
        for _ in range(2)
    ]
    for process in readers:
        process.start()
    try:
        assert all(ready.get(timeout=60) for _ in readers)
        for batch_id in range(batches):
            records = frame(*(commit("g", "t", p, batch_id) for p in range(_READER_PARTITIONS)))
            assert writer.write_batch(batch_id, records, progress(batch_id))
        stop.set()
        outcomes = [results.get(timeout=60) for _ in readers]
    finally:
        stop.set()
        for process in readers:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    for reads, torn, regressions, errors, last in outcomes:
        assert errors == []
        assert (torn, regressions) == (0, 0)
        assert reads > 1
        assert last == batches - 1


def test_table_prefixes_keep_sinks_apart(make_sink: Callable[..., Sink], backend: Backend) -> None:
    plain, prefixed = make_sink(), make_sink(table_prefix=f"{backend.table_prefix}tenant_b_")
    plain.write_batch(0, frame(commit("g", "t", 0, 1)), progress(0))
    prefixed.write_batch(0, frame(commit("g", "t", 0, 2)), progress(0))

    assert offsets_of(plain, "g") == {("t", 0): 1}
    assert offsets_of(prefixed, "g") == {("t", 0): 2}


def test_log_end_offsets_are_upserted_and_cleared_by_reset(sink: Sink) -> None:
    sink.write_batch(0, frame(commit("g", "b", 0, 1), commit("g", "a\x00", 1, 2)), progress(0))
    sink.write_log_end_offsets({("a\x00", 1): 7, ("b", 0): 3, ("b", 1): 4})
    sink.write_log_end_offsets({("b", 0): 9})

    stored = sink.log_end_offsets()
    assert {(tp.topic, tp.partition): e.offset for tp, e in stored.items()} == {
        ("a\x00", 1): 7,
        ("b", 0): 9,
        ("b", 1): 4,
    }
    assert all(e.updated_at_ms > 0 for e in stored.values())
    assert set(sink.log_end_offsets(["b"])) == {("b", 0), ("b", 1)}
    assert sink.committed_topics() == ["a\x00", "b"]

    sink.reset("LOADING")
    assert sink.log_end_offsets() == {}
    assert sink.committed_topics() == []


def test_a_sink_mirrors_one_cluster(make_sink: Callable[..., Sink], backend: Backend) -> None:
    sink = make_sink()
    assert sink.source_cluster() is None
    sink.bind_source_cluster("cluster-A", "prod")
    sink.bind_source_cluster("cluster-A", "prod-eu")  # the same cluster, renamed
    assert (sink.source_cluster().cluster_id, sink.source_cluster().cluster_name) == (
        "cluster-A",
        "prod-eu",
    )
    sink.write_batch(0, frame(commit("g", "t", 0, 1)), progress(0))

    with pytest.raises(SinkError, match=r"holds cluster cluster-A .*table_prefix"):
        sink.bind_source_cluster("cluster-B", "staging")
    assert offsets_of(sink, "g") == {("t", 0): 1}  # refused before anything changed

    # Another cluster goes to its own table prefix of the same database.
    other = make_sink(table_prefix=f"{backend.table_prefix}staging_")
    other.bind_source_cluster("cluster-B", "staging")
    assert other.source_cluster().cluster_id == "cluster-B"
    assert sink.source_cluster().cluster_id == "cluster-A"


@pytest.mark.parametrize("prefix", ["1abc", "a-b", 'x"; DROP TABLE t; --', "a b", "é", "x" * 33])
def test_unsafe_table_prefixes_are_refused(make_sink: Callable[..., Sink], prefix: str) -> None:
    with pytest.raises(ValueError, match="table_prefix"):
        make_sink(table_prefix=prefix)


def test_read_only_sink_reads_but_refuses_writes(make_sink: Callable[..., Sink]) -> None:
    make_sink().write_batch(0, frame(commit("g", "t", 0, 1)), progress(0))
    reader = make_sink(read_only=True)

    assert offsets_of(reader, "g") == {("t", 0): 1}
    with pytest.raises(SinkError, match="read-only"):
        reader.write_batch(1, frame(), progress(1))
    with pytest.raises(SinkError, match="read-only"):
        reader.set_status("ACTIVE")
    with pytest.raises(SinkError, match="read-only"):
        reader.write_log_end_offsets({("t", 0): 1})
    with pytest.raises(SinkError, match="read-only"):
        reader.bind_source_cluster("c", "c")


# --- URLs (no backend needed) -----------------------------------------------------------------


def test_open_sink_sqlite_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_sink("sqlite:///data/rel.db") as sink:
        assert isinstance(sink, SqliteSink)
        assert Path(sink.path) == Path("data/rel.db")
    assert (tmp_path / "data" / "rel.db").exists()

    absolute = tmp_path / "abs dir" / "a.db"
    with open_sink(f"sqlite:///{absolute}?keep_history=true&table_prefix=p_") as sink:
        assert isinstance(sink, SqliteSink)
        assert (Path(sink.path), sink.keep_history) == (absolute, True)
    assert absolute.exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "mysql://root:hunter2@db/x",
            "unsupported sink URL scheme 'mysql' in mysql://root:\\*\\*\\*@db/x",
        ),
        ("sqlite://host/x.db", "SQLite URLs have no host"),
        ("sqlite:///", "names no database file"),
        ("sqlite:///x.db?sslmode=require", "unknown SQLite options"),
        ("sqlite:///x.db?keep_history=maybe", "keep_history must be a boolean"),
    ],
)
def test_open_sink_refuses_bad_urls(
    url: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=message) as caught:
        open_sink(url)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("postgresql://u:s3cret@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgres://u:p%40ss@h/db?sslmode=require", "postgres://u:***@h/db?sslmode=require"),
        ("postgresql://u@h/db?password=s3cret&x=1", "postgresql://u@h/db?password=***&x=1"),
        ("postgresql://h/db", "postgresql://h/db"),
        ("sqlite:////var/lib/x.db", "sqlite:////var/lib/x.db"),
        ("host=h password='s3 cret' user=u", "host=h password=*** user=u"),
    ],
)
def test_redact_url(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


def test_absolute_sink_url_opens_the_same_database_from_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = "sqlite:///sub%20dir/x.db?table_prefix=p_"
    absolute = absolute_sink_url(url)
    assert absolute == f"sqlite:///{tmp_path}/sub%20dir/x.db?table_prefix=p_"
    assert absolute_sink_url(absolute) == absolute
    with open_sink(url) as sink:
        sink.write_loaded(frame(commit("g", "t", 0, 5)))
    monkeypatch.chdir(tmp_path.parent)  # a worker started in another directory
    with open_sink(absolute, read_only=True) as sink:
        assert offsets_of(sink, "g") == {("t", 0): 5}
    postgres = "postgresql://u:s3cret@h/db?sslmode=require"
    assert absolute_sink_url(postgres) == postgres


@pytest.mark.postgres
def test_postgres_connection_errors_do_not_leak_the_password(postgres_url: str) -> None:
    port = urlsplit(postgres_url).port
    bad = f"postgresql://nobody:hunter2@127.0.0.1:{port}/no_such_db?connect_timeout=5"
    with pytest.raises(SinkError) as caught:
        open_sink(bad)
    assert "hunter2" not in str(caught.value)
    assert "nobody:***@" in str(caught.value)


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    with SqliteSink(tmp_path / "x.db") as sink:
        assert sink._conn is not None
        assert sink._conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert sink._conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert sink._conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
