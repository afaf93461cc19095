"""A state partition's shards in ``heads``, ``bases`` and ``log``
(``streaming.spark.value_states``), driven through PySpark's own in-memory state
(``TwsTester``): each shard reads back whole in a worker that kept nothing, and the log stays
bounded while its shards' bases are rewritten."""

from __future__ import annotations

import secrets

import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming.tws_tester import TwsTester

from state.coordinator.config import CoordinatorConfig
from state.coordinator.model import TopicPartition
from state.coordinator.requests import OffsetCommitRequest, PartitionCommit
from state.formats.request_codec import encode_request
from state.shard import snapshot
from streaming.spark import processor
from streaming.spark.output import decode_each_output
from streaming.spark.processor import ProcessorSettings
from streaming.spark.shard_cache import DecodedShards
from streaming.spark.value_states import (
    BASES_KEY_SCHEMA,
    BASES_SCHEMA,
    COMPACT_BYTES,
    HEADS_SCHEMA,
    LOG_SCHEMA,
    PartitionProcessor,
    PartitionStore,
    decode_heads,
)

T0 = 1_700_000_000_000
CONFIG = CoordinatorConfig(offsets_topic_partitions=4, state_shards=4)
KEY = 7  # any: the processor reads the shard from each row


def _groups() -> dict[int, str]:
    """A group in each of two shards of state partition 0 of 2: shards 0 and 2."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < 2:
        shard = CONFIG.state_shard_for(f"g{n}")
        if shard in (0, 2):
            found.setdefault(shard, f"g{n}")
        n += 1
    return found


class Processor(PartitionProcessor):
    """The processor at a set batch time: ``TwsTester`` has no state server to ask."""

    now_ms = T0

    def batch_time_ms(self) -> int:
        return self.now_ms


def _settings(cache_bytes: int) -> ProcessorSettings:
    return ProcessorSettings(
        coordinator=CONFIG,
        offsets_topic="offsets",
        bootstrap_servers="",
        kafka_options={},
        load_from_offsets_topic=False,
        state_cache_bytes=cache_bytes,
    )


def _messages(call: int, groups: dict[int, str], metadata_chars: int) -> pd.DataFrame:
    rows = [
        (
            shard,
            encode_request(
                OffsetCommitRequest(
                    f"c{call}-{shard}",
                    group,
                    (
                        PartitionCommit(
                            "t", call, 100 + call, metadata=secrets.token_hex(metadata_chars // 2)
                        ),
                    ),
                )
            ),
        )
        for shard, group in groups.items()
    ]
    return pd.DataFrame(
        {
            "state_key": [KEY] * len(rows),
            "shard": [shard for shard, _ in rows],
            "ingest_partition": [shard for shard, _ in rows],
            "ingest_offset": [call] * len(rows),
            "timestamp_ms": [T0] * len(rows),
            "value": [value for _, value in rows],
        }
    )


def _answers(out: pd.DataFrame) -> list[dict[str, object]]:
    return [
        row
        for table in decode_each_output(pa.array(out["payload"]))
        for row in table.to_pylist()
        if row["out"] == "response"
    ]


def test_shards_of_a_partition_read_back_whole_and_the_log_stays_bounded() -> None:
    groups = _groups()
    tester = TwsTester(Processor(_settings(cache_bytes=64 * 1024 * 1024)))
    calls, largest = 120, 0
    for call in range(calls):
        # Each call in one of two workers at random, as Spark hands tasks out.
        processor._decoded = None if call % 3 == 0 else processor._decoded
        out = tester.testInPandas(KEY, _messages(call, groups, metadata_chars=3500))
        assert sorted(out["shard"]) == sorted(groups)
        answers = _answers(out)
        assert len(answers) == 2 and all(b'"errorCode":0' in a["value"] for a in answers)
        (heads_blob, entries, log_bytes) = tester.peekValueState("heads", KEY)
        heads = decode_heads(heads_blob)
        log = tester.peekListState("log", KEY)
        assert len(log) == entries and sum(len(row[3]) for row in log) == log_bytes
        live = sum(head.log_bytes for head in heads.values())
        # Stale chunks of rewritten bases never outweigh max(live, COMPACT_BYTES) for long.
        assert log_bytes - live <= max(live, COMPACT_BYTES) + 8 * 1024
        largest = max(largest, log_bytes)
    # The bases were rewritten (else nothing went stale) and the log compacted.
    bases = tester.peekMapState("bases", KEY)
    assert sorted(bases) == [(0,), (2,)]
    assert largest > COMPACT_BYTES

    # A worker that kept nothing reads each shard from its base and the live chunks.
    tester.handle.setGroupingKey(KEY)
    store = PartitionStore(
        tester.handle.getValueState("heads", HEADS_SCHEMA),
        tester.handle.getMapState("bases", BASES_KEY_SCHEMA, BASES_SCHEMA),
        tester.handle.getListState("log", LOG_SCHEMA),
        T0,
    )
    for shard, group in groups.items():
        state = store.read(DecodedShards(0), shard)
        assert state is not None
        offsets = snapshot(state)[group].offsets
        assert set(offsets) == {TopicPartition("t", p) for p in range(calls)}
        assert offsets[TopicPartition("t", calls - 1)].offset == 100 + calls - 1
