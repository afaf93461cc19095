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
"$python" - <<'PY'
import zipfile, pathlib
with zipfile.ZipFile(".runtime/submit/consumer_offsets.zip", "w", zipfile.ZIP_DEFLATED) as z:
    for package in ("state", "streaming", "connectors"):
        for path in pathlib.Path(package).rglob("*.py"):
            z.write(path)
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
