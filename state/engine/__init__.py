"""The vectorized engine: a shard's state as Arrow/numpy columns and the batch operations on it.

``shard_state`` (the state, replay, expiry), ``apply`` (a request frame applied to a shard),
``shard_reads`` and ``loading`` (reading it, loading it from the offsets topic), ``state_codec``
(its blob), and the column structures beneath: ``offset_table``, ``groups``, ``hashing``,
``expiry``, ``record_frame``, ``request_frame``, ``columns``. Callers use ``state.shard``.
"""
