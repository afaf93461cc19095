"""``python -m tests.soak``: the job, the mirror and ``serve`` under steady load for minutes or
hours, with faults on a schedule; figures per window and per fault; exit 1 when anything is lost
or a resource keeps growing after warm-up (``tests/soak/growth.py``), 0 otherwise.

See ``tests/soak/__init__.py`` for what runs and tests/soak/README.md for a run's tables.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from connectors.kafka.local import LocalKafkaCluster
from connectors.runtime import runtime_dir
from state.commit_history import DEFAULT_HISTORY_RETENTION_MS
from tests.reliability.load import DriverProcess
from tests.soak.faults import KINDS, FaultRunner, plan, record_dict
from tests.soak.growth import judge
from tests.soak.load import NATIVE_COMMIT_INTERVAL_S, LoadHandle, LoadSettings
from tests.soak.report import render
from tests.soak.sampling import HistoryLoad, Sampler
from tests.soak.services import (
    STANDBY,
    Services,
    wait_for_first_batch,
)
from tests.soak.verify import verify


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    add = parser.add_argument
    add("--minutes", type=float, default=60.0, help="length of the loaded run (default 60)")
    add("--rate", type=float, default=50.0, help="raw OffsetCommit requests/s (default 50)")
    add("--partitions-per-request", type=int, default=10, help="partitions each commits (10)")
    add("--groups", type=int, default=1000, help="groups of the raw requests (1000)")
    add("--topics", type=int, default=4, help="topics per group, one per request in turn (4)")
    add("--client-rate", type=float, default=2.0, help="commit-client calls/s (2; 0: none)")
    add("--client-groups", type=int, default=20, help="groups of the commit client (20)")
    add("--native-groups", type=int, default=3, help="Kafka consumer groups, for the mirror")
    add("--native-consumers", type=int, default=2, help="consumers per Kafka group (2)")
    add("--data-rate", type=float, default=20.0, help="messages/s to their data topic (20)")
    add("--shards", type=int, default=10, help="the job's partitions (coordinator shards)")
    add("--window-seconds", type=float, default=60.0, help="sampling window (60)")
    add(
        "--faults",
        default="all",
        help=f"'all', 'none' or a comma list of {','.join(KINDS)} "
        "('postgres' only with --sink postgres)",
    )
    add("--fault-rounds", type=int, default=2, help="times each fault happens (2)")
    add("--broker-outage-s", type=float, default=20.0)
    add("--postgres-outage-s", type=float, default=15.0)
    add(
        "--kafka-outage-s",
        type=float,
        default=600.0,
        help="how long the 'kafka' fault keeps every broker stopped (600 s)",
    )
    add("--sink", choices=("sqlite", "postgres"), default="postgres")
    add(
        "--standby",
        action="store_true",
        help="a warm standby driver (run --standby) beside the job's: a driver fault kills the "
        "active, the standby takes over, the killed one comes back as the standby",
    )
    add(
        "--history-retention-ms",
        type=int,
        help="history retention of the job and the mirror (default: theirs, 7 days, thinned)",
    )
    add(
        "--request-timeout-ms",
        type=int,
        default=60_000,
        help="the job's deadline for requests (its default, 60 s: a request reached later, "
        "e.g. behind a restart, is answered REQUEST_TIMED_OUT and applies nothing)",
    )
    add("--warmup-fraction", type=float, default=0.2)
    add("--settle-s", type=float, default=120.0, help="a restarted process's warm-up for PSS")
    add("--json", type=Path, help="write the results here (also after every window)")
    add("--markdown", type=Path, help="write the report's tables here")
    add("--runtime-dir", type=Path, help="default: .runtime/soak")
    return parser.parse_args(argv)


def fault_kinds(spec: str, sink: str) -> list[str]:
    if spec == "none":
        return []
    kinds = list(KINDS) if spec == "all" else [k.strip() for k in spec.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise SystemExit(f"--faults: unknown kind(s) {unknown}; known: {', '.join(KINDS)}")
    if sink != "postgres" and "postgres" in kinds:
        if spec != "all":
            raise SystemExit("--faults postgres needs --sink postgres")
        kinds.remove("postgres")
    return kinds


def history_commit_rates(args: argparse.Namespace) -> dict[str, float]:
    """Commits per second of the job's and the mirror's most often committed group-partition:
    a raw request commits one (group, topic) in turn, a client call one of its groups, and each
    of Kafka's consumers commits its partitions every ``NATIVE_COMMIT_INTERVAL_S``."""
    raw = args.rate / max(1, args.groups * args.topics)
    client = args.client_rate / max(1, args.client_groups)
    return {"job": max(raw, client), "mirror": 1 / NATIVE_COMMIT_INTERVAL_S}


class Supervisor:
    """Restarts the driver, the mirror or serve when one exits on its own (not by a fault)."""

    def __init__(self, services: Services, lock: threading.Lock, started_wall: float) -> None:
        self.services = services
        self.lock = lock
        self.started_wall = started_wall
        self.unplanned: list[dict[str, Any]] = []

    def check(self) -> None:
        if not self.lock.acquire(blocking=False):
            return  # a fault is acting
        try:
            for role, service in (
                ("driver", self.services.job),
                ("standby", self.services.standby),
                ("mirror", self.services.mirror),
                ("serve", self.services.serve),
            ):
                if service is not None and not service.running:
                    code = service.process.returncode if service.process else None
                    self.unplanned.append(
                        {
                            "role": role,
                            "at_s": time.time() - self.started_wall,
                            "exit_code": code,
                            "log_tail": service.log_tail(25),
                        }
                    )
                    print(f"unplanned exit of {role} ({code}); restarting", flush=True)
                    self._restart(role, service)
        finally:
            self.lock.release()

    def _restart(self, role: str, service: DriverProcess) -> None:
        """Start ``service`` again: a standby as a standby; an active that has one is replaced
        by it (it takes the lease) and comes back as the standby."""
        if role == "standby":
            service.start(STANDBY)
        elif role == "driver" and self.services.standby is not None:
            self.services.take_over()
        else:
            service.start()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    kinds = fault_kinds(args.faults, args.sink)
    runtime = (args.runtime_dir or runtime_dir() / "soak").resolve()
    # A fresh run: whatever an earlier run left (its cluster included) goes first.
    LocalKafkaCluster(runtime / "kafka").stop()
    shutil.rmtree(runtime, ignore_errors=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    services = Services(
        runtime,
        args.sink,
        args.shards,
        args.history_retention_ms,
        args.request_timeout_ms,
        with_standby=args.standby,
    )
    load: LoadHandle | None = None
    duration_s = args.minutes * 60
    results: dict[str, Any] = {
        "settings": {
            "minutes": args.minutes,
            "requests_per_s": args.rate,
            "partitions_per_request": args.partitions_per_request,
            "groups": args.groups,
            "topics": args.topics,
            "client_rate": args.client_rate,
            "client_groups": args.client_groups,
            "native_groups": args.native_groups,
            "shards": args.shards,
            "window_s": args.window_seconds,
            "faults": kinds,
            "fault_rounds": args.fault_rounds,
            "kafka_outage_s": args.kafka_outage_s if "kafka" in kinds else None,
            "sink": args.sink,
            "history_retention_ms": args.history_retention_ms,
            "request_timeout_ms": args.request_timeout_ms,
            "warmup_fraction": args.warmup_fraction,
            "settle_s": args.settle_s,
        },
        "windows": [],
        "faults": [],
        "unplanned": [],
    }

    def save() -> None:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")

    try:
        services.start()
        print(f"cluster {services.bootstrap}; sink {services.config.sink_url}; runtime {runtime}")
        settings = LoadSettings(
            bootstrap=services.bootstrap,
            ingest_topic=services.config.ingest_topic,
            responses_topic=services.config.responses_topic,
            ingest_partitions=services.config.ingest_topic_partitions,
            requests_per_s=args.rate,
            partitions_per_request=args.partitions_per_request,
            groups=args.groups,
            topics=args.topics,
            client_rate=args.client_rate,
            client_groups=args.client_groups,
            client_timeout_s=300.0,
            # The raw requests wait in the producer's queue through a whole Kafka outage (and
            # are answered REQUEST_TIMED_OUT once they arrive): none is given up half-sent.
            delivery_timeout_s=600.0 + (args.kafka_outage_s if "kafka" in kinds else 0.0),
            native_groups=args.native_groups,
            native_consumers_per_group=args.native_consumers,
            data_topic="soak-data",
            data_rate=args.data_rate,
            tag=f"soak-{uuid.uuid4().hex[:8]}",
        )
        load = LoadHandle(settings)
        history = HistoryLoad(
            time.time(),
            args.history_retention_ms or DEFAULT_HISTORY_RETENTION_MS,
            history_commit_rates(args),
        )
        load.start()
        first = wait_for_first_batch(services)
        print(f"load started; the job's first batch after {first:.1f} s", flush=True)

        started_wall = time.time()
        lock = threading.Lock()
        planned = plan(
            duration_s,
            kinds,
            args.fault_rounds,
            {
                "broker": args.broker_outage_s,
                "postgres": args.postgres_outage_s,
                "kafka": args.kafka_outage_s,
            },
        )
        faults = FaultRunner(
            services,
            load,
            planned,
            started_wall,
            lock,
            args.broker_outage_s,
            args.postgres_outage_s,
            args.kafka_outage_s,
            echo=lambda line: print(line, flush=True),
        )
        faults.start()
        supervisor = Supervisor(services, lock, started_wall)
        sampler = Sampler(services, load.pid, args.settle_s, history)
        sampler.written_mb()  # the baseline of bytes written
        windows = max(1, math.ceil(duration_s / args.window_seconds))
        for index in range(1, windows + 1):
            window_start = started_wall + (index - 1) * args.window_seconds
            window_end = started_wall + min(index * args.window_seconds, duration_s)
            while time.time() < window_end:
                time.sleep(min(2.0, max(0.0, window_end - time.time())))
                supervisor.check()
            sample = sampler.sample(window_start)
            window = {
                "index": index,
                "t_s": time.time() - started_wall,
                "faults": [
                    f"{r.kind} #{r.number}"
                    for r in faults.records
                    if window_start - started_wall <= r.at_s < window_end - started_wall
                ],
                "load": load.window(),
                **sample,
            }
            results["windows"].append(window)
            results["unplanned"] = supervisor.unplanned
            save()
            print(progress_line(window), flush=True)
        faults.stop()
        final = load.stop()
        faults.resolve(final["window"]["marks"])
        results["faults"] = [record_dict(r) for r in faults.records]
        model = final.pop("model")
        results["load_final"] = {k: v for k, v in final.items() if k != "window"}
        verification = verify(services, {**final, "model": model}, args.native_groups)
        results["verification"] = verification
        judge(results)
        save()
        text = render(results)
        print(text)
        if args.markdown:
            args.markdown.write_text(text + "\n")
        return 0 if results["passed"] else 1
    finally:
        if load is not None:
            load.kill()
        services.close()


def progress_line(window: dict[str, Any]) -> str:
    load = window["load"]
    ack = load["ack_s"]
    pss = window["pss_mb"]
    sink = window["sink"]
    return (
        f"[{window['t_s'] / 60:5.1f} min] sent {load['sent']}, answered {load['answered']} "
        f"({load['timed_out']} timed out), "
        f"ack p50/p99/max {ack['p50'] or 0:.2f}/{ack['p99'] or 0:.2f}/{ack['max'] or 0:.2f} s, "
        f"batches {window['batches']['count']}, keys {window['state_keys']}, "
        f"JVM {pss.get('driver_jvm') or 0:.0f} MB, "
        f"workers {pss.get('driver_workers') or 0:.0f} MB, "
        f"ckpt {window['checkpoint_mb']['job']:.1f} MB, sink {sink.get('mb') or 0:.1f} MB"
        f"{' ' + ', '.join(window['faults']) if window['faults'] else ''}"
    )


if __name__ == "__main__":
    sys.exit(main())
