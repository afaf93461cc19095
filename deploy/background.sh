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

# wait_for_service PROBE...: up to $SERVICE_START_TIMEOUT_S (180) s until PROBE succeeds, saying
# every $SERVICE_PROGRESS_S (15) s how long it has waited. If the service exits meanwhile, or the time runs out, print
# the end of its log and fail (exit 1): a service that never came up must not show up later as
# timeouts of the commands after it.
wait_for_service() {
  local timeout=${SERVICE_START_TIMEOUT_S:-180}
  local every=${SERVICE_PROGRESS_S:-15}
  local started=$SECONDS waited=0 next_note=$every
  while ((waited < timeout)); do
    if "$@"; then
      return 0
    fi
    if ! kill -0 "$service_pid" 2>/dev/null; then
      service_failed "exited before it was ready"
    fi
    sleep 1
    waited=$((SECONDS - started))
    if ((waited >= next_note)); then
      echo "    ... waiting for the $service_name: $waited s (its log: $service_log)"
      next_note=$((next_note + every))
    fi
  done
  service_failed "was not ready after ${timeout} s ($*)"
}

# service_failed REASON: say why, show the end of the service's log, exit 1.
service_failed() {
  echo "error: the $service_name $1; the end of its log ($service_log):" >&2
  tail -n 40 "$service_log" >&2
  exit 1
}
