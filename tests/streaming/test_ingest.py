"""The JVM side of routing: a message's shard from its key, as Kafka's ``partition_for``."""

from __future__ import annotations

import random
from typing import Any

import pytest

from state.coordinator.partitioner import java_string_hash, partition_for
from streaming.spark.ingest import shard_of_key

pytestmark = pytest.mark.spark


def edge_cases() -> list[str]:
    return [
        "",
        "a",
        "payments",
        "é" * 40,  # 2-byte UTF-8, one UTF-16 unit each
        "€uro",  # 3-byte UTF-8
        "😀",  # beyond the BMP: two UTF-16 units (a surrogate pair)
        "g-\U0010ffff-\U00010000",  # the first and the last supplementary code points
        "polygenelubricants",  # its hashCode is Integer.MIN_VALUE: Utils.abs gives 0
        "x" * 300,  # overflows int32 many times over
    ]


def random_names(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)

    def char() -> str:
        kind = rng.random()
        if kind < 0.6:
            return chr(rng.randint(32, 126))
        if kind < 0.85:
            return chr(rng.choice([rng.randint(0x80, 0xD7FF), rng.randint(0xE000, 0xFFFF)]))
        return chr(rng.randint(0x10000, 0x10FFFF))

    return ["".join(char() for _ in range(rng.randint(0, 40))) for _ in range(count)]


@pytest.mark.parametrize("shards", [50, 7, 1])
def test_the_shard_of_a_key_is_partition_for_of_the_group_id(spark: Any, shards: int) -> None:
    names = edge_cases() + random_names(3000, seed=shards)
    assert java_string_hash("polygenelubricants") == -(2**31)
    rows = [(n.encode("utf-8"),) for n in names] + [(None,)]
    frame = spark.createDataFrame(rows, "key binary")
    got = {
        r.key: r.shard
        for r in frame.select("key", shard_of_key(frame["key"], shards).alias("shard")).collect()
    }
    assert got.pop(None) is None
    wrong = {
        k.decode(): (s, partition_for(k.decode(), shards))
        for k, s in got.items()
        if s != partition_for(k.decode(), shards)
    }
    assert wrong == {}
    assert len(got) == len(set(names))


def test_shard_keys_land_in_the_state_partition_spark_gives_them(spark: Any) -> None:
    """``spark_partition`` is Spark's hash partitioning of an integer key (``pmod(hash(key),
    n)``, Murmur3 with seed 42), so ``shard_keys`` put each shard where it is meant to go."""
    from pyspark.sql import functions as F

    from streaming.spark.state_shards import shard_keys, spark_partition

    keys = [*range(-50, 200), 2**31 - 1, -(2**31), *random.Random(7).sample(range(2**31), 200)]
    frame = spark.createDataFrame([(k,) for k in keys], "key INT")
    for n in (1, 2, 3, 8):
        got = frame.select(F.pmod(F.hash("key"), F.lit(n)).alias("p")).collect()
        assert [row.p for row in got] == [spark_partition(k, n) for k in keys], n
    placed = spark.createDataFrame([(k,) for k in shard_keys(10, 2)], "shard INT")
    spread = placed.repartition(2, "shard").rdd.glom().map(len).collect()
    assert sorted(spread) == [5, 5]
