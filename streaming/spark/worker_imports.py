"""Python 3.11 fix-up for Spark's Python workers: lazy ``zipimporter.invalidate_caches``.

Spark's worker invalidates import caches at every task, and on Python < 3.12 each zipimporter
(``pyspark.zip``, py4j's) then re-reads its whole directory (CPython gh-103200): ~0.2 s a task.
:func:`install` re-reads an archive only when its size or modification time changed.
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
