"""deploy/background.sh, which the quickstarts source: a service that does not come up fails
the script loudly (exit 1 and the end of its log) instead of letting it carry on."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

BACKGROUND = Path(__file__).resolve().parents[2] / "deploy" / "background.sh"


def script(
    tmp_path: Path, service: str, probe: str, timeout_s: int = 3
) -> subprocess.CompletedProcess[str]:
    body = f"""
set -euo pipefail
source {BACKGROUND}
start_service demo {tmp_path / "demo.log"} bash -c {service!r}
SERVICE_START_TIMEOUT_S={timeout_s} SERVICE_PROGRESS_S=1 wait_for_service {probe}
echo "the script went on"
"""
    return subprocess.run(
        ["bash", "-c", body], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_service_that_is_never_ready_fails_the_script_with_its_log(tmp_path: Path) -> None:
    done = script(tmp_path, "echo 'listening nowhere'; sleep 30", "false")
    assert done.returncode == 1
    assert "the script went on" not in done.stdout
    assert "error: the demo was not ready after 3 s" in done.stderr
    assert "listening nowhere" in done.stderr


def test_a_service_that_exits_fails_the_script_at_once(tmp_path: Path) -> None:
    done = script(tmp_path, "echo 'bad flag'; exit 2", "false")
    assert done.returncode == 1
    assert "error: the demo exited before it was ready" in done.stderr
    assert "bad flag" in done.stderr


def test_a_ready_service_lets_the_script_go_on(tmp_path: Path) -> None:
    done = script(tmp_path, "sleep 30", "true")
    assert done.returncode == 0 and "the script went on" in done.stdout


def test_a_slow_service_is_waited_for_out_loud(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    done = script(tmp_path, f"sleep 3; touch {ready}; sleep 30", f"test -e {ready}", 20)
    assert done.returncode == 0 and "the script went on" in done.stdout
    # A line a second here (15 s in the quickstart) saying how long, and where its log is (on a
    # loaded host the first may come a second late and say 2 s).
    log = re.escape(str(tmp_path / "demo.log"))
    notes = re.findall(rf"\.\.\. waiting for the demo: ([0-9]+) s \(its log: {log}\)", done.stdout)
    assert notes and 1 <= int(notes[0]) <= 3, done.stdout
