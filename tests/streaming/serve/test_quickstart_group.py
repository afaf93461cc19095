"""The quickstart's group (one commit, then nothing, behind the log end) as every view shows
it: ERR on Burrow's route and the dashboard, its partition STOP, as Burrow's evaluator has it
(a group is its worst partition, STOP counted as ERR) and as the README says; 0 members (it
never joined), not a blank."""

from __future__ import annotations

import re
import time
from pathlib import Path

from starlette.testclient import TestClient

from connectors.sinks import BatchProgress, open_sink
from state.coordinator.model import TopicPartition
from streaming.serve import ServeSettings
from streaming.serve.app import create_app
from tests.connectors.sinks.record_frames import commit, frame

README = Path(__file__).parents[3] / "README.md"


def test_the_quickstarts_group_is_err_with_0_members_everywhere(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'offsets.db'}"
    now = int(time.time() * 1000)
    with open_sink(url, keep_history=True) as sink:
        sink.reset("ACTIVE", "test")
        record = commit("quickstart", "orders", 0, 10, commit_timestamp_ms=now - 300_000)
        sink.write_batch(0, frame(record), BatchProgress(batch_id=0, input_rows=1))
        sink.heartbeat()
    app = create_app(ServeSettings(sink_url=url, cluster_name="local", log_end_interval_s=3600))
    with TestClient(app) as client:
        app.state.view.log_ends.observe({TopicPartition("orders", 0): 50}, now)
        app.state.evaluator.evaluate()
        status = client.get("/v3/kafka/local/consumer/quickstart/lag").json()["status"]
        index = client.get("/").text
    (partition,) = status["partitions"]
    assert (status["status"], partition["status"]) == ("ERR", "STOP")
    row = re.search(r'<tr>\s*<td><a href="/group/quickstart">.*?</tr>', index, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    assert 'class="status ERR"' in cells[1]
    assert cells[3] == "0", cells  # members
    guide = " ".join(README.read_text().split())
    assert "the quickstart's, is ERR, its partition STOP" in guide
