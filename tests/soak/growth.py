"""The resource-growth rule: does anything keep growing after warm-up beyond what the state's
growth explains?

For every resource series (PSS per process role outside shared memory, checkpoint sizes, the sink's
size and rows per table, MB written per window, the median micro-batch time), over the windows after
warm-up (the first ``warmup_fraction`` of the run, 20% by default):

1. Samples of a process that started less than ``settle_s`` ago are left out (a restarted JVM
   climbing back to its plateau is not a leak), as are windows where the value could not be read
   (the sink during a PostgreSQL outage).
2. A robust line through the remaining samples (Theil-Sen: the median of the slopes between
   every two samples) gives the **growth**: slope x the span between the first and the last
   of them. One spike or a few samples of a process still climbing back after a restart move
   the median little; a steady trend moves every slope. At least 3 samples are needed;
   fewer → "too few".
3. The **explained** growth: for resources that hold the state (``keys``: the driver's JVM and
   Python workers, ``serve``, the checkpoint, the sink's offsets table and size, bytes written),
   the level x the relative growth of the keys in state over the same span (the job's
   ``state_keys``, fitted the same way); for the job's history table under retention
   (``retention``), the growth of the commits applied within the trailing retention period
   (answered requests x partitions per request, summed over the windows inside it, fitted the
   same way): history holds one row per commit of that period, so a faster or slower stretch
   of the run moves it without anything leaking; for the rest, none.
4. The resource **grows** when growth > explained + max(absolute tolerance, relative tolerance x
   level), the level being the median sample. Tolerances per unit: PSS 10% or 64 MB, disk 10% or
   32 MB, rows 5% or 1,000, MB written per window 25% or 32 MB, batch time 25% or 0.25 s.

Series that grow by design are exempt, with the reason printed: Kafka's own data (time-based topic
retention, 7 days), shared memory (PostgreSQL's shared buffers, filled up to ``shared_buffers`` as
the sink grows) and, with history at the job's defaults (kept 7 days, thinned as it ages), the
history tables and the sink's size: they grow for days, towards a bound per group-partition. That
bound is checked instead (``bound``): in every window, the job's and the mirror's max history rows
per group-partition must not exceed the window's bound for the run's age
(``tests.soak.sampling.history_bound``); above it, the verdict is ABOVE BOUND.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: unit → (relative tolerance, absolute tolerance)
TOLERANCES: dict[str, tuple[float, float]] = {
    "MB": (0.10, 64.0),
    "disk MB": (0.10, 32.0),
    "rows": (0.05, 1_000.0),
    "MB/window": (0.25, 32.0),
    "s": (0.25, 0.25),
}


THIRTY_DAYS_S = 30 * 86_400.0


@dataclass(frozen=True)
class Series:
    name: str
    unit: str
    #: "keys" (grows with the state), "retention", "none", "bound" (``pick`` must stay at or
    #: under ``bound`` in every window) or "exempt: <reason>"
    explained_by: str
    pick: Callable[[dict[str, Any]], float | None]
    settled: Callable[[dict[str, Any]], bool] = lambda _w: True
    bound: Callable[[dict[str, Any]], float | None] = lambda _w: None


@dataclass(frozen=True)
class Verdict:
    name: str
    unit: str
    samples: int
    level: float | None
    growth: float | None
    explained: float | None
    allowed: float | None
    verdict: str
    #: The fitted slope carried over 30 days (unit per 30 days): what the run's trend would come
    #: to if it held that long; noise for a flat series, the figure to watch for a growing one.
    per_30_days: float | None = None


def fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Theil-Sen slope (the median of the slopes between every two samples) and the median
    intercept: a steady trend, which one spike (a Python worker forked at the moment of a
    sample) or a few low samples (a process still climbing back after a restart) do not make."""
    n = len(points)
    slopes = [
        (points[j][1] - points[i][1]) / (points[j][0] - points[i][0])
        for i in range(n)
        for j in range(i + 1, n)
        if points[j][0] != points[i][0]
    ]
    slope = statistics.median(slopes) if slopes else 0.0
    return slope, statistics.median(v - slope * t for t, v in points)


def keys_growth(windows: Sequence[dict[str, Any]], start_s: float, end_s: float) -> float:
    """Relative growth of the keys in state between ``start_s`` and ``end_s`` (fitted)."""
    points = [(w["t_s"], float(w["state_keys"])) for w in windows if w.get("state_keys")]
    if len(points) < 2:
        return 0.0
    slope, intercept = fit(points)
    at_start = slope * start_s + intercept
    if at_start <= 0:
        return 0.0
    return max(0.0, slope * (end_s - start_s) / at_start)


def applied_commits(window: dict[str, Any], partitions_per_request: int) -> float:
    """Partition commits the job applied in ``window``: its successful answers (neither timed
    out nor an error) x partitions per request."""
    load = window.get("load", {})
    ok = load.get("answered", 0) - load.get("timed_out", 0) - load.get("error_answers", 0)
    return max(0, ok) * partitions_per_request


def retained_commits(
    windows: Sequence[dict[str, Any]], retention_s: float, partitions_per_request: int
) -> list[tuple[float, float]]:
    """(t, commits applied within the retention period ending at t) per window."""
    return [
        (
            w["t_s"],
            sum(
                applied_commits(v, partitions_per_request)
                for v in windows
                if w["t_s"] - retention_s < v["t_s"] <= w["t_s"]
            ),
        )
        for w in windows
    ]


def retention_growth(
    windows: Sequence[dict[str, Any]],
    start_s: float,
    end_s: float,
    retention_s: float,
    partitions_per_request: int,
) -> float:
    """Fitted growth, in rows, of the commits within the retention period over [start, end]."""
    points = [
        p
        for p in retained_commits(windows, retention_s, partitions_per_request)
        if start_s <= p[0] <= end_s
    ]
    if len(points) < 2:
        return 0.0
    slope, _ = fit(points)
    return max(0.0, slope * (end_s - start_s))


def check_bound(windows: Sequence[dict[str, Any]], s: Series) -> Verdict:
    """``s`` against its bound in every window (warm-up included: the bound holds from the
    start): level = the highest value, allowed = the bound of the window with the least room."""
    pairs = [
        (float(value), float(bound))
        for w in windows
        if (value := s.pick(w)) is not None and (bound := s.bound(w)) is not None
    ]
    if not pairs:
        return Verdict(s.name, s.unit, 0, None, None, None, None, "too few")
    value, bound = max(pairs, key=lambda p: p[0] - p[1])
    verdict = "within bound" if value <= bound else "ABOVE BOUND"
    level = max(v for v, _ in pairs)
    return Verdict(s.name, s.unit, len(pairs), level, None, None, bound, verdict)


def check(
    windows: Sequence[dict[str, Any]],
    series: Sequence[Series],
    warmup_s: float,
    retention_s: float | None = None,
    partitions_per_request: int = 1,
) -> list[Verdict]:
    """A verdict per series over ``windows`` after ``warmup_s``; ``retention_s`` (history's
    retention) and ``partitions_per_request`` explain the ``retention`` series."""
    after = [w for w in windows if w["t_s"] >= warmup_s]
    verdicts = []
    for s in series:
        if s.explained_by == "bound":
            verdicts.append(check_bound(windows, s))
            continue
        points = []
        for w in after:
            value = s.pick(w)
            if value is not None and s.settled(w):
                points.append((w["t_s"], float(value)))
        level = statistics.median(v for _, v in points) if points else None
        if s.explained_by.startswith("exempt"):
            verdicts.append(
                Verdict(s.name, s.unit, len(points), level, None, None, None, s.explained_by)
            )
            continue
        if len(points) < 3:
            verdicts.append(
                Verdict(s.name, s.unit, len(points), level, None, None, None, "too few")
            )
            continue
        slope, _ = fit(points)
        first, last = points[0][0], points[-1][0]
        growth = slope * (last - first)
        assert level is not None
        if s.explained_by == "keys":
            explained = abs(level) * keys_growth(after, first, last)
        elif s.explained_by == "retention" and retention_s is not None:
            # The whole run: the period before the first settled sample counts too.
            explained = retention_growth(windows, first, last, retention_s, partitions_per_request)
        else:
            explained = 0.0
        relative, absolute = TOLERANCES[s.unit]
        allowed = explained + max(absolute, relative * abs(level))
        verdicts.append(
            Verdict(
                s.name,
                s.unit,
                len(points),
                level,
                growth,
                explained,
                allowed,
                "flat" if growth <= allowed else "GROWS",
                slope * THIRTY_DAYS_S,
            )
        )
    return verdicts


def judge(results: dict[str, Any]) -> None:
    """Set ``results``' "growth" verdicts, "problems" and "passed" from what the run recorded
    (windows, settings, the end's verification, the faults), with the rule above."""
    settings = results["settings"]
    retention_ms = settings.get("history_retention_ms")
    windows = results["windows"]
    duration_s = settings["minutes"] * 60
    verdicts = check(
        windows,
        default_series(windows, retention_ms is not None),
        settings["warmup_fraction"] * duration_s,
        retention_s=None if retention_ms is None else retention_ms / 1000,
        partitions_per_request=settings["partitions_per_request"],
    )
    results["growth"] = [asdict(v) for v in verdicts]
    problems = list(results["verification"]["problems"])
    problems += [
        f"{v.name} keeps growing: {v.growth:,.1f} {v.unit} after warm-up (allowed {v.allowed:,.1f})"
        for v in verdicts
        if v.verdict == "GROWS"
    ]
    problems += [
        f"{v.name}: {v.level:,.0f} {v.unit} in a window whose bound for the run's age is "
        f"{v.allowed:,.0f}"
        for v in verdicts
        if v.verdict == "ABOVE BOUND"
    ]
    problems += [
        f"fault {f['kind']} #{f['number']}: {f['error']}" for f in results["faults"] if f["error"]
    ]
    results["problems"] = problems
    results["passed"] = not problems


def _path(*keys: str) -> Callable[[dict[str, Any]], float | None]:
    def pick(window: dict[str, Any]) -> float | None:
        value: Any = window
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return None if value is None else float(value)

    return pick


def _settled(role: str) -> Callable[[dict[str, Any]], bool]:
    def settled(w: dict[str, Any]) -> bool:
        return bool(w.get("settled", {}).get(role, False))

    if role == "driver_workers":
        # Spark ends Python workers idle for a minute: a window without a batch (Kafka away)
        # samples their daemon alone, not the workers' memory.
        return lambda w: settled(w) and bool(w.get("batches", {}).get("count"))
    return settled


def table_role(name: str) -> tuple[str, str]:
    """("job" | "mirror", table name without prefix)."""
    if name.startswith("mirror_"):
        return "mirror", name.removeprefix("mirror_")
    return "job", name.removeprefix("soak_")


def default_series(windows: Sequence[dict[str, Any]], history_retention: bool) -> list[Series]:
    """Every series the soak checks, from what the windows hold."""
    roles = sorted({role for w in windows for role in w.get("pss_mb", {})})
    keyed_roles = {"driver_jvm", "driver_workers", "serve"}
    out = [
        Series(
            f"PSS {role}",
            "MB",
            "keys" if role in keyed_roles else "none",
            _path("pss_mb", role),
            _settled(role),
        )
        for role in roles
    ]
    out += [
        Series(
            f"shared memory {role}",
            "MB",
            "exempt: shared buffers, filled up to their configured size as the data grows",
            _path("shmem_mb", role),
        )
        for role in sorted({role for w in windows for role in w.get("shmem_mb", {})})
    ]
    thinned = "exempt: history kept 7 days, thinned (bounded per group-partition, checked below)"
    out += [
        Series("checkpoint job", "disk MB", "keys", _path("checkpoint_mb", "job")),
        Series("checkpoint mirror", "disk MB", "none", _path("checkpoint_mb", "mirror")),
        Series("written driver", "MB/window", "keys", _path("written_mb", "driver")),
        Series("written mirror", "MB/window", "none", _path("written_mb", "mirror")),
        Series("batch p50", "s", "keys", _path("batches", "p50_s")),
        Series(
            "sink size",
            "disk MB",
            "keys" if history_retention else thinned,
            _path("sink", "mb"),
        ),
        Series(
            "kafka data",
            "disk MB",
            "exempt: Kafka's own topics, time-based retention",
            _path("kafka_mb"),
        ),
    ]
    tables = sorted({t for w in windows for t in w.get("sink", {}).get("rows", {})})
    for table in tables:
        owner, base = table_role(table)
        if base == "offset_commit_history" and not history_retention:
            explained = thinned
        elif owner == "job" and base == "offset_commit_history":
            explained = "retention"
        elif owner == "job" and base == "consumer_offsets":
            explained = "keys"
        else:
            explained = "none"
        out.append(Series(f"rows {table}", "rows", explained, _path("sink", "rows", table)))
    owners = sorted({owner for w in windows for owner in w.get("history", {})})
    out += [
        Series(
            f"history rows per group-partition, {owner} (max)",
            "rows",
            "bound",
            _path("history", owner, "max_rows"),
            bound=_path("history", owner, "bound"),
        )
        for owner in owners
    ]
    return out
