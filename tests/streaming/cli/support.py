"""Running the ``consumer-offsets`` CLI in-process, with its exit status and both streams."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

from streaming.cli.main import main


@dataclass
class Run:
    """One command's exit status, stdout and stderr."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run(*argv: str) -> Run:
    """``consumer-offsets *argv``, in this process."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return Run(code, out.getvalue(), err.getvalue())
