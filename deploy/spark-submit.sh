#!/usr/bin/env bash
# Submit the offset manager's streaming job with spark-submit.
#
#   bash deploy/spark-submit.sh --master spark://127.0.0.1:7077 [job flags...]
#
# The connector jars come from .runtime/jars/spark (resolved by deploy/setup.sh, never by Ivy);
# the project's packages travel to executors as a zip (--py-files), so executors on other hosts
# need only the same Python dependencies. Job flags are those of `consumer-offsets run`.
set -euo pipefail
cd "$(dirname "$0")/.."

master="local[*]"
if [[ "${1:-}" == "--master" ]]; then
  master="$2"
  shift 2
fi

python=".venv/bin/python"
spark_home="$("$python" -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')"
jars="$(ls .runtime/jars/spark/*.jar | paste -sd, -)"

mkdir -p .runtime/submit
rm -f .runtime/submit/consumer_offsets.zip
# Each module goes in as its source and its bytecode (name.pyc beside name.py, unchecked hash):
# a Python worker cannot cache what it compiles from a zip, so with sources alone every worker
# compiled what it imports at its start. An executor on another Python (another magic number)
# skips the bytecode and compiles the source.
"$python" - <<'PY'
import pathlib, py_compile, tempfile, zipfile
mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(
    ".runtime/submit/consumer_offsets.zip", "w", zipfile.ZIP_DEFLATED
) as z:
    for package in ("state", "streaming", "connectors"):
        for path in sorted(pathlib.Path(package).rglob("*.py")):
            z.write(path)
            pyc = py_compile.compile(
                str(path), f"{tmp}/m.pyc", str(path), doraise=True, invalidation_mode=mode
            )
            z.write(pyc, str(path.with_suffix(".pyc")))
PY

# Driver and Python workers run the project's interpreter (it has pyarrow and pandas).
export PYSPARK_PYTHON="$PWD/$python"
export PYSPARK_DRIVER_PYTHON="$PWD/$python"
# streaming.spark.session reads the master from here, so the session matches what was submitted.
export SPARK_MASTER="$master"

exec "$spark_home/bin/spark-submit" \
  --master "$master" \
  --name consumer-offsets \
  --jars "$jars" \
  --py-files .runtime/submit/consumer_offsets.zip \
  --conf spark.sql.streaming.stateStore.providerClass=org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider \
  deploy/submit_main.py "$@"
