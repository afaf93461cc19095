"""kafka-python's decoding of compressed batches, made to read what Kafka's producers write.

kafka-python 2.3 decompresses a zstd batch whose frame does not state its size (Kafka's Java
producer, librdkafka and a broker recompressing for a topic's ``compression.type`` all write
such frames) into at most ``kafka.codec.ZSTD_MAX_OUTPUT_SIZE`` bytes, 1 MiB: a larger batch
fails every read of its partition with ``ZstdError: did not decompress full frame``. Importing
this module raises that bound to :data:`ZSTD_BATCH_MAX_BYTES` for the whole process (the
constant is kafka-python's only setting for it); every module here that reads records with
kafka-python imports it.
"""

from __future__ import annotations

from typing import Final

import kafka.codec

#: The largest zstd batch, uncompressed, that kafka-python reads. A batch is at most
#: ``message.max.bytes`` (1 MiB by default) compressed, and producers fill it by that size, so
#: repetitive records can make tens of MiB; the bound stays, so that one small hostile batch
#: cannot claim unbounded memory (python-zstandard allocates it at once for such a frame).
ZSTD_BATCH_MAX_BYTES: Final = 64 * 1024 * 1024

kafka.codec.ZSTD_MAX_OUTPUT_SIZE = max(kafka.codec.ZSTD_MAX_OUTPUT_SIZE, ZSTD_BATCH_MAX_BYTES)
