"""``python3 runtime_lock.py LOCK PLAN``: the lines of ``LOCK`` (requirements.lock: pins with
hashes) for the packages pip's install plan ``PLAN`` (``pip install --dry-run --report``) would
install, on stdout, for ``pip install --require-hashes``. Standard library only: it runs in the
image's build stage before anything is installed. Exits 1 naming a planned package the lock lacks.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def entries(lock: str) -> Iterator[tuple[str, list[str]]]:
    """Each pinned package of the lock: its name and its requirement and hash lines."""
    name, lines = "", []
    for line in lock.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            if name:
                yield name, lines
            name, lines = normalized(re.split(r"[=<>!~;\[ ]", line, maxsplit=1)[0]), [line]
        elif name and line.lstrip().startswith("--hash"):
            lines.append(line)
    if name:
        yield name, lines


def main(lock_path: str, plan_path: str) -> int:
    with open(plan_path, encoding="utf-8") as plan:
        planned = {normalized(item["metadata"]["name"]) for item in json.load(plan)["install"]}
    with open(lock_path, encoding="utf-8") as lock:
        found = dict(entries(lock.read()))
    missing = sorted(planned - found.keys())
    if missing:
        print(f"runtime_lock: not in {lock_path}: {', '.join(missing)}", file=sys.stderr)
        return 1
    for name in sorted(planned):
        print("\n".join(found[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
