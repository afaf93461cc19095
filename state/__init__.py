"""The offset state machine and Kafka's record formats: pure Python, no Spark.

Modelled on Kafka's group coordinator (``OffsetMetadataManager``): request handlers validate and
return records plus a response without touching state; ``replay`` applies one record to state, and
the same replay rebuilds a shard from the offsets topic.
"""
