"""Spark's Python workers import the installed, compiled pyspark: not the source zips that Spark
puts first on their path (``deploy/setup.sh`` removes them), which every worker and every query
start's schema process compiled again (real Spark)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def _where_imported(_: Iterator[int]) -> Iterator[tuple[str, str]]:
    import py4j
    import pyspark

    yield pyspark.__file__ or "", py4j.__file__ or ""


def test_python_workers_import_pyspark_and_py4j_from_site_packages(spark: SparkSession) -> None:
    files = spark.sparkContext.parallelize([0], 1).mapPartitions(_where_imported).collect()
    assert files, "the worker answered nothing"
    for path in files[0]:
        assert "site-packages" in path and ".zip" not in path, (
            f"a Python worker imported {path}: run deploy/setup.sh, which removes pyspark's "
            "source zips so that workers import the compiled package"
        )
