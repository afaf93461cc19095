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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

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


#: The ``tenant`` of a message read from the job's own ingest topic (unchecked: operators').
OPERATOR = -1


def ingest_messages(kafka_df: DataFrame, tenant_topics: Sequence[str] = ()) -> DataFrame:
    """The Kafka source's rows as the state function takes them: ``shard`` (the ingest
    partition: the coordinator shard), ``ingest_offset``, ``timestamp_ms`` and ``value`` (the
    message bytes, possibly null).

    ``timestamp_ms`` is the message's timestamp, which for the ingest topic the job creates
    (``message.timestamp.type=LogAppendTime``) is the broker's append time: the commit timestamp,
    and where a request's deadline starts (``state.coordinator.deadlines``). On a topic left at
    CreateTime it would be the producer's clock instead.

    With tenants (``tenant_topics``, the tenants' ingest topics in configuration order), a
    ``tenant`` column says whose topic a message came from: the tenant's index, or
    :data:`OPERATOR` for the job's own topic.
    """
    columns = [
        F.col("partition").alias("shard"),
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
