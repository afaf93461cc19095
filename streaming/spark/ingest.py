"""Ingest messages as the state function receives them, and the job's own markers among them.

The JVM does no parsing: a message travels to its shard as its bytes, with its position and
append time, and the state function decodes it with ``state.formats.request_codec`` — the single
source of truth for what is valid, exact for any valid JSON spelling, and one row per message
through the shuffle instead of one per partition. (Parsing in Spark SQL was tried: ``from_json``,
the checks a strict decoder makes and the explodes cost ~20 µs of JVM CPU per partition, then the
flattened rows cost more to cross into pandas than the Python decoder costs in all.)
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
    key, read as the group id in UTF-8; null for a null key.

    Java's ``String.hashCode`` runs over UTF-16 code units: a code point beyond the BMP counts as
    its two surrogates. Spark SQL has no such function (its ``hash`` is Murmur3), so this folds
    the key's code points (``ascii`` of each character of a split) into the hash in BIGINT
    arithmetic modulo 2^32, then reads it as an int32. 7-19 µs of JVM CPU for a key of ~15
    characters on the project's machine (per message, not per committed offset), growing with
    the key; ``tests/streaming/test_ingest.py`` checks it against ``partition_for`` over random
    Unicode.
    """
    text = key.cast("string")
    # One split into characters (code points), not a substring per index: that was quadratic,
    # and a group id of 32,000 characters held a micro-batch for minutes.
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
    """The Kafka source's rows as the state function takes them: ``shard`` (the state shard,
    ``CoordinatorConfig.state_shard_for`` of the group, of ``shards``), ``ingest_partition``,
    ``ingest_offset``, ``timestamp_ms`` and ``value`` (the message bytes, possibly null).

    On an ingest topic of one partition per state shard the shard is the partition. On one of
    fewer partitions (``keyed_topics``, their count a divisor of ``shards``) it is
    ``partition_for(key, shards)`` of the message key, the group id (the partition of a message
    without a key): a group's requests are on partition ``partition_for(group, count)``, which
    is its shard modulo the count, so each shard's requests come from one partition, in order.
    The state function answers a message that is not on its shard's partition, or whose group
    is not its shard's, NOT_COORDINATOR. (``shards`` divides the offsets topic's partitions, so
    ``partition_for(key, shards)`` is the key's partition of that topic modulo ``shards``.)

    ``timestamp_ms`` is the message's timestamp, which for the ingest topic the job creates
    (``message.timestamp.type=LogAppendTime``) is the broker's append time: the commit timestamp,
    and where a request's deadline starts (``state.coordinator.deadlines``). On a topic left at
    CreateTime it would be the producer's clock instead.

    With tenants (``tenant_topics``, the tenants' ingest topics in configuration order), a
    ``tenant`` column says whose topic a message came from: the tenant's index, or
    :data:`OPERATOR` for the job's own topic.

    With ``shard_keys`` (``streaming.spark.state_shards.shard_keys``), the ``shard`` column holds
    shard ``k``'s key ``shard_keys[k]``, which Spark places in the state partition meant for
    it; the state function takes the key modulo the shard count.
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
    ]
    if tenant_topics:
        tenant = F.lit(OPERATOR)
        for index, topic in reversed(list(enumerate(tenant_topics))):
            tenant = F.when(F.col("topic") == topic, F.lit(index)).otherwise(tenant)
        columns.append(tenant.cast("int").alias("tenant"))
    return kafka_df.select(*columns)


__all__ = ["EXPIRY_TICK", "LOAD_MARKER", "MARKERS", "OPERATOR", "ingest_messages", "shard_of_key"]
