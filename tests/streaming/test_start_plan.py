"""Where the job starts (``streaming.spark.start_plan.plan_start``), decided without Spark."""

from __future__ import annotations

import json

import pytest

from streaming.config import embedded_default
from streaming.spark.start_plan import NO_LAYOUT, CheckpointFacts, SinkFacts, StartPlan, plan_start
from streaming.spark.state_shards import StateLayout

CONFIG = embedded_default(ingest_topic="in", partitions=4, ingest_partitions=2)
LAYOUT = {"in": 2}
EMPTY_LOG = {0: 0, 1: 0, 2: 0, 3: 0}
LOG = {0: 5, 1: 0, 2: 0, 3: 0}
NONE = CheckpointFacts()
STOPPED = SinkFacts("STOPPED")
RELEASE_1 = CheckpointFacts(
    exists=True,
    earlier_release="the group-state operator (applyInPandasWithState)",
    committed={"in": {0: 4, 1: 3}},
)


def _plan(
    checkpoint: CheckpointFacts = NONE,
    sink: SinkFacts = STOPPED,
    stored: dict[int, int] = EMPTY_LOG,
    parallelism: int = 2,
) -> StartPlan:
    return plan_start(CONFIG, checkpoint, sink, stored, LAYOUT, parallelism)


def test_a_new_checkpoint_over_an_empty_offsets_topic_starts_new_state() -> None:
    plan = _plan()
    assert not plan.resumed and plan.migrate is None
    assert (plan.status, plan.reset_sink, plan.loading) == ("STARTING", True, False)
    assert plan.starting_offsets == CONFIG.starting_offsets
    # Spread over the state partitions: one shard each.
    assert plan.layout == StateLayout(2, 2)
    assert plan.state_partitions == 2


def test_a_new_checkpoint_over_a_filled_offsets_topic_rebuilds_from_it() -> None:
    plan = _plan(stored=LOG, sink=SinkFacts("ACTIVE", {0: 7}))
    assert (plan.status, plan.reset_sink, plan.loading) == ("LOADING", True, True)
    assert plan.load_from_offsets_topic
    # Reading starts after what the sink last recorded; partitions it never saw at the earliest.
    assert json.loads(plan.starting_offsets) == {"in": {"0": 7, "1": -2}}
    # The writer starts over with the sink.
    assert plan.ingest_offsets == {}


def test_a_checkpoint_resumes_with_its_layout_and_the_sinks_progress() -> None:
    held = CheckpointFacts(exists=True, layout=StateLayout(2, 1))
    plan = _plan(held, SinkFacts("ACTIVE", {0: 7, 1: 3}), stored=LOG)
    assert plan.resumed and plan.migrate is None
    assert (plan.status, plan.reset_sink, plan.loading) == ("STARTING", False, False)
    assert plan.layout == StateLayout(2, 1) and plan.state_partitions == 1
    assert plan.ingest_offsets == {0: 7, 1: 3}


def test_a_checkpoint_without_a_recorded_layout_is_release_1s_and_migrated() -> None:
    plan = _plan(CheckpointFacts(exists=True, committed={"in": {0: 4}}), stored=LOG)
    assert plan.migrate == NO_LAYOUT and not plan.resumed
    assert plan.layout == StateLayout(2, 2)
    assert json.loads(plan.starting_offsets) == {"in": {"0": 4, "1": -2}}


def test_a_rebuild_the_driver_never_finished_resumes_loading() -> None:
    held = CheckpointFacts(exists=True, layout=StateLayout(4, 2))
    plan = _plan(held, SinkFacts("LOADING"), stored=LOG)
    assert (plan.status, plan.reset_sink, plan.loading) == ("LOADING", False, True)
    # Without records in the offsets topic there is nothing to load.
    assert not _plan(held, SinkFacts("LOADING")).loading


def test_a_checkpoint_of_an_earlier_release_is_migrated_from_its_committed_positions() -> None:
    plan = _plan(RELEASE_1, stored=LOG)
    assert plan.migrate == RELEASE_1.earlier_release
    # A new checkpoint: its own layout, the sink view starts over, the state rebuilt.
    assert not plan.resumed and plan.layout == StateLayout(2, 2)
    assert (plan.status, plan.reset_sink, plan.loading) == ("LOADING", True, True)
    assert json.loads(plan.starting_offsets) == {"in": {"0": 4, "1": 3}}


def test_a_migration_starts_past_a_batch_the_sink_wrote_but_the_checkpoint_never_committed() -> (
    None
):
    # The sink recorded partition 0 one batch further: that batch was answered already.
    plan = _plan(RELEASE_1, SinkFacts("ACTIVE", {0: 6, 1: 2}), stored=LOG)
    assert json.loads(plan.starting_offsets) == {"in": {"0": 6, "1": 3}}


def test_a_state_shard_count_the_checkpoint_refuses_fails_the_plan() -> None:
    held = CheckpointFacts(exists=True, layout=StateLayout(2, 1))
    config = embedded_default(ingest_topic="in", partitions=4, ingest_partitions=2, state_shards=4)
    with pytest.raises(ValueError, match="move the checkpoint away"):
        plan_start(config, held, STOPPED, EMPTY_LOG, LAYOUT, 2)
