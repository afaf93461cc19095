"""Ingest messages as the state function receives them: bytes, position and append time, routed
to their shard; the state function decodes them (one decoder, one row per message).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# The job's own messages among the requests (``state.shard``): the job writes them, the state
# function drops them once they woke their shard.
from state.shard import EXPIRY_TICK, LOAD_MARKER, MARKERS, OPERATOR

_UINT32 = 1 << 32


def shard_of_key(key: Column, shards: int) -> Column:
    """Kafka's ``Utils.abs(groupId.hashCode()) % shards`` (``partition_for``) of each message
    key as a UTF-8 group id; null for a null key. Java's hash runs over UTF-16 code units, so
    this folds each code point (two surrogates beyond the BMP) modulo 2^32 in BIGINT;
    ``tests/streaming/test_ingest.py`` holds it to ``partition_for``."""
    text = key.cast("string")
    # One split into code points: a substring per index was quadratic in the key's length.
    code_points = F.transform(F.split(text, ""), F.ascii)

    def step(h: Column, c: Column) -> Column:
        bmp = (h * 31 + c) % _UINT32
        # Beyond the BMP: the high surrogate, then the low one.
        high = F.lit(0xD800) + F.floor((c - 0x10000) / 1024)
        low = F.lit(0xDC00) + (c - 0x10000) % 1024
        return F.when(c < 0x10000, bmp).otherwise(
            (((h * 31 + high) % _UINT32) * 31 + low) % _UINT32
        )

    folded = F.aggregate(code_points, F.lit(0).cast("bigint"), step)
    unsigned = F.when(F.char_length(text) == 0, F.lit(0).cast("bigint")).otherwise(folded)
    signed = F.when(unsigned >= 1 << 31, unsigned - _UINT32).otherwise(unsigned)
    # Utils.abs maps Integer.MIN_VALUE to 0.
    return F.when(signed == -(1 << 31), F.lit(0)).otherwise(F.abs(signed) % shards).cast("int")


def ingest_messages(
    kafka_df: DataFrame,
    tenant_topics: Sequence[str] = (),
    shards: int | None = None,
    keyed_topics: Sequence[str] = (),
    shard_keys: Sequence[int] | None = None,
) -> DataFrame:
    """The Kafka source's rows as the state function takes them: ``shard``,
    ``ingest_partition``, ``ingest_offset``, ``timestamp_ms`` (the broker's append time on the
    topics the job creates: the commit timestamp, where a deadline starts), ``value`` and
    ``key`` (a TxnOffsetCommit keyed otherwise than by its group is a dead letter).

    ``shard`` is the partition, or on ``keyed_topics`` (fewer partitions than ``shards``)
    ``partition_for(key, shards)`` of the message key (else the partition); with ``shard_keys``
    it is shard ``k``'s key ``shard_keys[k]``. With ``tenant_topics``, ``tenant`` is the index
    of the tenant whose topic a message came from, or :data:`OPERATOR` for the job's own.
    """
    shard = F.col("partition")
    if keyed_topics:
        if shards is None:
            raise ValueError("keyed ingest topics need the shard count")
        by_key = F.coalesce(shard_of_key(F.col("key"), shards), F.col("partition"))
        shard = F.when(F.col("topic").isin(list(keyed_topics)), by_key).otherwise(shard)
    if shard_keys is not None:
        shard = F.element_at(F.array(*(F.lit(key) for key in shard_keys)), shard + 1)
    columns = [
        shard.alias("shard"),
        F.col("partition").alias("ingest_partition"),
        F.col("offset").alias("ingest_offset"),
        F.unix_millis(F.col("timestamp")).alias("timestamp_ms"),
        F.col("value"),
        F.col("key"),
    ]
    if tenant_topics:
        tenant = F.lit(OPERATOR)
        for index, topic in reversed(list(enumerate(tenant_topics))):
            tenant = F.when(F.col("topic") == topic, F.lit(index)).otherwise(tenant)
        columns.append(tenant.cast("int").alias("tenant"))
    return kafka_df.select(*columns)


__all__ = ["EXPIRY_TICK", "LOAD_MARKER", "MARKERS", "OPERATOR", "ingest_messages", "shard_of_key"]
