"""Python 3.11 fix-up for Spark's Python workers: lazy ``zipimporter.invalidate_caches``.

Spark's worker calls ``importlib.invalidate_caches()`` at the start of every task
(``pyspark.worker_util.setup_spark_files``), and Spark puts ``pyspark.zip`` (thousands of
entries) and py4j's zip on the worker's ``sys.path``. On Python 3.10 and 3.11 each zipimporter
re-reads its whole archive directory on invalidation (CPython gh-103200, made lazy in 3.12):
measured with py-spy, over half of a worker's time, ~0.2 s per task. A micro-batch runs one task
per state partition, so this was most of the fixed cost of a small batch.

:func:`install` makes invalidation re-read an archive only when its size or modification time
changed since it was last read — what "invalidate" has to mean for an unchanged file. It is
called when the state function's module is imported, which happens inside each (reused) worker
process on its first task.
"""

from __future__ import annotations

import os
import sys
import zipimport
from typing import Any

_MARK = "_consumer_offsets_lazy"


def install() -> bool:
    """Patch ``zipimporter.invalidate_caches`` (Python < 3.12 only); True if it is in place."""
    if sys.version_info >= (3, 12):
        return False
    original = zipimport.zipimporter.invalidate_caches
    if getattr(original, _MARK, False):
        return True
    stamps: dict[str, tuple[int, int] | None] = {}

    def invalidate_caches(self: zipimport.zipimporter) -> None:
        try:
            stat = os.stat(self.archive)
            stamp: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = None
        if stamp is not None and stamps.get(self.archive) == stamp:
            return
        original(self)
        stamps[self.archive] = stamp

    setattr(invalidate_caches, _MARK, True)
    patched: Any = invalidate_caches
    zipimport.zipimporter.invalidate_caches = patched  # type: ignore[method-assign]
    return True
