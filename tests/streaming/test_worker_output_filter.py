"""The filter between Spark's JVM and the job's standard error: Spark's chatter and the
tracebacks of workers a stop cut off dropped, every other line passed on (a real filter
process, as the job starts it)."""

from __future__ import annotations

from pathlib import Path

from streaming.spark.session import _worker_output_filter

DAEMON = b'  File "/venv/lib/python3.11/site-packages/pyspark/daemon.py", line 262, in manager\n'


def traceback(frame: bytes, error: bytes) -> list[bytes]:
    return [b"Traceback (most recent call last):\n", frame, b"    outfile.flush()\n", error]


def filtered(tmp_path: Path, lines: list[bytes]) -> bytes:
    out = tmp_path / "stderr"
    with out.open("wb") as sink:
        process = _worker_output_filter(sink)
        assert process.stdin is not None
        process.stdin.writelines(lines)
        process.stdin.close()
        assert process.wait(timeout=30) == 0
    return out.read_bytes()


def test_a_worker_cut_off_by_a_stop_prints_nothing(tmp_path: Path) -> None:
    lines = [
        b"INFO batch 0\n",
        *traceback(DAEMON, b"ConnectionResetError: [Errno 104] Connection reset by peer\n"),
        *traceback(DAEMON, b"BrokenPipeError: [Errno 32] Broken pipe\n"),
        b"Streaming TransformWithStateInPandas Python worker\n",
        b"\n",
        b"INFO lease released\n",
    ]
    assert filtered(tmp_path, lines) == b"INFO batch 0\nINFO lease released\n"


def test_every_other_traceback_is_passed_on_whole(tmp_path: Path) -> None:
    mine = b'  File "/app/streaming/spark/processor.py", line 9, in call\n'
    lines = [
        *traceback(DAEMON, b"ValueError: a bug in a worker\n"),
        *traceback(mine, b"ConnectionResetError: [Errno 104] Connection reset by peer\n"),
        # Cut short by the JVM's end: what was held is passed on.
        *traceback(DAEMON, b"    more\n")[:3],
    ]
    assert filtered(tmp_path, lines) == b"".join(lines)
