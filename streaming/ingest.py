"""Ingest messages → request-frame rows, parsed in the JVM.

JSON parsing and flattening (one row per partition of each request) run in Spark SQL, so the
Python state function receives columns, not JSON. A message the JVM parser cannot fully vouch for
(not JSON, a wrong-typed or missing required field, an unknown version or api) travels on as its
raw bytes with ``raw_value`` set; the state function hands those to ``state.request_codec``, which
is the single source of truth for what is valid and says exactly which field is wrong.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from state.requests import REQUEST_VERSION, Api

_PARTITION = T.StructType(
    [
        T.StructField("partitionIndex", T.IntegerType()),
        T.StructField("committedOffset", T.LongType()),
        T.StructField("committedLeaderEpoch", T.IntegerType()),
        T.StructField("committedMetadata", T.StringType()),
    ]
)
_TOPIC = T.StructType(
    [
        T.StructField("name", T.StringType()),
        T.StructField("partitions", T.ArrayType(_PARTITION)),
    ]
)
#: The ingest JSON as Spark reads it. ``members`` is read as raw JSON text (Spark keeps the text
#: of an object/array parsed into a string field) and decoded by the state machine.
REQUEST_JSON_SCHEMA = T.StructType(
    [
        T.StructField("version", T.IntegerType()),
        T.StructField("api", T.StringType()),
        T.StructField("requestId", T.StringType()),
        T.StructField("groupId", T.StringType()),
        T.StructField("generationId", T.IntegerType()),
        T.StructField("memberId", T.StringType()),
        T.StructField("groupInstanceId", T.StringType()),
        T.StructField("retentionTimeMs", T.LongType()),
        T.StructField("topics", T.ArrayType(_TOPIC)),
        T.StructField("members", T.StringType()),
        T.StructField("protocolType", T.StringType()),
        T.StructField("protocolName", T.StringType()),
        T.StructField("leader", T.StringType()),
        T.StructField("_corrupt", T.StringType()),
    ]
)

_APIS = [api.value for api in Api]

#: Written by the job to every ingest partition when it starts without a checkpoint over a
#: non-empty offsets topic, so that every shard is called, and so loads, in the first batches.
#: Not a request: the state function drops it.
LOAD_MARKER = b'{"version":1,"api":"LoadCoordinator"}'


def _well_formed(r: Column) -> Column:
    """True when the JVM parse is trustworthy; anything else goes to the Python decoder."""

    def partition_ok(p: Column) -> Column:
        return p["partitionIndex"].isNotNull() & (
            (r["api"] != Api.OFFSET_COMMIT.value) | p["committedOffset"].isNotNull()
        )

    def topic_ok(t: Column) -> Column:
        return (
            t["name"].isNotNull()
            & t["partitions"].isNotNull()
            & F.forall(t["partitions"], partition_ok)
        )

    needs_topics = r["api"].isin(Api.OFFSET_COMMIT.value, Api.OFFSET_DELETE.value)
    needs_members = r["api"] == Api.GROUP_METADATA.value
    return F.coalesce(
        r.isNotNull()
        & r["_corrupt"].isNull()
        & (r["version"] == REQUEST_VERSION)
        & r["api"].isin(*_APIS)
        & r["requestId"].isNotNull()
        & r["groupId"].isNotNull()
        & (~needs_topics | (r["topics"].isNotNull() & F.forall(r["topics"], topic_ok)))
        & (~needs_members | (r["members"].isNotNull() & r["generationId"].isNotNull())),
        F.lit(False),
    )


def request_rows(kafka_df: DataFrame) -> DataFrame:
    """Flatten a Kafka-source DataFrame of ingest messages into request-frame rows.

    Output columns: ``shard`` (the ingest partition: the coordinator shard), the columns of
    ``state.frames.EXTENDED_REQUEST_FRAME_SCHEMA``, and ``raw_value`` (the message bytes, set
    only on rows the Python decoder must look at).
    """
    parsed = kafka_df.select(
        F.col("partition").alias("shard"),
        F.col("offset").alias("ingest_offset"),
        (F.unix_millis(F.col("timestamp"))).alias("timestamp_ms"),
        F.col("value"),
        F.from_json(
            F.col("value").cast("string"),
            REQUEST_JSON_SCHEMA,
            {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"},
        ).alias("r"),
    ).withColumn("ok", _well_formed(F.col("r")))

    good = parsed.where(F.col("ok"))
    # One row per topic, then per partition; requests without partitions keep one null row.
    topics = good.select(
        "*", F.posexplode_outer(F.coalesce(F.col("r.topics"), F.array())).alias("topic_pos", "t")
    )
    partitions = topics.select(
        "*",
        F.posexplode_outer(F.coalesce(F.col("t.partitions"), F.array())).alias("part_pos", "p"),
    )
    # partition_index orders partitions of one request: topic position major, partition minor.
    index = F.coalesce(F.col("topic_pos"), F.lit(0)) * F.lit(1 << 16) + F.coalesce(
        F.col("part_pos"), F.lit(0)
    )
    good_rows = partitions.select(
        "shard",
        "ingest_offset",
        index.cast("int").alias("partition_index"),
        "timestamp_ms",
        F.col("r.api").alias("api"),
        F.col("r.requestId").alias("request_id"),
        F.col("r.groupId").alias("group_id"),
        F.coalesce(F.col("r.generationId"), F.lit(-1)).alias("generation_id"),
        F.coalesce(F.col("r.memberId"), F.lit("")).alias("member_id"),
        F.col("r.groupInstanceId").alias("group_instance_id"),
        F.coalesce(F.col("r.retentionTimeMs"), F.lit(-1).cast("long")).alias("retention_time_ms"),
        F.col("t.name").alias("topic"),
        # -1 stands for "none" (topic-less rows, OffsetDelete offsets): pandas would turn a null
        # in an integer column into a float and lose precision on large offsets.
        F.coalesce(F.col("p.partitionIndex"), F.lit(-1)).alias("partition"),
        F.coalesce(F.col("p.committedOffset"), F.lit(-1).cast("long")).alias("offset"),
        F.coalesce(F.col("p.committedLeaderEpoch"), F.lit(-1)).alias("leader_epoch"),
        F.coalesce(F.col("p.committedMetadata"), F.lit("")).alias("metadata"),
        F.col("r.members").alias("members_json"),
        F.lit(0).cast("short").alias("error_code"),
        F.lit(None).cast("string").alias("error_reason"),
        F.coalesce(F.col("r.protocolType"), F.lit("consumer")).alias("protocol_type"),
        F.col("r.protocolName").alias("protocol"),
        F.col("r.leader").alias("leader"),
        F.lit(None).cast("binary").alias("raw_value"),
    )
    # Topic-less rows of OffsetCommit/OffsetDelete with an empty partitions list still answer.
    bad_rows = parsed.where(~F.col("ok")).select(
        "shard",
        "ingest_offset",
        F.lit(0).alias("partition_index"),
        "timestamp_ms",
        *[F.lit(None).cast("string").alias(c) for c in ("api", "request_id", "group_id")],
        F.lit(-1).alias("generation_id"),
        F.lit("").alias("member_id"),
        F.lit(None).cast("string").alias("group_instance_id"),
        F.lit(-1).cast("long").alias("retention_time_ms"),
        F.lit(None).cast("string").alias("topic"),
        F.lit(-1).alias("partition"),
        F.lit(-1).cast("long").alias("offset"),
        F.lit(-1).alias("leader_epoch"),
        F.lit(None).cast("string").alias("metadata"),
        F.lit(None).cast("string").alias("members_json"),
        F.lit(0).cast("short").alias("error_code"),
        F.lit(None).cast("string").alias("error_reason"),
        F.lit("consumer").alias("protocol_type"),
        F.lit(None).cast("string").alias("protocol"),
        F.lit(None).cast("string").alias("leader"),
        # Empty bytes stand for a null message value so "needs decoding" stays one null check.
        F.coalesce(F.col("value"), F.lit(b"").cast("binary")).alias("raw_value"),
    )
    return good_rows.unionByName(bad_rows)
