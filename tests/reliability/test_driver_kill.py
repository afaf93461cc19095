"""Driver kill: the job's driver process group is SIGKILLed mid-batch under sustained commits
and restarted from its checkpoint. Nothing acknowledged may be lost: every acknowledged
commit's effect is in the sink and the offsets topic, every produced request is eventually
answered, and both stores end equal to the model replayed from the ingest log (rewinds
included), with no offset in the offsets topic that no request ever committed."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from tests.fixtures.job import prepare_topics
from tests.reliability.load import CommitLoad, acknowledged, driver
from tests.reliability.support import (
    diff,
    last_batch_id,
    offsets_topic_offsets,
    reliability_config,
    wait_for_sink,
    wait_until,
)
from tests.streaming.helpers import read_offsets_topic

pytestmark = pytest.mark.slow

#: One kill: the failover, deadline and rebuild tests kill restarted drivers too.
KILLS = 1
#: A cold driver (JVM, Spark, Kafka source, RocksDB) answers its first commit within this.
START_TIMEOUT_S = 180.0


def test_driver_sigkill_mid_batch_loses_no_acknowledged_commit(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    config = reliability_config(kafka_bootstrap, tmp_path)
    prepare_topics(config)
    rng = random.Random(11)
    load = CommitLoad(config, rate_per_s=20.0)
    acked_before_kill: list[set[str]] = []
    with driver(config, tmp_path / "driver.log") as job:
        job.start()
        load.start()
        try:
            for _ in range(KILLS):
                # Let the (re)started driver answer new commits, then kill it inside a batch.
                seen = len(acknowledged(config))
                wait_until(
                    lambda seen=seen: len(acknowledged(config)) > seen + 20,
                    START_TIMEOUT_S,
                    "the driver answering commits",
                    job.check_alive,
                    interval_s=1,
                )
                batch = last_batch_id(config.sink_url)
                wait_until(
                    lambda batch=batch: last_batch_id(config.sink_url) > batch,
                    60,
                    "a new micro-batch",
                    job.check_alive,
                    interval_s=0.2,
                )
                time.sleep(rng.uniform(0.2, 1.5))
                job.kill()
                acked_before_kill.append(set(acknowledged(config)))
                job.start()
            # After the last restart: load keeps flowing for a while, then stops.
            seen = len(acknowledged(config))
            wait_until(
                lambda: len(acknowledged(config)) > seen + 20,
                START_TIMEOUT_S,
                "the restarted driver answering commits",
                job.check_alive,
                interval_s=1,
            )
        finally:
            load.stop()
        assert not load.failed, f"producer gave up on requests: {load.failed[:5]}"
        produced = load.request_ids()
        wait_until(
            lambda: produced <= set(acknowledged(config)),
            120,
            "every produced request acknowledged",
            job.check_alive,
            interval_s=1,
        )
        model = load.model()
        wait_for_sink(config.sink_url, model, job.check_alive)
        job.check_alive()

    acked = acknowledged(config)
    # Every acknowledgement names a produced request, and each one seen before a kill is
    # among them: the final state (= the model of every produced request) contains its effect.
    assert set(acked) == produced
    for before in acked_before_kill:
        assert before <= produced
    in_topic = offsets_topic_offsets(config.bootstrap_servers, config.offsets_topic)
    assert in_topic == model, diff(model, in_topic)
    # No phantom or corrupted offsets: every value in the offsets topic was committed by some
    # request for that key (replayed batches only repeat records).
    committed: dict[tuple[str, str, int], set[int]] = {}
    for sent in load.sent:
        for group, topic, partition, offset in sent.commits:
            committed.setdefault((group, topic, partition), set()).add(offset)
    history = read_offsets_topic(config.bootstrap_servers, config.offsets_topic)
    phantoms = [
        (r.key, r.value.offset)
        for _, r in history
        if r.value is not None
        and r.value.offset not in committed.get((r.key.group, r.key.topic, r.key.partition), set())
    ]
    assert not phantoms, phantoms[:10]
    print(
        f"\ndriver kill: {KILLS} SIGKILLs, {job.starts} starts, {len(produced)} commits sent "
        f"({load.rewinds} rewinds), {len(acked)} acknowledged "
        f"({[len(a) for a in acked_before_kill]} before each kill), {len(model)} keys found "
        f"in sink and offsets topic, 0 lost, {len(history)} offsets-topic records; "
        f"{time.monotonic() - started:.1f} s"
    )
