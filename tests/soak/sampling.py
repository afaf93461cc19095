"""One sample per window: memory of every process, disk, the sink, micro-batches, ``serve``.

- **PSS** (``Pss`` of /proc/<pid>/smaps_rollup: shared pages split among their sharers, so a sum
  over processes counts each page once), outside shared memory, by role, and the shared memory apart
  (``shmem_mb``: PostgreSQL's shared buffers, sized by its configuration): the driver's Python and
  its JVM, the Python workers (sum), the same three for the mirror, ``serve``, the load process,
  this harness, each broker and PostgreSQL (the postmaster and its backends, summed). A role whose
  top process started less than ``settle_s`` ago (a restart after a fault) is marked unsettled, and
  the driver's and the mirror's until ``settle_s`` after their first micro-batch (a restart can take
  minutes on a busy machine before the first): the growth check leaves such samples out, since a
  fresh JVM climbing back to its plateau is not a leak.
- **Bytes written** to disk by the driver's and the mirror's process trees in the window
  (``write_bytes`` of /proc/<pid>/io: the checkpoint's RocksDB and changelog files, Spark's
  logs, a SQLite sink), and the **checkpoint sizes** on disk.
- **Micro-batches**, from the checkpoint: batch ``N`` is planned when ``offsets/N`` is written and
  done when ``commits/N`` is, so its time is the difference of the two files' mtimes.
- **The sink**: its size (SQLite: the database with its WAL; PostgreSQL: each table with its
  indexes and TOAST) and the rows of every table of the job and of the mirror.
- **History per group-partition**, the job's and the mirror's: group-partitions with history,
  their max and mean rows (one GROUP BY each, timed), and the bound they must stay under at the
  run's age (:func:`history_bound`).
- ``serve``'s ``/metrics``: answered or not, seconds, bytes.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from state.commit_history import rows_bound_at
from tests.bench.memory import descendants, pss_kb
from tests.soak.growth import table_role
from tests.soak.services import MIRROR_PREFIX, Services

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

#: Seconds of a group-partition's newest commits no thinning pass may have seen yet: a pass
#: runs every check interval (60 s), its purge and its thinning up to 30 s each, and thins what
#: was applied by its start; the job applies a commit up to its request deadline (60 s) after
#: the commit's time, the mirror up to its restart (about 2 minutes) after it.
UNTHINNED_S = 300.0
#: Rows per group-partition of one history table: (group-partitions, max, mean).
_PER_GROUP_PARTITION = (
    "SELECT count(*), max(n), avg(n) FROM"
    ' (SELECT count(*) AS n FROM {} GROUP BY group_id, topic, "partition") AS per_key'
)


def history_bound(age_s: float, commits_per_s: float, retention_ms: int) -> int:
    """The most history rows a group-partition committed at most ``commits_per_s`` may hold
    ``age_s`` into the run: what thinning keeps for that age
    (:func:`state.commit_history.rows_bound_at`) and every commit of the last
    :data:`UNTHINNED_S`, which no pass has thinned yet."""
    age_ms = int(age_s * 1000)
    # Kept forever (-1): still thinned, one commit an hour past the last tier.
    kept = rows_bound_at(age_ms, retention_ms=retention_ms if retention_ms > 0 else age_ms)
    return kept + math.ceil(commits_per_s * UNTHINNED_S)


@dataclass(frozen=True)
class HistoryLoad:
    """What bounds a group-partition's history in this run."""

    #: When the load started (time.time()): no commit is older.
    started_wall: float
    retention_ms: int
    #: "job" / "mirror" → commits per second of their most often committed group-partition.
    commits_per_s: dict[str, float]


def _per_group_partition(run: Callable[[], tuple[Any, ...] | None]) -> dict[str, Any]:
    started = time.monotonic()
    row = run() or (0, None, None)
    return {
        "group_partitions": int(row[0]),
        "max_rows": None if row[1] is None else int(row[1]),
        "mean_rows": None if row[2] is None else float(row[2]),
        "query_s": time.monotonic() - started,
    }


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _age_s(pid: int) -> float | None:
    """Seconds since ``pid`` started, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except OSError:
        return None
    started_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    return uptime - started_ticks / _CLOCK_TICKS


def _write_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def pss_mb(pids: list[int]) -> tuple[float, float] | None:
    """Summed PSS of ``pids``, outside and in shared memory (``pss_kb``); None when there are
    none (a JVM not started yet)."""
    if not pids:
        return None
    measured = [pss_kb(pid) for pid in pids]
    return sum(m[0] for m in measured) / 1024, sum(m[1] for m in measured) / 1024


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_size
    return total


def spark_tree(pid: int) -> dict[str, list[int]]:
    """A Spark driver's tree: its Python, the JVM under it, the Python workers under the JVM."""
    children = descendants(pid)
    jvms = [c for c in children if _comm(c) == "java"]
    workers = [c for jvm in jvms for c in descendants(jvm)]
    return {"python": [pid], "jvm": jvms, "workers": workers}


class Sampler:
    """Takes a window's sample of everything but the load (which reports for itself)."""

    def __init__(
        self,
        services: Services,
        load_pid: int | None,
        settle_s: float,
        history: HistoryLoad | None = None,
    ) -> None:
        self.services = services
        self.load_pid = load_pid
        self.settle_s = settle_s
        self.history_load = history
        self._written: dict[str, dict[int, int]] = {"driver": {}, "mirror": {}}
        self._last_batch = -1
        #: pid → when its first micro-batch was seen (the driver's and the mirror's).
        self._serving_since: dict[int, float] = {}

    # -- memory ------------------------------------------------------------------------------
    def _serving_for(self, pid: int, age_s: float, last_batch_wall: float | None) -> float:
        """Seconds since ``pid`` (the driver or the mirror) was first seen having written a
        batch (one that ended after it started)."""
        if last_batch_wall is not None and last_batch_wall > time.time() - age_s:
            self._serving_since.setdefault(pid, time.monotonic())
        since = self._serving_since.get(pid)
        return 0.0 if since is None else time.monotonic() - since

    def memory(
        self, last_batch_wall: dict[str, float | None] | None = None
    ) -> tuple[dict[str, float | None], dict[str, float], dict[str, bool], dict[str, int]]:
        """PSS in MB by role outside shared memory, the shared memory of the roles that have
        any, whether each role has settled, and the workers' counts. ``last_batch_wall``: when
        the driver's and the mirror's last batch ended (time.time())."""
        measured: dict[str, tuple[float, float] | None] = {}
        settled: dict[str, bool] = {}
        counts: dict[str, int] = {}
        for role, pid in self.services.processes().items():
            age = _age_s(pid)
            is_settled = age is not None and age >= self.settle_s
            if role in ("driver", "mirror"):
                last = (last_batch_wall or {}).get(role)
                serving = self._serving_for(pid, age or 0.0, last)
                is_settled = is_settled and serving >= self.settle_s
                tree = spark_tree(pid)
                for part, pids in tree.items():
                    name = f"{role}_{part}"
                    measured[name] = pss_mb(pids)
                    settled[name] = is_settled
                counts[f"{role}_workers"] = len(tree["workers"])
            else:
                pids = [pid, *descendants(pid)]
                measured[role] = pss_mb(pids)
                settled[role] = is_settled
        for role, pid in (("load", self.load_pid), ("harness", os.getpid())):
            if pid is not None:
                measured[role] = pss_mb([pid])
                age = _age_s(pid)
                settled[role] = age is not None and age >= self.settle_s
        pss = {role: None if m is None else m[0] for role, m in measured.items()}
        shmem = {role: m[1] for role, m in measured.items() if m is not None and m[1] >= 1}
        return pss, shmem, settled, counts

    def written_mb(self) -> dict[str, float]:
        """MB written to disk since the last sample by the driver's and the mirror's trees."""
        out: dict[str, float] = {}
        processes = self.services.processes()
        for role in ("driver", "mirror"):
            last = self._written[role]
            pid = processes.get(role)
            pids = [pid, *descendants(pid)] if pid is not None else []
            now = {p: b for p in pids if (b := _write_bytes(p)) is not None}
            delta = sum(b - last.get(p, 0) for p, b in now.items())
            self._written[role] = now
            out[role] = max(0, delta) / 1e6
        return out

    # -- micro-batches -----------------------------------------------------------------------
    def batches(self, since_wall: float) -> dict[str, Any]:
        """Micro-batches committed since ``since_wall`` (time.time()): count and times."""
        checkpoint = Path(self.services.config.checkpoint_location)
        commits, offsets = checkpoint / "commits", checkpoint / "offsets"
        durations: list[float] = []
        last = self._last_batch
        last_commit_wall: float | None = None
        with contextlib.suppress(OSError):
            for entry in os.scandir(commits):
                if not entry.name.isdigit():
                    continue
                batch = int(entry.name)
                last = max(last, batch)
                done = entry.stat().st_mtime
                last_commit_wall = max(last_commit_wall or done, done)
                if done < since_wall:
                    continue
                with contextlib.suppress(OSError):
                    durations.append(done - (offsets / entry.name).stat().st_mtime)
        count = last - self._last_batch if self._last_batch >= 0 else len(durations)
        self._last_batch = last
        durations.sort()
        return {
            "count": count,
            "last_batch_id": last,
            "last_commit_wall": last_commit_wall,
            "p50_s": durations[len(durations) // 2] if durations else None,
            "max_s": durations[-1] if durations else None,
        }

    # -- the sink ----------------------------------------------------------------------------
    def sink(self) -> dict[str, Any]:
        """Size in MB, rows of each table (job's and mirror's) and of each history table its
        rows per group-partition; an ``error`` while the database cannot be read (a PostgreSQL
        outage)."""
        try:
            if self.services.database_url is not None:
                return self._postgres_sink(self.services.database_url)
            return self._sqlite_sink(Path(self.services.runtime / "offsets.db"))
        except Exception as error:  # the sample records it; the run goes on
            return {"error": f"{type(error).__name__}: {error}"[:300]}

    @staticmethod
    def _sqlite_sink(path: Path) -> dict[str, Any]:
        size = sum(
            p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
        )
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            names = [
                row[0]
                for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            rows = {
                name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in names
            }
            history = {
                name: _per_group_partition(
                    lambda name=name: conn.execute(
                        _PER_GROUP_PARTITION.format(f'"{name}"')
                    ).fetchone()
                )
                for name in names
                if table_role(name)[1] == "offset_commit_history"
            }
        finally:
            conn.close()
        return {"mb": size / 1e6, "rows": rows, "history": history}

    @staticmethod
    def _postgres_sink(url: str) -> dict[str, Any]:
        import psycopg
        from psycopg import sql

        with psycopg.connect(url, connect_timeout=10, autocommit=True) as conn:
            conn.execute("SET statement_timeout = '60s'")
            names = [
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                    " AND (starts_with(tablename, 'soak_') OR starts_with(tablename, %s))",
                    (MIRROR_PREFIX,),
                )
            ]
            rows: dict[str, int] = {}
            history: dict[str, dict[str, Any]] = {}
            size = 0
            for name in names:
                table = sql.Identifier(name)
                count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
                rows[name] = int(count[0]) if count else 0
                total = conn.execute("SELECT pg_total_relation_size(%s)", (name,)).fetchone()
                size += int(total[0]) if total else 0
                if table_role(name)[1] == "offset_commit_history":
                    query = sql.SQL(_PER_GROUP_PARTITION).format(table)
                    history[name] = _per_group_partition(
                        lambda query=query: conn.execute(query).fetchone()
                    )
        return {"mb": size / 1e6, "rows": rows, "history": history}

    def history(self, sink: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The job's and the mirror's history per group-partition from ``sink``'s sample, each
        with the run's age and its bound (:func:`history_bound`)."""
        load = self.history_load
        age_s = None if load is None else time.time() - load.started_wall
        out: dict[str, dict[str, Any]] = {}
        for table, stats in sink.get("history", {}).items():
            owner = table_role(table)[0]
            bound = None
            if load is not None and age_s is not None:
                rate = load.commits_per_s.get(owner, 0.0)
                bound = history_bound(age_s, rate, load.retention_ms)
            out[owner] = {**stats, "age_s": age_s, "bound": bound}
        return out

    # -- one window --------------------------------------------------------------------------
    def sample(self, since_wall: float) -> dict[str, Any]:
        batches = self.batches(since_wall)
        mirror = getattr(self.services.mirror_status(), "last_progress", None)
        mirror_ms = getattr(mirror, "timestamp_ms", None)
        pss, shmem, settled, counts = self.memory(
            {
                "driver": batches["last_commit_wall"],
                "mirror": None if mirror_ms is None else mirror_ms / 1000,
            }
        )
        runtime = self.services.runtime
        status = self.services.job_status()
        progress = getattr(status, "last_progress", None)
        started = time.monotonic()
        sink = self.sink()
        return {
            "pss_mb": pss,
            "shmem_mb": shmem,
            "settled": settled,
            "process_counts": counts,
            "written_mb": self.written_mb(),
            "checkpoint_mb": {
                "job": dir_bytes(Path(self.services.config.checkpoint_location)) / 1e6,
                "mirror": dir_bytes(runtime / "mirror-checkpoint") / 1e6,
            },
            "kafka_mb": dir_bytes(runtime / "kafka") / 1e6,
            "batches": batches,
            "state_keys": getattr(progress, "state_keys", None),
            "sink": sink,
            "history": self.history(sink),
            "serve": self.services.scrape_metrics(),
            "sample_s": time.monotonic() - started,
        }
