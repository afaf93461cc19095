"""The lazy zipimporter invalidation keeps imports from a changed zip correct and skips the
re-read of an unchanged one (the cost it exists to remove)."""

from __future__ import annotations

import importlib
import os
import sys
import zipfile
import zipimport
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.spark.worker_imports import install

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 is lazy itself")


@pytest.fixture
def zip_on_path(tmp_path: Path) -> Iterator[Path]:
    archive = tmp_path / "mods.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zmod_one.py", "VALUE = 1\n")
    sys.path.insert(0, str(archive))
    try:
        yield archive
    finally:
        sys.path.remove(str(archive))
        sys.path_importer_cache.pop(str(archive), None)
        for name in ("zmod_one", "zmod_two"):
            sys.modules.pop(name, None)


def test_unchanged_zip_is_not_reread_and_a_changed_one_is(
    zip_on_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert install()
    assert importlib.import_module("zmod_one").VALUE == 1
    reads: list[str] = []
    original = zipimport._read_directory  # type: ignore[attr-defined]

    def counting(archive: str) -> object:
        reads.append(archive)
        return original(archive)

    monkeypatch.setattr(zipimport, "_read_directory", counting)
    importlib.invalidate_caches()  # records the archive's stamp (first sight: one read)
    importlib.invalidate_caches()
    importlib.invalidate_caches()
    assert reads.count(str(zip_on_path)) <= 1

    # A new module in the archive (new size and mtime) is found after invalidation.
    with zipfile.ZipFile(zip_on_path, "a") as zf:
        zf.writestr("zmod_two.py", "VALUE = 2\n")
    stat = zip_on_path.stat()
    os.utime(zip_on_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    importlib.invalidate_caches()
    assert importlib.import_module("zmod_two").VALUE == 2


def test_install_is_idempotent() -> None:
    assert install()
    patched = zipimport.zipimporter.invalidate_caches
    assert install()
    assert zipimport.zipimporter.invalidate_caches is patched
