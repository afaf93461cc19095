"""Driver kill: the job's driver process group is SIGKILLed mid-batch under sustained commits
and restarted from its checkpoint. Nothing acknowledged may be lost: every acknowledged
commit's effect is in the sink and the offsets topic, every produced request is eventually
answered, and both stores end equal to the model replayed from the ingest log (rewinds
included), with no offset in the offsets topic that no request ever committed.

While the job is down, ``status`` says NOT RESPONDING within 30 s of the kill (the heartbeat
stops; the row still says ACTIVE) and a ``commit`` exits 1 within 5 s without producing anything,
so nothing is applied when the job returns (a clean stop's STOPPED: tests/reliability/
test_stop_signals.py)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from connectors.sinks import open_sink
from tests.fixtures.job import prepare_topics, unique_group, write_config_file
from tests.reliability.load import CommitLoad, acknowledged, driver
from tests.reliability.support import (
    diff,
    last_batch_id,
    offsets_topic_offsets,
    reliability_config,
    wait_for_sink,
    wait_until,
)
from tests.streaming.cli.support import run
from tests.streaming.helpers import read_all, read_offsets_topic

pytestmark = pytest.mark.slow

#: One kill: the failover, deadline and rebuild tests kill restarted drivers too.
KILLS = 1
#: A cold driver (JVM, Spark, Kafka source, RocksDB) answers its first commit within this.
START_TIMEOUT_S = 180.0
#: The heartbeat's staleness that makes ``status`` say NOT RESPONDING, with margin.
NOT_RESPONDING_WITHIN_S = 30.0
#: A commit to a job not responding is refused before anything is sent.
REFUSED_WITHIN_S = 5.0


def test_driver_sigkill_mid_batch_loses_no_acknowledged_commit(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    config = reliability_config(kafka_bootstrap, tmp_path)
    prepare_topics(config)
    rng = random.Random(11)
    load = CommitLoad(config, rate_per_s=20.0)
    acked_before_kill: list[set[str]] = []
    config_file = write_config_file(config, tmp_path / "job.toml")
    flags = ["--config", str(config_file), "--sink-url", config.sink_url, "--timeout", "60000"]
    refused = unique_group("refused-while-killed")
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
                killed = time.monotonic()
                acked_before_kill.append(set(acknowledged(config)))
                noticed_s, took_s = _refused_while_down(flags, refused, killed)
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
    # The commit refused while the job was down was never produced, so never applied.
    assert refused.encode() not in {r.key for r in read_all(kafka_bootstrap, config.ingest_topic)}
    with open_sink(config.sink_url, read_only=True) as sink:
        assert sink.fetch_offsets(refused) == []
    print(
        f"\ndriver kill: {KILLS} SIGKILLs, {job.starts} starts, {len(produced)} commits sent "
        f"({load.rewinds} rewinds), {len(acked)} acknowledged "
        f"({[len(a) for a in acked_before_kill]} before each kill), {len(model)} keys found "
        f"in sink and offsets topic, 0 lost, {len(history)} offsets-topic records; NOT "
        f"RESPONDING {noticed_s:.1f} s after the kill, a commit refused in {took_s:.2f} s; "
        f"{time.monotonic() - started:.1f} s"
    )


def _refused_while_down(flags: list[str], group: str, killed: float) -> tuple[float, float]:
    """``status`` NOT RESPONDING within its bound of the kill, then a commit refused at once:
    (seconds to NOT RESPONDING, seconds the refused commit took)."""

    def status() -> str:
        answer = run("status", *flags, "--json")
        return str(answer.json()["status"]) if answer.code == 0 else f"exit {answer.code}"

    wait_until(lambda: status() == "NOT RESPONDING", NOT_RESPONDING_WITHIN_S, "NOT RESPONDING")
    noticed_s = time.monotonic() - killed
    started = time.monotonic()
    result = run("commit", *flags, "--group", group, "--topic", "orders", "--partition", "0",
                 "--offset", "7")  # fmt: skip
    took_s = time.monotonic() - started
    assert result.code == 1 and took_s < REFUSED_WITHIN_S, (result, took_s)
    assert "the offsets job is NOT RESPONDING (last seen" in result.err
    assert result.err.count("\n") == 1
    return noticed_s, took_s
