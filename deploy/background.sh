# Sourced by the demo scripts: one service in the background for the script's lifetime, and a
# wait for it to get somewhere.

# start_service NAME LOG COMMAND...: run COMMAND in the background, its output in LOG; it gets
# SIGTERM when the script exits.
start_service() {
  service_name=$1
  service_log=$2
  shift 2
  "$@" >"$service_log" 2>&1 &
  service_pid=$!
  trap stop_service EXIT
}

stop_service() {
  if kill -0 "$service_pid" 2>/dev/null; then
    kill -TERM "$service_pid"
    wait "$service_pid" || true
  fi
}

# wait_for_service PROBE...: up to 120 s until PROBE succeeds; if the service exits meanwhile,
# print the end of its log and fail.
wait_for_service() {
  for _ in $(seq 1 120); do
    if "$@"; then
      return 0
    fi
    if ! kill -0 "$service_pid" 2>/dev/null; then
      echo "the $service_name exited; its log:" >&2
      tail -n 40 "$service_log" >&2
      exit 1
    fi
    sleep 1
  done
}
