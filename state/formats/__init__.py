"""Kafka's wire formats and the Arrow frames, by role; pure functions of bytes and tables.

- ``frames``: the Arrow schemas between the state and the Spark adapter (requests in, records and
  responses out);
- ``records``: the ``__consumer_offsets`` record keys and values, byte-exact;
- ``record_columns`` and ``record_column_decoding``: offset records written and read a whole
  column at a time (the per-record decoder in ``records`` reads the rest);
- ``request_fast``: valid OffsetCommit requests read straight into columns, and
  ``request_codec`` (with ``json_fields``): every ingest request, with the reason it is invalid;
- ``response_codec``: the responses-topic and dead-letter messages.

Depends only on ``state.coordinator`` (the values the formats carry).
"""
