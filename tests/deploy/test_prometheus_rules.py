"""deploy/prometheus/alerts.yml is valid (``promtool check rules``) and each alert fires and
resolves as its test file says (``promtool test rules``). Without promtool the test is skipped,
except under ``CI=true``, where it fails: CI installs Debian's prometheus package."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        message = "promtool is not installed (Debian: apt-get install prometheus)"
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"{message} — required under CI=true", pytrace=False)
        pytest.skip(message)
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_promtool(), *args], cwd=RULES, capture_output=True, text=True, timeout=120
    )


def test_the_alerting_rules_are_valid() -> None:
    done = _run("check", "rules", "alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_each_alert_fires_and_resolves() -> None:
    done = _run("test", "rules", "alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_rule_tests_fail_when_an_alert_does_not_fire(tmp_path: Path) -> None:
    # The tests can fail: a threshold above every input leaves an expected alert unfired.
    rules = (RULES / "alerts.yml").read_text()
    assert "kafka_consumergroup_group_max_lag_seconds) > 300" in rules
    (tmp_path / "alerts.yml").write_text(rules.replace(") > 300", ") > 7000", 1))
    shutil.copy(RULES / "alerts_test.yml", tmp_path)
    done = subprocess.run(
        [_promtool(), "test", "rules", "alerts_test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "ConsumerGroupLagging" in done.stdout + done.stderr
