"""How many states hold the offsets-topic partitions: the checkpoint's, the configured, or the
default that follows the state's Spark partitions; refusals say what to do."""

from __future__ import annotations

import pytest

from streaming.config import JobConfig
from streaming.spark.state_shards import (
    StateLayout,
    choose_state_shards,
    shard_keys,
    spark_partition,
)

INGEST_2 = {"ingest": 2}


@pytest.mark.parametrize(
    ("partitions", "ingest", "state_partitions", "expected"),
    [
        # 2 cores, Kafka's 50 partitions, the default ingest topic of 2: a state per task.
        (50, INGEST_2, 2, 2),
        # Other cores: the smallest valid count (2, 10 or 50 here) with one per Spark partition.
        (50, INGEST_2, 1, 2),
        (50, INGEST_2, 4, 10),
        (50, INGEST_2, 6, 10),
        (50, INGEST_2, 10, 10),
        (50, INGEST_2, 16, 50),
        (60, INGEST_2, 3, 4),
        (4, INGEST_2, 2, 2),
        # An ingest topic of one partition per offsets-topic partition: one state each.
        (50, {"ingest": 50}, 2, 50),
        # Tenants' topics of other counts: a multiple of each.
        (60, {"ingest": 2, "team-a": 3}, 1, 6),
        (60, {"ingest": 2, "team-a": 3}, 8, 12),
        # More Spark partitions than any valid count: every partition a state.
        (50, INGEST_2, 64, 50),
    ],
)
def test_default_follows_the_state_partitions(
    partitions: int, ingest: dict[str, int], state_partitions: int, expected: int
) -> None:
    assert choose_state_shards(partitions, ingest, None, None, state_partitions) == expected


def test_a_checkpoint_keeps_what_it_records() -> None:
    assert choose_state_shards(50, INGEST_2, None, 10, 8) == 10
    assert choose_state_shards(50, INGEST_2, 10, 10, 8) == 10
    assert choose_state_shards(50, INGEST_2, None, 50, 2) == 50


def test_another_count_than_the_checkpoints_is_refused_saying_what_to_do() -> None:
    with pytest.raises(
        ValueError,
        match=r"state_shards is 10 but the checkpoint's state is held "
        r"in 50 state shards: unset state_shards or set it to 50",
    ):
        choose_state_shards(50, INGEST_2, 10, 50, 2)
    with pytest.raises(ValueError, match=r"state_shards is 25 but .* held in 10"):
        choose_state_shards(50, INGEST_2, 25, 10, 2)


@pytest.mark.parametrize(("wanted", "ingest"), [(5, INGEST_2), (25, INGEST_2), (10, {"i": 50})])
def test_a_count_the_ingest_topics_cannot_feed_is_refused(
    wanted: int, ingest: dict[str, int]
) -> None:
    with pytest.raises(
        ValueError,
        match=rf"{wanted} state shards cannot read the ingest topics.*"
        r"valid: ",
    ):
        choose_state_shards(50, ingest, wanted, None, 2)


def test_the_configured_count_must_divide_partitions() -> None:
    with pytest.raises(ValueError, match=r"state_shards must divide partitions \(50\), got 7"):
        JobConfig(state_shards=7)
    assert JobConfig(state_shards=10).state_shards == 10


@pytest.mark.parametrize(("shards", "partitions"), [(10, 2), (2, 2), (50, 2), (20, 3), (5, 8)])
def test_shard_keys_spread_the_shards_evenly(shards: int, partitions: int) -> None:
    keys = shard_keys(shards, partitions)
    assert [key % shards for key in keys] == list(range(shards))
    placed = [spark_partition(key, partitions) for key in keys]
    assert placed == [shard % partitions for shard in range(shards)]
    # Spark's own placement of the shards themselves is uneven: 10 over 2 lands 3 and 7.
    if (shards, partitions) == (10, 2):
        assert sorted([spark_partition(s, 2) for s in range(10)].count(p) for p in range(2)) == [
            3,
            7,
        ]


def test_a_layout_of_old_checkpoints_keys_each_shard_by_itself() -> None:
    assert StateLayout(50).keys() is None
    assert StateLayout(10, 2).keys() == shard_keys(10, 2)
