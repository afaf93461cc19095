"""The end of a benchmark run: its report, what could not be measured, the machine's load, and
the results as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def print_and_save(results: dict[str, Any], report: str, json_path: Path | None) -> None:
    """Print ``report`` after a blank line, the phases that failed (``results["errors"]``) and
    the load average around the run, then write ``results`` to ``json_path`` when given."""
    print()
    print(report)
    for name, error in results.get("errors", {}).items():
        print(f"not measured: {name}: {error}")
    print(
        f"\n{results['cpus']} CPUs, load average {results['load_average_start'][0]:.1f} at start, "
        f"{results['load_average_end'][0]:.1f} at end (other processes share the machine)."
    )
    if json_path is not None:
        json_path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"results written to {json_path}")
