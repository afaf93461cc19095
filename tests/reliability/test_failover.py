"""Failover: an active driver and a warm standby (``--standby``) of one deployment, on one
SQLite sink, under sustained commits. The module shares its drivers (each start costs ~20 s):

(a) the active's process group is SIGKILLed inside a batch: the standby takes the lease at once
    and answers; every request is answered and the sink and the offsets topic equal the model;
(b) the zombie: the killed driver, restarted as the standby, takes over from the active paused
    by SIGSTOP while a batch's transaction was open, once its lease expired; the open
    transaction is aborted (an ABORT marker of its producer after each of its batches, read from
    the partitions' record batches), nothing of its producer lands after the pause in the
    offsets or the responses topic, the resumed zombie exits with status 3, and both topics
    (read committed) and the sink equal the model. Without fencing (a transactional.id per
    process) the offsets topic stays behind the zombie's open transaction and (b) fails.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kafka import KafkaConsumer
from kafka.structs import TopicPartition

from streaming.config import JobConfig
from tests.fixtures.job import prepare_topics
from tests.reliability.load import CommitLoad, DriverProcess, acknowledged
from tests.reliability.support import (
    READ_COMMITTED,
    CommitModel,
    diff,
    first_answer_after,
    last_batch_id,
    log_line_time,
    offsets_topic_offsets,
    produced_batches,
    reliability_config,
    wait_for_sink,
    wait_until,
)

pytestmark = pytest.mark.slow

#: Short, so that the zombie phase waits little for the paused active's lease to expire.
LEASE_TTL_MS = 4_000
ACTIVE = (f"--lease-ttl-ms={LEASE_TTL_MS}",)
STANDBY = ("--standby", *ACTIVE)
RATE_PER_S = 50.0
#: A cold driver (JVM, Spark, Kafka source, RocksDB) is ready within this.
START_TIMEOUT_S = 180.0
#: Kill → the standby's first answer: what separates a warm takeover from a cold start on a
#: loaded CI machine (34 s seen there; bench_recovery --standby measures the speed).
TAKEOVER_BOUND_S = 60.0
ACQUIRED = "lease job acquired"
READY = "standby ready"


@dataclass
class Deployment:
    """The deployment under test: its two drivers and the loads sent to it so far."""

    config: JobConfig
    first: DriverProcess
    second: DriverProcess
    loads: list[CommitLoad] = field(default_factory=list)

    def load(self, seed: int) -> CommitLoad:
        """A new commit load (after the previous one stopped), counted in the model."""
        load = CommitLoad(self.config, rate_per_s=RATE_PER_S, seed=seed)
        self.loads.append(load.start())
        return load

    def model(self) -> dict[tuple[str, str, int], int]:
        """The committed offsets every load's requests make, replayed in ingest log order."""
        sent = [(s.position, s.commits) for load in self.loads for s in load.sent]
        return CommitModel.from_log(sent).offsets

    def produced(self) -> set[str]:
        return {rid for load in self.loads for rid in load.request_ids()}


@pytest.fixture(scope="module")
def deployment(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    folder = tmp_path_factory.mktemp("failover")
    config = reliability_config(kafka_bootstrap, folder)
    prepare_topics(config)
    first = DriverProcess(config, folder / "first.log", ACTIVE)
    second = DriverProcess(config, folder / "second.log", STANDBY)
    found = Deployment(config, first, second)
    try:
        first.start()
        first.wait_for_log(ACQUIRED, START_TIMEOUT_S)
        second.start()  # warms up while the active starts its query
        yield found
    finally:
        for load in found.loads:
            with contextlib.suppress(AssertionError):
                load.stop()
        second.stop()
        first.stop()


def test_standby_answers_within_seconds_of_the_active_killed(deployment: Deployment) -> None:
    active, standby = deployment.first, deployment.second
    load = deployment.load(seed=21)
    _answering(deployment, active)
    standby.wait_for_log(READY, START_TIMEOUT_S)
    _inside_a_batch(active)
    killed_at = time.time()
    active.kill()
    acquired = standby.wait_for_log(ACQUIRED, TAKEOVER_BOUND_S)
    answered_at = _first_answer(standby, killed_at)
    active.start(STANDBY)  # the killed one comes back as the standby (for the next test)
    load.stop()
    _all_answered_and_equal_to_the_model(deployment, standby)
    takeover_s = answered_at - killed_at
    assert takeover_s < TAKEOVER_BOUND_S
    print(
        f"\nfailover after SIGKILL: lease acquired {log_line_time(acquired) - killed_at:.1f} s, "
        f"first answer {takeover_s:.1f} s after the kill; {len(deployment.produced())} requests "
        f"answered, {len(deployment.model())} keys equal in sink and offsets topic"
    )


def test_paused_active_writes_nothing_after_the_standby_took_over(deployment: Deployment) -> None:
    config = deployment.config
    standby, active = deployment.first, deployment.second  # the killed one is the standby
    load = deployment.load(seed=22)
    standby.wait_for_log(READY, START_TIMEOUT_S)
    _answering(deployment, active)
    topics = (config.offsets_topic, config.responses_topic)
    bootstrap = config.bootstrap_servers
    stable, ends = _pause_inside_a_transaction(active, bootstrap, topics, config.sink_url)
    paused_at = time.time()
    acquired = standby.wait_for_log(ACQUIRED, LEASE_TTL_MS / 1000 + TAKEOVER_BOUND_S)
    # The paused holder is alive (its epoch lock held): taken over by expiry, not at once.
    assert log_line_time(acquired) - paused_at > LEASE_TTL_MS / 2000, acquired
    # Read committed, as clients read: visible only once the paused transaction is aborted.
    _first_answer(standby, paused_at)
    active.resume()
    wait_until(lambda: not active.running, 60, "the resumed zombie exiting", interval_s=0.2)
    assert active.process is not None and active.process.returncode == 3, active.log_tail()
    load.stop()
    _all_answered_and_equal_to_the_model(deployment, standby)
    zombie = _open_transaction_producers(bootstrap, topics[0], stable[topics[0]], ends[topics[0]])
    for topic in topics:
        _aborted_and_nothing_after(bootstrap, topic, zombie, stable[topic], ends[topic])
    print(
        f"\nzombie: paused inside a transaction, taken over "
        f"{log_line_time(acquired) - paused_at:.1f} s later (lease TTL {LEASE_TTL_MS} ms); its "
        f"open transaction aborted; resumed, it exited with status 3 and wrote nothing; "
        f"{len(deployment.produced())} requests answered"
    )


def _pause_inside_a_transaction(
    driver: DriverProcess, bootstrap: str, topics: tuple[str, ...], sink_url: str
) -> tuple[dict[str, dict[int, int]], dict[str, dict[int, int]]]:
    """SIGSTOP ``driver`` while a batch's transaction is open on the offsets topic (records
    written, not committed), so that the takeover has to fence it, and outside its SQLite
    write: a holder frozen inside one keeps the file's only write lock, and is taken over
    once it dies, not once its lease expires (PostgreSQL ends such a write: test_lease.py).
    Returns, per topic, the last stable offsets (where open transactions start) and the log
    ends, as the pause froze them. A pause that missed is short (well under the holder's 2 s
    without renewal)."""
    readers = [
        KafkaConsumer(bootstrap_servers=bootstrap.split(","), isolation_level=isolation)
        for isolation in (READ_COMMITTED, "read_uncommitted")
    ]
    try:
        tps = [
            TopicPartition(topic, p)
            for topic in topics
            for p in sorted(readers[0].partitions_for_topic(topic) or ())
        ]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if _open_on(topics[0], *(reader.end_offsets(tps) for reader in readers)):
                driver.pause()
                time.sleep(0.2)  # requests sent before the pause land
                stable, ends = (reader.end_offsets(tps) for reader in readers)
                if _open_on(topics[0], stable, ends) and not _write_locked(sink_url):
                    return _by_topic(stable), _by_topic(ends)
                driver.resume()  # it committed meanwhile: try the next batch
            time.sleep(0.01)
    finally:
        for reader in readers:
            reader.close()
    raise AssertionError("no batch paused with its transaction open within 120 s")


def _write_locked(sink_url: str) -> bool:
    """Whether a process holds the SQLite sink's write lock."""
    conn = sqlite3.connect(sink_url.removeprefix("sqlite:///"), timeout=0)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()
    return False


def _open_on(
    topic: str, stable: dict[TopicPartition, int], ends: dict[TopicPartition, int]
) -> bool:
    return any(stable[tp] < ends[tp] for tp in ends if tp.topic == topic)


def _by_topic(offsets: dict[TopicPartition, int]) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for tp, offset in offsets.items():
        out.setdefault(tp.topic, {})[tp.partition] = offset
    return out


def _open_transaction_producers(
    bootstrap: str, topic: str, stable: dict[int, int], ends: dict[int, int]
) -> set[tuple[int, int]]:
    """(producer id, epoch) of the data batches between the last stable offsets and the log
    ends at the pause: the paused holder's open transaction."""
    found = {
        (b.producer_id, b.producer_epoch)
        for b in produced_batches(bootstrap, topic)
        if b.marker is None and stable[b.partition] <= b.base_offset < ends[b.partition]
    }
    assert found, f"{topic}: no open transaction at {stable}"
    return found


def _aborted_and_nothing_after(
    bootstrap: str,
    topic: str,
    zombie: set[tuple[int, int]],
    stable: dict[int, int],
    ends: dict[int, int],
) -> None:
    """The zombie's batches from ``stable`` on were all written before the pause (``ends``),
    and each is followed by an ABORT marker of its producer before any COMMIT: nothing of its
    open transaction became readable, nothing it sent after the pause landed."""
    batches = produced_batches(bootstrap, topic)
    for i, batch in enumerate(batches):
        if batch.marker is not None or (batch.producer_id, batch.producer_epoch) not in zombie:
            continue
        if batch.base_offset < stable[batch.partition]:
            continue  # an earlier, committed batch of the same producer
        assert batch.base_offset < ends[batch.partition], f"{topic}: written after: {batch}"
        marker = next(
            (
                b.marker
                for b in batches[i + 1 :]
                if b.partition == batch.partition
                and b.producer_id == batch.producer_id
                and b.marker is not None
            ),
            None,
        )
        assert marker == "ABORT", f"{topic}: {batch} ended with {marker}"


def _answering(deployment: Deployment, active: DriverProcess) -> None:
    """Wait until ``active`` answers new commits."""
    config = deployment.config
    seen = len(acknowledged(config))
    wait_until(
        lambda: len(acknowledged(config)) > seen + 20,
        START_TIMEOUT_S,
        "the active answering commits",
        active.check_alive,
        interval_s=1,
    )


def _inside_a_batch(active: DriverProcess) -> None:
    """Wait until ``active`` records a new micro-batch, then a little into the next one."""
    sink_url = active.config.sink_url
    batch = last_batch_id(sink_url)
    wait_until(lambda: last_batch_id(sink_url) > batch, 60, "a new batch", active.check_alive, 0.2)
    time.sleep(0.3)


def _first_answer(driver: DriverProcess, after_s: float) -> float:
    """CreateTime of the first answer produced after ``after_s`` (by ``driver``, the holder)."""
    config = driver.config
    found: list[float] = []

    def answered() -> bool:
        at = first_answer_after(config.bootstrap_servers, config.responses_topic, after_s)
        found[:] = [] if at is None else [at]
        return at is not None

    wait_until(answered, TAKEOVER_BOUND_S * 2, "the new holder's first answer", driver.check_alive)
    return found[0]


def _all_answered_and_equal_to_the_model(deployment: Deployment, holder: DriverProcess) -> None:
    """Every request answered (read committed), sink and offsets topic equal to the model."""
    config = holder.config
    for load in deployment.loads:
        assert not load.failed, f"producer gave up on requests: {load.failed[:5]}"
    produced = deployment.produced()
    wait_until(
        lambda: produced <= set(acknowledged(config)),
        120,
        "every produced request acknowledged",
        holder.check_alive,
        interval_s=1,
    )
    model = deployment.model()
    wait_for_sink(config.sink_url, model, holder.check_alive)
    in_topic = offsets_topic_offsets(config.bootstrap_servers, config.offsets_topic)
    assert in_topic == model, diff(model, in_topic)
    unexpected = set(acknowledged(config)) - produced
    assert not unexpected, sorted(unexpected)[:5]
