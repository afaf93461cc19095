"""The offsets-topic loader reads committed batches only: an aborted batch (a failed one, or a
fenced zombie's) is skipped, and an open one is not waited for (the load ends at the last stable
offset)."""

from __future__ import annotations

import time
import uuid

from connectors.kafka.offsets_log import read_partition_chunks
from connectors.kafka.producer import DurableProducer


def test_a_load_reads_committed_records_up_to_the_last_stable_offset(
    kafka_bootstrap: str, unique_topic: str
) -> None:
    producer = DurableProducer(kafka_bootstrap, {}, "none", f"loader-{uuid.uuid4().hex[:8]}")
    try:
        for keys, committed in (([b"a", b"b"], True), ([b"x"], False), ([b"c"], True)):
            producer.begin()
            producer.send(unique_topic, keys, [b"v"] * len(keys), [0] * len(keys))
            producer.flush(30)
            if committed:
                producer.commit(30)
            else:
                producer.abort(30)
        producer.begin()
        producer.send(unique_topic, [b"open"], [b"v"], [0])
        producer.flush(30)  # in the log, its transaction still open

        started = time.monotonic()
        chunks = list(read_partition_chunks(kafka_bootstrap, {}, unique_topic, 0, timeout_s=20))
        keys = [k for chunk_keys, _ in chunks for k in chunk_keys.to_pylist()]
        assert keys == [b"a", b"b", b"c"]
        assert time.monotonic() - started < 10  # ended at the open transaction, not its timeout
    finally:
        producer.abort(30)
        producer.close()
