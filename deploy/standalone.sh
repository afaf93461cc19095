#!/usr/bin/env bash
# A Spark standalone cluster on this machine: one master and one worker, each in its own JVM,
# from the pyspark installation (no separate Spark download).
#
#   bash deploy/standalone.sh start   # master at spark://127.0.0.1:7077, UI on :8080
#   bash deploy/standalone.sh stop
set -euo pipefail
cd "$(dirname "$0")/.."

python=".venv/bin/python"
spark_home="$("$python" -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')"
dir=".runtime/standalone"
master_port="${SPARK_MASTER_PORT:-7077}"
master_url="spark://127.0.0.1:${master_port}"
mkdir -p "$dir"

start_daemon() {  # name, class, args...
  local name="$1"; shift
  if [[ -f "$dir/$name.pid" ]] && kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null; then
    echo "$name already running (pid $(cat "$dir/$name.pid"))"
    return
  fi
  SPARK_HOME="$spark_home" SPARK_LOCAL_IP=127.0.0.1 \
    nohup "$spark_home/bin/spark-class" "$@" >"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
  echo "started $name (pid $!), log $dir/$name.log"
}

wait_for_log() {  # file, pattern
  for _ in $(seq 1 120); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.5
  done
  echo "timed out waiting for '$2' in $1" >&2
  tail -n 30 "$1" >&2
  return 1
}

case "${1:-}" in
  start)
    start_daemon master org.apache.spark.deploy.master.Master \
      --host 127.0.0.1 --port "$master_port" --webui-port "${SPARK_MASTER_WEBUI_PORT:-8080}"
    wait_for_log "$dir/master.log" "I have been elected leader"
    start_daemon worker org.apache.spark.deploy.worker.Worker \
      --host 127.0.0.1 --cores "${SPARK_WORKER_CORES:-2}" --memory "${SPARK_WORKER_MEMORY:-4g}" \
      --work-dir "$PWD/$dir/work" "$master_url"
    wait_for_log "$dir/worker.log" "Successfully registered with master"
    echo "$master_url"
    ;;
  stop)
    for name in worker master; do
      if [[ -f "$dir/$name.pid" ]]; then
        kill "$(cat "$dir/$name.pid")" 2>/dev/null || true
        rm -f "$dir/$name.pid"
        echo "stopped $name"
      fi
    done
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
