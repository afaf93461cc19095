"""The image's HEALTHCHECK: exit 0 when the container's command is healthy, else 1 with a line.

``serve``: its ``/metrics`` answers, over HTTP or HTTPS (any HTTP status: a web config may ask
for a password), on its port as its flags, environment or configuration file set it.
``run`` and ``mirror``: the heartbeat they write into their sink says STARTING, LOADING or ACTIVE
(``consumer-offsets status`` exits 0 whatever the status); with ``--standby``, also while the
sink lists this container's process as a standby waiting for the lease (its heartbeat there is
at most 5 s old). The sink is the command's own: its
``--sink-url`` / ``--config`` flags are read from PID 1's command line (tini's), else the
container's environment (the mirror's ``CONSUMER_OFFSETS_MIRROR_SINK_URL`` too). Other commands
end before the first check.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

ALIVE = ("STARTING", "LOADING", "ACTIVE")


def command_line() -> list[str]:
    """PID 1's arguments after ``consumer-offsets`` (tini runs it), or none."""
    args = Path("/proc/1/cmdline").read_bytes().decode().split("\0")
    names = [Path(arg).name for arg in args]
    return args[names.index("consumer-offsets") + 1 :] if "consumer-offsets" in names else []


def flag_values(args: list[str], *flags: str) -> list[str]:
    """``--flag VALUE`` and ``--flag=VALUE`` of ``flags`` in ``args``, as arguments again."""
    kept = []
    for i, arg in enumerate(args):
        name = arg.split("=", 1)[0]
        if name in flags:
            kept += [arg] if "=" in arg else args[i : i + 2]
    return kept


def serve_port(args: list[str]) -> str:
    """serve's port: its ``--port``, else ``CONSUMER_OFFSETS_SERVE_PORT``, else the ``[serve]``
    table's of its configuration file (``--config``, else ``CONSUMER_OFFSETS_SERVE_CONFIG``),
    else 8000."""
    ports = flag_values(args, "--port")
    if ports:
        return ports[-1].split("=")[-1]
    if os.environ.get("CONSUMER_OFFSETS_SERVE_PORT"):
        return os.environ["CONSUMER_OFFSETS_SERVE_PORT"]
    configs = flag_values(args, "--config")
    config = configs[-1].removeprefix("--config=") if configs else None
    config = config or os.environ.get("CONSUMER_OFFSETS_SERVE_CONFIG")
    if config:
        try:
            port = tomllib.loads(Path(config).read_text(encoding="utf-8")).get("serve", {})
        except (OSError, tomllib.TOMLDecodeError):
            port = {}
        if port.get("port"):
            return str(port["port"])
    return "8000"


def serve_answers(args: list[str]) -> str | None:
    """None when serve's ``/metrics`` answers with any HTTP status (a web config may ask for a
    password), over HTTP or, where its web config asks for TLS, HTTPS; else why not. Its
    certificate is not checked: it names the host clients reach, and this asks only whether
    serve answers."""
    port = serve_port(args)
    answers_tls = ssl.create_default_context()
    answers_tls.check_hostname = False
    answers_tls.verify_mode = ssl.CERT_NONE
    problem = None
    for scheme, context in (("http", None), ("https", answers_tls)):
        try:
            urllib.request.urlopen(
                f"{scheme}://127.0.0.1:{port}/metrics", timeout=15, context=context
            ).close()
        except urllib.error.HTTPError:
            return None
        except OSError as error:
            problem = problem or f"serve's /metrics on port {port}: {error}"
            continue
        return None
    return problem


def job_alive(args: list[str]) -> str | None:
    """None when the heartbeat of the job or mirror in its sink says it is alive, else why not."""
    where = flag_values(args, "--sink-url", "--config")
    mirror_sink = os.environ.get("CONSUMER_OFFSETS_MIRROR_SINK_URL")
    if args[:1] == ["mirror"] and mirror_sink and not flag_values(args, "--sink-url"):
        where += ["--sink-url", mirror_sink]
    status = subprocess.run(
        ["consumer-offsets", "status", "--json", *where],
        capture_output=True,
        text=True,
        timeout=15,
    )
    if status.returncode != 0:
        return status.stdout.strip() or status.stderr.strip()
    found = json.loads(status.stdout)
    if found["status"] in ALIVE:
        return None
    if "--standby" in args and standing_by(found.get("leases", [])):
        return None
    return f"status {found['status']}"


def standing_by(leases: list[dict[str, object]]) -> bool:
    """Whether a standby of this host (its holder id ``host:pid/instance``) waits for a lease."""
    mine = socket.gethostname() + ":"
    return any(
        str(standby["holder"]).startswith(mine)
        for lease in leases
        for standby in lease["standbys"]  # type: ignore[attr-defined]
    )


def main() -> int:
    args = command_line()
    problem = serve_answers(args) if args[:1] == ["serve"] else job_alive(args)
    if problem:
        print(problem)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
