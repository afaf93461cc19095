"""serve's /metrics shows an ingest partition held by an open transaction, with the seconds
since the transaction's first record, while it is open, and drops it after; read by the
log-end cache's refresh from the test broker (a tenant's ingest topic too)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from connectors.sinks import BatchProgress, open_sink
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from streaming.tenants import parse_tenants
from tests.connectors.kafka.transactions import Committer
from tests.connectors.sinks.record_frames import commit, frame
from tests.fixtures.kafka import TopicFactory
from tests.streaming.helpers import wait_for
from tests.streaming.serve.support import get, serving

HELD = "consumer_offsets_ingest_partition_held_seconds"


def held(text: str | None) -> dict[tuple[str, int], float]:
    """The held partitions /metrics shows: (topic, partition) -> seconds."""
    pattern = HELD + r'\{partition="(\d+)",topic="([^"]+)"\} (\S+)'
    return {(t, int(p)): float(v) for p, t, v in re.findall(pattern, text or "")}


def test_metrics_show_the_partitions_an_open_transaction_holds(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    ingest, tenant_ingest = topic_factory(partitions=2), topic_factory(partitions=1)
    sink_url = f"sqlite:///{tmp_path / 'offsets.db'}"
    with open_sink(sink_url) as sink:
        sink.reset("ACTIVE", "test")
        sink.write_batch(0, frame(commit("g", "t", 0, 1)), BatchProgress(batch_id=0))
    (tenant,) = parse_tenants(
        [{"name": "a", "ingest_topic": tenant_ingest, "responses_topic": "r"}]
    )
    settings = ServeSettings(sink_url, kafka_bootstrap, ingest_topic=ingest, log_end_interval_s=0.5)
    own, theirs = Committer(kafka_bootstrap, ingest), Committer(kafka_bootstrap, tenant_ingest)
    with serving(create_app(settings, (tenant,))) as url:
        metrics = f"{url}/metrics"
        opened_ms = time.time() * 1000
        own.begin()
        own.txn_offset_commit("g", 1, {("t", 0): 2})
        theirs.begin()
        theirs.txn_offset_commit("h", 0, {("t", 0): 3})
        both = wait_for(lambda: held(get(metrics)), lambda h: len(h) == 2, 30)
        assert set(both) == {(ingest, 1), (tenant_ingest, 0)}
        assert all(
            seconds <= (time.time() * 1000 - opened_ms) / 1000 + 1 for seconds in both.values()
        )
        # The age grows while the transaction stays open.
        older = wait_for(lambda: held(get(metrics)), lambda h: h.get((ingest, 1), 0) >= 1.5, 30)
        assert older[(ingest, 1)] >= 1.5
        own.commit()
        after = wait_for(lambda: held(get(metrics)), lambda h: (ingest, 1) not in h, 30)
        assert list(after) == [(tenant_ingest, 0)]
        theirs.abort()
        wait_for(lambda: held(get(metrics)), lambda h: not h, 30)
        assert f"# TYPE {HELD} gauge" in (get(metrics) or "")
