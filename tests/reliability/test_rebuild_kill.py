"""Driver killed inside the rebuild: a job started without a checkpoint over a non-empty offsets
topic rebuilds every shard in its first micro-batch. SIGKILLed after that batch was planned and
before it was committed, the restarted driver finds a checkpoint with no state in it: it must
still rebuild the shards from the offsets topic and stay LOADING until it has, never answering
from (or acknowledging over) an empty state."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from connectors.sinks import open_sink
from tests.fixtures.job import prepare_topics
from tests.reliability.load import CommitLoad, acknowledged, driver
from tests.reliability.support import reliability_config, sink_offsets, wait_for_sink, wait_until

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 180.0


def _status(sink_url: str) -> str:
    with open_sink(sink_url, read_only=True) as sink:
        return sink.status().status


def test_driver_sigkill_inside_the_rebuild_loses_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    config = reliability_config(kafka_bootstrap, tmp_path)
    prepare_topics(config)
    load = CommitLoad(config, rate_per_s=40.0)
    checkpoint = Path(config.checkpoint_location)
    with driver(config, tmp_path / "driver.log") as job:
        # Some acknowledged commits in the offsets topic and the sink.
        job.start()
        load.start()
        try:
            wait_until(
                lambda: len(acknowledged(config)) > 150,
                START_TIMEOUT_S,
                "the driver answering commits",
                job.check_alive,
                interval_s=1,
            )
        finally:
            load.stop()
        wait_until(
            lambda: load.request_ids() <= set(acknowledged(config)),
            120,
            "every produced request acknowledged",
            job.check_alive,
            interval_s=1,
        )
        model = load.model()
        wait_for_sink(config.sink_url, model, job.check_alive)
        job.stop()

        # Without its checkpoint the job rebuilds; killed once the rebuild's batch is planned.
        shutil.rmtree(checkpoint)
        job.start()
        wait_until(
            lambda: (checkpoint / "offsets" / "0").exists(),
            START_TIMEOUT_S,
            "the rebuild's first micro-batch planned",
            job.check_alive,
            interval_s=0.05,
        )
        assert not (checkpoint / "commits" / "0").exists(), "the batch ended before the kill"
        job.kill()
        assert _status(config.sink_url) == "LOADING"

        # Restarted over the state-less checkpoint: LOADING until the shards are rebuilt, and
        # ACTIVE only over the whole state.
        job.start()
        wait_until(
            lambda: _status(config.sink_url) == "ACTIVE",
            START_TIMEOUT_S,
            "the restarted driver to finish the rebuild",
            job.check_alive,
            interval_s=0.2,
        )
        assert sink_offsets(config.sink_url) == model
        job.check_alive()

    print(
        f"\nrebuild kill: {len(model)} keys from {len(load.request_ids())} commits rebuilt "
        f"after a SIGKILL inside the rebuild's batch; {time.monotonic() - started:.1f} s"
    )
