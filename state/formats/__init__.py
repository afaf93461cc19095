"""Kafka's wire formats and the Arrow frames, pure functions of bytes and tables: ``frames``,
``records`` (``__consumer_offsets``, byte-exact) and ``record_columns``/``record_column_decoding``
(the same a column at a time), ``request_codec``/``request_fast`` (ingest requests) and
``response_codec`` (responses and dead letters). Depends only on ``state.coordinator``."""
