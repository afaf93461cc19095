"""Reset planning without any service: topic specs, date-times, the partitions in scope and
the new offset of each (Kafka's ``ResetOffsetsCommand`` arithmetic)."""

from __future__ import annotations

from datetime import datetime

import pytest

from connectors.client.errors import OffsetsError
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from streaming.cli.commands.reset import (
    ResetRow,
    ResetTarget,
    TopicSpec,
    parse_datetime,
    parse_topic_spec,
    plan_reset,
    scope_partitions,
)
from streaming.cli.errors import UsageError


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


def test_datetimes_are_iso_8601_with_local_time_when_no_zone_is_given() -> None:
    assert parse_datetime("1970-01-01T00:00:01Z") == 1_000
    assert parse_datetime("1970-01-01T02:00:01.5+02:00") == 1_500
    local = datetime(2024, 5, 1, 12, 0, 0).astimezone()
    assert parse_datetime("2024-05-01T12:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(UsageError, match="ISO 8601"):
        parse_datetime("yesterday")


BROKER = {"t": [0, 1, 2]}
COMMITTED = [TopicPartition("t", 1), TopicPartition("old", 0)]


def scope(*specs: str, committed_first: bool = False) -> list[TopicPartition]:
    return scope_partitions(
        [parse_topic_spec(s) for s in specs],
        COMMITTED,
        lambda topic: BROKER.get(topic, []),
        committed_first=committed_first,
    )


def test_scope_is_the_listed_partitions_else_the_brokers_else_the_groups() -> None:
    assert scope("t:2,0", "t:0") == [TopicPartition("t", 2), TopicPartition("t", 0)]
    assert scope("t") == [TopicPartition("t", p) for p in range(3)]
    assert scope("old") == [TopicPartition("old", 0)]
    # delete-offsets: the group's committed partitions of the topic come first.
    assert scope("t", committed_first=True) == [TopicPartition("t", 1)]
    with pytest.raises(OffsetsError) as raised:
        scope("nowhere")
    assert raised.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "topic 'nowhere' does not exist on the Kafka cluster" in str(raised.value)
    assert "--create --topic nowhere" in str(raised.value)


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
    # Kafka's tool resets a partition without a committed offset to its log end.
    assert new_offsets(current) == [40, 50, 0, None]
    assert current[1].note == "no committed offset: using the log end offset 50, as Kafka does"
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


def test_reset_to_committed_at_leaves_partitions_without_a_commit_then_alone() -> None:
    then = {T0: 5, T1: 20}  # T0's offset then is before today's log start: kept in range
    rows = plan(ResetTarget("committed_at", 1_000), then)  # type: ignore[arg-type]
    assert new_offsets(rows) == [10, 20, None, None]
    assert rows[0].note == "5 is before the log start offset 10: using 10"
    assert rows[2].error is None and rows[2].note is not None
    assert rows[2].note.startswith("no commit at or before that time: left alone")
    for fallback, offset in (("earliest", 0), ("latest", 0)):
        target = ResetTarget("committed_at", 1_000, fallback)  # type: ignore[arg-type]
        assert new_offsets(plan(target, then))[:3] == [10, 20, offset]  # type: ignore[arg-type]
    latest = plan(ResetTarget("committed_at", 1_000, "latest"), {T0: 50})
    assert new_offsets(latest) == [50, 50, 0, None]
