"""Kafka's wire formats and the Arrow frames, by role; pure functions of bytes and tables.

- ``frames``: the Arrow schemas between the state and the Spark adapter (requests in, records and
  responses out);
- ``records``: the ``__consumer_offsets`` record keys and values, byte-exact;
- ``record_columns``: the same offset records encoded a whole column at a time;
- ``request_codec`` (with ``json_fields``): the ingest request JSON;
- ``response_codec``: the responses-topic and dead-letter messages.

Depends only on ``state.coordinator`` (the values the formats carry).
"""
