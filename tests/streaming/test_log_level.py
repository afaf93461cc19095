"""Readable logs: the project's lines from --log-level on, libraries' warnings only."""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import logging, sys
from streaming.cli.run import configure_logging
configure_logging(sys.argv[1])
logging.getLogger("kafka.conn").info("connecting to 127.0.0.1:9092")
logging.getLogger("kafka.conn").warning("connection refused")
logging.getLogger("py4j.clientserver").info("Received command c on object id p0")
logging.getLogger("consumer_offsets.writer").info("batch 7: 100 rows")
logging.getLogger("consumer_offsets.writer").debug("batch 7: details")
"""


def _logged(level: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, level], capture_output=True, text=True, check=True
    )
    return done.stderr


def test_info_shows_the_batch_lines_and_library_warnings_only() -> None:
    text = _logged("info")
    assert "batch 7: 100 rows" in text
    assert "connection refused" in text
    assert "connecting to" not in text and "Received command" not in text
    assert "details" not in text


def test_warning_hides_the_batch_lines_and_debug_shows_everything() -> None:
    assert _logged("warning").splitlines()[-1].endswith("connection refused")
    assert "batch 7" not in _logged("warning")
    text = _logged("debug")
    for line in ("connecting to", "Received command", "batch 7: 100 rows", "batch 7: details"):
        assert line in text
