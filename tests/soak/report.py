"""The soak's tables, in Markdown (printed, and pasteable into the README), from the results
JSON; ``python -m tests.soak.report results.json`` prints a saved run again.

Per window: the faults in it, requests sent, ack p50/p99/max (raw requests: produced → answer read;
commit client: the ``commit`` call), micro-batches and their p50/max time, keys in state, PSS in MB
(the job's JVM / driver Python / Python workers summed; the mirror's the same; serve; the load; the
largest broker; PostgreSQL, plus its shared memory), the checkpoint's size and the MB the driver's
processes wrote, the sink's size and rows (job's offsets / history; mirror's offsets / history), the
history's rows per group-partition (max / mean / the bound for the run's age; the job's and the
mirror's), and how long serve's /metrics took. Per fault: when, what, the outage and the recovery
times. Then the growth verdicts and the end checks.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.soak.growth import judge, table_role


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def _triple(d: dict[str, Any] | None, digits: int = 2) -> str:
    if not d or d.get("p50") is None:
        return "-"
    return "/".join(_f(d[k], digits) for k in ("p50", "p99", "max"))


def _rows(window: dict[str, Any], owner: str, base: str) -> int | None:
    for table, n in window.get("sink", {}).get("rows", {}).items():
        if table_role(table) == (owner, base):
            return int(n)
    return None


def _per_group_partition(window: dict[str, Any], owner: str) -> str:
    h = window.get("history", {}).get(owner)
    if not h:
        return "-"
    return f"{_f(h.get('max_rows'))}/{_f(h.get('mean_rows'), 0)}/{_f(h.get('bound'))}"


def window_table(windows: Sequence[dict[str, Any]]) -> str:
    head = (
        "| win | end min | faults | sent/answered/timed out | ack p50/p99/max s "
        "| client p50/p99/max s | batches | batch p50/max s | keys | PSS JVM/driver/workers "
        "| PSS mirror JVM/py/workers "
        "| PSS serve/load | PSS broker max/PG (+ shared) | ckpt MB | written MB | sink MB "
        "| rows offsets/history | mirror rows offsets/history "
        "| history/group-partition max/mean/bound | mirror's | /metrics s |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for w in windows:
        load = w.get("load", {})
        pss = w.get("pss_mb", {})
        batches = w.get("batches", {})
        brokers = [v for k, v in pss.items() if k.startswith("broker")]
        sink = w.get("sink", {})
        serve = w.get("serve", {})
        lines.append(
            "| "
            + " | ".join(
                [
                    str(w["index"]),
                    _f(w["t_s"] / 60),
                    ", ".join(w.get("faults", [])) or "",
                    f"{_f(load.get('sent'))}/{_f(load.get('answered'))}/"
                    f"{_f(load.get('timed_out'))}",
                    _triple(load.get("ack_s")),
                    _triple(load.get("client_s")),
                    _f(batches.get("count")),
                    f"{_f(batches.get('p50_s'), 2)}/{_f(batches.get('max_s'), 2)}",
                    _f(w.get("state_keys")),
                    "/".join(_f(pss.get(f"driver_{p}"), 0) for p in ("jvm", "python", "workers")),
                    "/".join(_f(pss.get(f"mirror_{p}"), 0) for p in ("jvm", "python", "workers")),
                    f"{_f(pss.get('serve'), 0)}/{_f(pss.get('load'), 0)}",
                    f"{_f(max(brokers) if brokers else None, 0)}/{_f(pss.get('postgres'), 0)}"
                    f" (+{_f(w.get('shmem_mb', {}).get('postgres'), 0)})",
                    _f(w.get("checkpoint_mb", {}).get("job")),
                    _f(w.get("written_mb", {}).get("driver")),
                    _f(sink.get("mb")) if "error" not in sink else "down",
                    f"{_f(_rows(w, 'job', 'consumer_offsets'))}/"
                    f"{_f(_rows(w, 'job', 'offset_commit_history'))}",
                    f"{_f(_rows(w, 'mirror', 'consumer_offsets'))}/"
                    f"{_f(_rows(w, 'mirror', 'offset_commit_history'))}",
                    _per_group_partition(w, "job"),
                    _per_group_partition(w, "mirror"),
                    _f(serve.get("seconds"), 2) if serve.get("ok") else "no answer",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def fault_table(faults: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| # | at min | fault | target | outage s | recovery s |",
        "|---|---|---|---|---|---|",
    ]
    for i, f in enumerate(faults, 1):
        recovery = "; ".join(f"{what}: {_f(s)}" for what, s in f["recovery_s"].items())
        if f.get("error"):
            recovery += f" (error: {f['error'].splitlines()[0]})"
        lines.append(
            f"| {i} | {_f(f['at_s'] / 60)} | {f['kind']} #{f['number']} | {f['target']} "
            f"| {_f(f['outage_s'])} | {recovery or '-'} |"
        )
    return "\n".join(lines)


def growth_table(verdicts: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| resource | unit | samples | level | growth after warm-up | explained | allowed "
        "| verdict | at this rate for 30 days |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        lines.append(
            f"| {v['name']} | {v['unit']} | {v['samples']} | {_f(v['level'])} | {_f(v['growth'])} "
            f"| {_f(v['explained'])} | {_f(v['allowed'])} | {v['verdict']} "
            f"| {_f(v.get('per_30_days'))} |"
        )
    return "\n".join(lines)


def render(results: dict[str, Any]) -> str:
    s = results["settings"]
    v = results["verification"]
    final = results["load_final"]
    offsets_per_s = s["requests_per_s"] * s["partitions_per_request"]
    out = [
        f"## Soak: {s['minutes']} min, {s['requests_per_s']:g} requests/s x "
        f"{s['partitions_per_request']} partitions ({offsets_per_s:,.0f} offsets/s), "
        f"{s['groups']:,} groups x {s['topics']} topics, commit client "
        f"{s['client_rate']:g} calls/s, {s['native_groups']} Kafka consumer groups; sink "
        f"{s['sink']}, "
        + (
            "history at the job's defaults (7 days, thinned)"
            if s.get("history_retention_ms") is None
            else f"history retention {s['history_retention_ms']} ms"
        ),
        "",
        window_table(results["windows"]),
        "",
        fault_table(results["faults"]),
        "",
        f"Unplanned exits (restarted by the harness): {len(results['unplanned'])}"
        + "".join(f"\n- {u['role']} at {u['at_s'] / 60:.1f} min" for u in results["unplanned"]),
        "",
        "Growth after warm-up (the first "
        f"{s['warmup_fraction']:.0%}): growth = the fitted slope x the span of settled samples; "
        "allowed = what the keys' growth explains (for history under retention: the growth of "
        "the commits applied within the retention period) + max(absolute, relative x level); "
        "history rows per group-partition: level = the highest max of a window, allowed = that "
        "window's bound for the run's age; see tests/soak/growth.py.",
        "",
        growth_table(results["growth"]),
        "",
        f"End: {final['sent']:,} raw requests sent, {final['answered']:,} answered, "
        f"{final['timed_out']:,} timed out (nothing applied), {final['unanswered']} unanswered, "
        f"{final.get('unplaced', 0)} delivered at a position the producer did not learn, "
        f"{final['error_answer_count']} error answers, "
        f"{final['delivery_failure_count']} not delivered; {final['client_calls']:,} commit-client "
        f"calls, {final['client_timeout_count']} timed out, "
        f"{final.get('client_not_sent_count', 0)} refused unsent (no broker), "
        f"{final['client_failure_count']} failed; "
        f"{v.get('model_keys', 0):,} keys: sink = "
        f"model {v.get('sink_equal')}, offsets topic ({v.get('offsets_topic_records', 0):,} "
        f"records) = model {v.get('offsets_topic_equal')}; mirror = Kafka's OffsetFetch "
        f"{v.get('mirror_equal')} ({v.get('mirror_offsets', 0)} offsets); serve answers "
        f"{v.get('serve_answers')}.",
        "",
        f"Verdict: {'PASS' if results['passed'] else 'FAIL'}"
        + "".join(f"\n- {p}" for p in results["problems"]),
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.soak.report", description="A soak run's tables, from its JSON."
    )
    parser.add_argument("results", type=Path)
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="judge the recorded samples again with the current growth rule (tests/soak/growth.py)",
    )
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.results.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        parser.error(f"cannot read {args.results}: {error}")
    if args.rejudge:
        judge(results)
    print(render(results))
    return 0 if results["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
