"""The soak's pure parts: the resource-growth rule and the fault schedule."""

from __future__ import annotations

from typing import Any

from tests.soak.faults import plan
from tests.soak.growth import Series, check, default_series, judge
from tests.soak.sampling import history_bound


def windows(
    values: list[float], keys: list[float] | None = None, settled: list[bool] | None = None
) -> list[dict[str, Any]]:
    return [
        {
            "t_s": 60.0 * (i + 1),
            "state_keys": (keys or [10_000.0] * len(values))[i],
            "pss_mb": {"driver_jvm": v},
            "settled": {"driver_jvm": (settled or [True] * len(values))[i]},
        }
        for i, v in enumerate(values)
    ]


def jvm_verdict(ws: list[dict[str, Any]], explained_by: str = "keys") -> str:
    series = Series(
        "PSS driver_jvm",
        "MB",
        explained_by,
        lambda w: w["pss_mb"]["driver_jvm"],
        lambda w: w["settled"]["driver_jvm"],
    )
    (verdict,) = check(ws, [series], warmup_s=120.0)
    return verdict.verdict


def test_flat_memory_with_noise_is_flat() -> None:
    assert jvm_verdict(windows([1000, 1010, 995, 1005, 1002, 998, 1008, 1001, 999, 1004])) == "flat"


def test_memory_that_keeps_growing_is_caught() -> None:
    # +20 MB a minute: 160 MB over the checked span, against 10% of ~1,100 MB allowed.
    assert jvm_verdict(windows([1000 + 20 * i for i in range(10)])) == "GROWS"


def test_a_series_trend_is_carried_over_30_days() -> None:
    # +1 MB a minute (one window), after the warm-up: 43,200 MB in 30 days.
    series = Series("PSS driver_jvm", "MB", "none", lambda w: w["pss_mb"]["driver_jvm"])
    (verdict,) = check(windows([1000.0 + i for i in range(10)]), [series], warmup_s=120.0)
    assert verdict.per_30_days == 30 * 24 * 60


def test_growth_the_keys_explain_is_allowed() -> None:
    keys = [10_000 * (1 + 0.05 * i) for i in range(10)]
    values = [1000 * (1 + 0.05 * i) for i in range(10)]
    assert jvm_verdict(windows(values, keys)) == "flat"
    assert jvm_verdict(windows(values, keys), explained_by="none") == "GROWS"


def test_a_restarted_process_is_measured_once_settled() -> None:
    # A kill at minute 5: the fresh JVM climbs back to its plateau (not settled yet).
    values = [1000, 1000, 1000, 1000, 200, 600, 1000, 1000, 1000, 1000]
    settled = [True, True, True, True, False, False, True, True, True, True]
    assert jvm_verdict(windows(values, settled=settled)) == "flat"
    assert jvm_verdict(windows([200, 600, 1000], settled=[False, False, True])) == "too few"


def test_python_workers_ended_while_no_batch_ran_are_no_sample() -> None:
    # A 16-minute run's samples, two Kafka outages and two takeovers: no batch while Kafka was
    # away, and Spark ended its idle workers (their daemon's 24 MB stayed).
    values = [205.0, 208, 211, 24, 24, 207, 230, 237, 240, 240, 24, 213, 212, 231, 239, 242]
    settled = [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1]
    ws = [
        {
            "t_s": 60.0 * (i + 1),
            "state_keys": 40_060.0,
            "pss_mb": {"driver_workers": v},
            "settled": {"driver_workers": bool(settled[i])},
            "batches": {"count": 0 if v < 100 else 150},
        }
        for i, v in enumerate(values)
    ]
    (verdict,) = (v for v in check(ws, default_series(ws, False), 192.0) if "workers" in v.name)
    assert (verdict.verdict, verdict.samples) == ("flat", 5)


def test_history_without_retention_is_exempt_and_with_retention_checked() -> None:
    ws = [
        {"t_s": 60.0 * i, "sink": {"mb": 10.0 * i, "rows": {"offset_commit_history": 1000 * i}}}
        for i in range(1, 11)
    ]
    kept = {v.name: v.verdict for v in check(ws, default_series(ws, False), 120.0)}
    assert kept["rows offset_commit_history"].startswith("exempt")
    assert kept["sink size"].startswith("exempt")
    bounded = {v.name: v.verdict for v in check(ws, default_series(ws, True), 120.0)}
    assert bounded["rows offset_commit_history"] == "GROWS"


def test_the_schedule_has_each_fault_the_asked_number_of_times_inside_the_run() -> None:
    planned = plan(3600.0, ["driver", "broker", "postgres", "mirror"], rounds=2)
    assert [p.kind for p in planned].count("broker") == 2
    assert len(planned) == 8
    assert all(360 <= p.at_s <= 3240 for p in planned)
    assert [p.at_s for p in planned] == sorted(p.at_s for p in planned)
    assert plan(3600.0, [], rounds=2) == []


def test_history_under_retention_may_follow_the_commit_rate_but_not_outgrow_it() -> None:
    # 60 s windows, 3 min retention, 10 partitions per request; the rate doubles at minute 5,
    # so the retained commits (and the history rows that hold them) rise for 3 minutes.
    rates = [100] * 5 + [200] * 7
    ws: list[dict[str, Any]] = []
    for i, rate in enumerate(rates, start=1):
        window = {"t_s": 60.0 * i, "load": {"answered": rate, "timed_out": 0, "error_answers": 0}}
        ws.append(window)
    for i, w in enumerate(ws):
        kept = sum(10 * v["load"]["answered"] for v in ws[max(0, i - 2) : i + 1])
        w["sink"] = {"rows": {"soak_offset_commit_history": kept}}
    (series,) = [s for s in default_series(ws, True) if "history" in s.name]
    (verdict,) = check(ws, [series], 120.0, retention_s=180.0, partitions_per_request=10)
    assert verdict.verdict == "flat" and verdict.explained is not None and verdict.explained > 0
    # The same rows without the rate that explains them: growth.
    (unexplained,) = check(ws, [series], 120.0)
    assert unexplained.verdict == "GROWS"
    # Rows beyond what the period holds (a delete that stopped working): growth.
    for i, w in enumerate(ws):
        w["sink"]["rows"]["soak_offset_commit_history"] += 3_000 * i
    (leaking,) = check(ws, [series], 120.0, retention_s=180.0, partitions_per_request=10)
    assert leaking.verdict == "GROWS"


def test_history_rows_per_group_partition_above_the_bound_fail_the_run() -> None:
    # The job's history at its defaults: its table may grow (towards days of thinned commits),
    # but no group-partition may hold more rows than the window's bound for the run's age.
    ws = [
        {
            "t_s": 60.0 * i,
            "sink": {"rows": {"soak_offset_commit_history": 40_000 * i}},
            "history": {"job": {"max_rows": 60 * i, "mean_rows": 50.0 * i, "bound": 60 * i + 300}},
        }
        for i in range(1, 21)
    ]
    results: dict[str, Any] = {
        "settings": {
            "history_retention_ms": None,
            "minutes": 20,
            "warmup_fraction": 0.2,
            "partitions_per_request": 10,
        },
        "windows": ws,
        "verification": {"problems": []},
        "faults": [],
    }
    judge(results)
    verdicts = {v["name"]: v["verdict"] for v in results["growth"]}
    assert verdicts["rows soak_offset_commit_history"].startswith("exempt")
    assert verdicts["history rows per group-partition, job (max)"] == "within bound"
    assert results["passed"]
    # Thinning stopped at minute 11: every commit stays, past the bound.
    for w in ws:
        w["history"]["job"]["bound"] = min(w["history"]["job"]["bound"], 960)
    judge(results)
    (above,) = [v for v in results["growth"] if v["name"].startswith("history rows")]
    assert above["verdict"] == "ABOVE BOUND"
    assert (above["level"], above["allowed"]) == (1200, 960)
    assert not results["passed"] and "bound for the run's age is 960" in results["problems"][0]


def test_the_window_bound_is_the_thinning_s_for_the_run_s_age_and_the_unthinned_commits() -> None:
    # 30 minutes: 622 rows after a pass; a group-partition committed every 2 s adds 150 more
    # until the passes catch up with them.
    assert history_bound(30 * 60, 0.5, 7 * 24 * 3_600_000) == 622 + 150
    assert history_bound(30 * 60, 0.5, 10 * 60_000) == 602 + 150
    assert history_bound(30 * 60, 0.5, -1) == 622 + 150  # kept forever: thinned all the same
