"""Ingest messages → request-frame rows, parsed in the JVM.

JSON parsing and flattening (one row per partition of each request) run in Spark SQL, so the
Python state function receives columns, not JSON. A message the JVM parser cannot fully vouch for
(not JSON, a wrong-typed or missing required field, an unknown version or api) travels on as its
raw bytes with ``raw_value`` set; the state function hands those to
``state.formats.request_codec``, which is the single source of truth for what is valid and says
exactly which field is wrong.

Spark's JSON reader is more lenient than that codec: it reads a number or an object into a string
field as its text, takes one of two duplicate keys, accepts single quotes and ignores data after
the object, and turns an unpaired surrogate into ``?``. So the JVM parse is trusted only for a
message that is exactly the canonical encoding of what was parsed (``encode_request``'s form:
compact, every field present in its order); anything else — including valid JSON written
differently — takes the Python decoder, which is exact.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from state.coordinator.requests import REQUEST_VERSION, Api

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

#: Written by the job to every ingest partition every ``retention_check_interval_ms`` (Kafka's
#: ``offsets.retention.check.interval.ms``), so that every shard is called and expires what is
#: due even when no commit arrives for it. Not a request: the state function drops it. Ticks
#: replace Spark's no-data micro-batches, which a processing-time timeout would otherwise run
#: at every trigger, each costing a whole micro-batch and delaying the next commits.
EXPIRY_TICK = b'{"version":1,"api":"ExpireOffsets"}'

#: Messages of the job's own, dropped by the state function after they woke their shard.
MARKERS = frozenset({LOAD_MARKER, EXPIRY_TICK})


def _well_formed(r: Column, raw: Column) -> Column:
    """True when the JVM parse is trustworthy; anything else goes to the Python decoder.
    ``raw`` is the message value as a string."""

    # No reference to ``r`` inside a lambda: Spark may inline ``from_json`` into the expressions
    # that use ``r``, and a reference inside a lambda would then parse the whole message again
    # for every partition of it.
    def topic_ok(t: Column) -> Column:
        return (
            t["name"].isNotNull()
            & t["partitions"].isNotNull()
            & F.forall(t["partitions"], lambda p: p["partitionIndex"].isNotNull())
        )

    offsets_ok = F.forall(
        r["topics"],
        lambda t: F.forall(t["partitions"], lambda p: p["committedOffset"].isNotNull()),
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
        & (
            ~needs_topics
            | (
                r["topics"].isNotNull()
                & F.forall(r["topics"], topic_ok)
                & ((r["api"] != Api.OFFSET_COMMIT.value) | offsets_ok)
            )
        )
        & (~needs_members | (r["members"].isNotNull() & r["generationId"].isNotNull()))
        # Fields with a default may be absent but not null (the codec refuses null).
        & ((r["api"] != Api.OFFSET_COMMIT.value) | _commit_defaults_not_null(r))
        & (_canonical_json(r) == raw),
        F.lit(False),
    )


def _commit_defaults_not_null(r: Column) -> Column:
    return (
        r["generationId"].isNotNull()
        & r["memberId"].isNotNull()
        & r["retentionTimeMs"].isNotNull()
        & F.forall(
            r["topics"],
            lambda t: F.forall(t["partitions"], lambda p: p["committedLeaderEpoch"].isNotNull()),
        )
    )


def _canonical_json(r: Column) -> Column:
    """The parsed request written back as ``state.formats.request_codec.encode_request`` writes it;
    null for GroupMetadata (its members are kept as text), which always takes the Python decoder."""
    head = [r[name].alias(name) for name in ("version", "api", "requestId", "groupId")]

    def topics(partition_fields: tuple[str, ...]) -> Column:
        return F.transform(
            r["topics"],
            lambda t: F.struct(
                t["name"].alias("name"),
                F.transform(
                    t["partitions"],
                    lambda p: F.struct(*[p[name].alias(name) for name in partition_fields]),
                ).alias("partitions"),
            ),
        ).alias("topics")

    commit = F.struct(
        *head,
        *[
            r[name].alias(name)
            for name in ("generationId", "memberId", "groupInstanceId", "retentionTimeMs")
        ],
        topics(("partitionIndex", "committedOffset", "committedLeaderEpoch", "committedMetadata")),
    )
    delete = F.struct(*head, topics(("partitionIndex",)))
    options = {"ignoreNullFields": "false"}
    return (
        F.when(r["api"] == Api.OFFSET_COMMIT.value, F.to_json(commit, options))
        .when(r["api"] == Api.OFFSET_DELETE.value, F.to_json(delete, options))
        .when(r["api"] == Api.DELETE_GROUPS.value, F.to_json(F.struct(*head), options))
    )


def parse_ingest(kafka_df: DataFrame) -> DataFrame:
    """Flatten a Kafka-source DataFrame of ingest messages into request-frame rows.

    Output columns: ``shard`` (the ingest partition: the coordinator shard), the columns of
    ``state.formats.frames.EXTENDED_REQUEST_FRAME_SCHEMA``, and ``raw_value`` (the message
    bytes, set only on rows the Python decoder must look at; its other columns are then
    placeholders).

    One pass over the source: a message the JVM parse cannot vouch for keeps no parsed fields
    and no topics, so the explodes below leave it exactly one row, carrying its bytes. (A union
    of a "good" and a "bad" branch would read every ingest partition twice per micro-batch.)
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
    ).withColumn("ok", _well_formed(F.col("r"), F.col("value").cast("string")))

    # Only what the rows need travels through the explodes: every generated row copies the
    # columns beside it, so carrying the message bytes of a good message or the whole topics
    # array would copy the request once per partition (quadratic in the partitions of a request).
    ok = F.col("ok")
    messages = parsed.select(
        "shard",
        "ingest_offset",
        "timestamp_ms",
        F.when(ok, F.col("r").dropFields("topics")).alias("r"),
        F.when(ok, F.coalesce(F.col("r.topics"), F.array())).otherwise(F.array()).alias("topics"),
        # Empty bytes stand for a null message value so "needs decoding" stays one null check.
        F.when(~ok, F.coalesce(F.col("value"), F.lit(b"").cast("binary"))).alias("raw_value"),
    )
    # One row per topic, then per partition; requests without partitions (and messages left to
    # the Python decoder) keep one row with null topic and partition.
    topics = messages.select(
        "shard",
        "ingest_offset",
        "timestamp_ms",
        "r",
        "raw_value",
        F.posexplode_outer("topics").alias("topic_pos", "t"),
    )
    partitions = topics.select(
        "shard",
        "ingest_offset",
        "timestamp_ms",
        "r",
        "raw_value",
        "topic_pos",
        F.col("t.name").alias("topic_name"),
        F.posexplode_outer(F.coalesce(F.col("t.partitions"), F.array())).alias("part_pos", "p"),
    )
    # partition_index orders partitions of one request: topic position major, partition minor.
    index = F.coalesce(F.col("topic_pos"), F.lit(0)) * F.lit(1 << 16) + F.coalesce(
        F.col("part_pos"), F.lit(0)
    )
    return partitions.select(
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
        F.col("topic_name").alias("topic"),
        # -1 stands for "none" (topic-less rows, OffsetDelete offsets): pandas would turn a null
        # in an integer column into a float and lose precision on large offsets.
        F.coalesce(F.col("p.partitionIndex"), F.lit(-1)).alias("partition"),
        F.coalesce(F.col("p.committedOffset"), F.lit(-1).cast("long")).alias("offset"),
        F.coalesce(F.col("p.committedLeaderEpoch"), F.lit(-1)).alias("leader_epoch"),
        F.when(
            F.col("raw_value").isNull(), F.coalesce(F.col("p.committedMetadata"), F.lit(""))
        ).alias("metadata"),
        F.col("r.members").alias("members_json"),
        F.lit(0).cast("short").alias("error_code"),
        F.lit(None).cast("string").alias("error_reason"),
        F.coalesce(F.col("r.protocolType"), F.lit("consumer")).alias("protocol_type"),
        F.col("r.protocolName").alias("protocol"),
        F.col("r.leader").alias("leader"),
        "raw_value",
    )
