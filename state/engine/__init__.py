"""The vectorized engine: a shard's state as Arrow/numpy columns and the batch operations on it
(``shard_state``, ``apply``, ``shard_reads``, ``loading``, ``state_codec`` and the column
structures beneath). Callers use ``state.shard``."""
