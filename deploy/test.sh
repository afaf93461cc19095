#!/usr/bin/env bash
# The test command: install what is missing, lint, check the import layers, run every test.
#
#   bash deploy/test.sh [pytest arguments...]
#
# Every test runs on Python 3.11 (.venv). Without pytest arguments the other supported Pythons
# (OTHER_PYTHONS, default "3.12 3.13"; each in its own .venv-X.Y from the same lock, installed
# beside the main setup) run one end-to-end job test each (Spark's workers and the Kafka clients on
# that Python), the newest also every test that needs neither Spark nor Kafka and is not marked
# slow; all in a lane beside 3.11's Spark tests (each session has its own broker and
# PostgreSQL). A missing interpreter fails the run (deploy/setup.sh says where it looked);
# OTHER_PYTHONS="" leaves them out. The image (deploy/container/) builds in the background; its
# tests (marker container: run it with podman) run in that lane too.
# The whole suite includes the PostgreSQL sink, so setup also installs PostgreSQL's server
# binaries (apt) when they are missing.
# Services start inside the tests: the pytest fixtures start Kafka (tests/fixtures/kafka.py) and
# PostgreSQL (tests/fixtures/postgres.py) themselves, so nothing is started here. Lint failures
# do not hide test results: both run, and the script fails if either failed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

setup_args=(--postgres --test-tools)
pytest_args=()
for arg in "$@"; do
  case "$arg" in
    --postgres) ;;  # always on; accepted for older invocations
    *) pytest_args+=("$arg") ;;
  esac
done

read -r -a other_pythons <<<"${OTHER_PYTHONS-3.12 3.13}"
# The end-to-end test the other Pythons run: commits through the real broker into Spark's shard
# state, with pandas/Arrow Python workers on that Python, out to the offsets topic, the sink and
# the responses topic.
e2e_test=tests/streaming/test_job.py::test_commits_with_rewinds_land_as_latest_in_sink_and_offsets_topic
if [ ${#pytest_args[@]} -gt 0 ]; then
  other_pythons=()
fi

timings=()
# record_timing NAME T0 STATUS: a phase's line in the summary (T0 from date +%s%N).
record_timing() {
  local ms=$((($(date +%s%N) - $2) / 1000000))
  timings+=("$(printf '%-14s %4d.%01d s  exit %d' "$1" $((ms / 1000)) $((ms % 1000 / 100)) "$3")")
}

run_phase() {
  local name="$1"
  shift
  echo "==> test: $name"
  local t0 status=0
  t0=$(date +%s%N)
  "$@" || status=$?
  record_timing "$name" "$t0" "$status"
  return "$status"
}

# run_parallel NAME COMMAND [NAME COMMAND...]: the commands (bash -c) all at once, each one's
# output kept in a file and printed whole when all are done, so logs do not interleave. Sets
# parallel_failed to the names of those that failed.
run_parallel() {
  local -a names=() pids=() logs=() started=()
  while [ $# -gt 0 ]; do
    names+=("$1")
    logs+=("$(mktemp)")
    started+=("$(date +%s%N)")
    bash -c "$2" >"${logs[-1]}" 2>&1 &
    pids+=($!)
    shift 2
  done
  parallel_failed=()
  local i status
  for i in "${!names[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    record_timing "${names[$i]}" "${started[$i]}" "$status"
    echo "==> test: ${names[$i]} (in parallel)"
    cat "${logs[$i]}"
    rm -f "${logs[$i]}"
    [ "$status" -eq 0 ] || parallel_failed+=("${names[$i]}")
  done
}

failed=()
# The other Pythons' virtualenvs install in the background while the main one does (pip is
# mostly waiting on downloads and disk), so a missing interpreter still shows early.
other_setups=""
if [ ${#other_pythons[@]} -gt 0 ]; then
  other_setups=$(mktemp)
  (
    setups=()
    for version in "${other_pythons[@]}"; do
      setups+=("setup-$version" "bash deploy/setup.sh --python $version --venv-only")
    done
    run_parallel "${setups[@]}"
    printf '%s\n' "${timings[@]}" >"$other_setups.timings"
    printf '%s\n' "${parallel_failed[@]}" >"$other_setups.failed"
  ) >"$other_setups" 2>&1 &
  other_setups_pid=$!
fi
run_phase setup bash deploy/setup.sh "${setup_args[@]}"
ready_pythons=()
if [ -n "$other_setups" ]; then
  wait "$other_setups_pid" || true
  cat "$other_setups"
  while read -r line; do [ -n "$line" ] && timings+=("$line"); done <"$other_setups.timings"
  for version in "${other_pythons[@]}"; do
    if grep -qx "setup-$version" "$other_setups.failed"; then
      failed+=("setup-$version")
    else
      ready_pythons+=("$version")
    fi
  done
  rm -f "$other_setups" "$other_setups.timings" "$other_setups.failed"
fi
# The image (deploy/container/) builds from here on in the background at the lowest CPU and I/O
# priority, so the tests keep the machine; its tests need only minutes once it is built.
test_image=localhost/spark-consumer-offsets:test
if [ ${#pytest_args[@]} -eq 0 ]; then
  image_log=$(mktemp)
  (
    status=0
    IMAGE=$test_image nice -n 19 ionice -c 3 bash deploy/container/build.sh || status=$?
    echo "$status" >"$image_log.status"
  ) >"$image_log" 2>&1 &
fi
run_phase ruff-check .venv/bin/ruff check . || failed+=(ruff-check)
run_phase ruff-fmt .venv/bin/ruff format --check . || failed+=(ruff-format)
# The one-way layers and acyclic packages declared in pyproject.toml ([tool.importlinter]).
run_phase imports .venv/bin/lint-imports || failed+=(import-layers)
# pytest's own exit status stands: 5 ("no tests collected") is a failure too, in every phase.
if [ ${#pytest_args[@]} -gt 0 ]; then
  # Arguments given: one session on 3.11 with them (a -m in them overrides the container one).
  run_phase pytest .venv/bin/python -m pytest -q --durations=20 -m "not container" "${pytest_args[@]}" ||
    failed+=(pytest)
else
  # Two lanes, side by side: this one runs the tests that start Spark on 3.11; the other (in the
  # background, its output printed when it ends) runs 3.11's tests without Spark, then the newest
  # other Python's beside the image's tests (once the image is built), then every other Python's
  # end-to-end test, then the Spark tests that bring a Kafka cluster of their own (spark_beside:
  # they balance the lanes). Every session has its own broker directory (a Python's own, unless
  # named) and PostgreSQL; the pytest cache is left to this lane.
  spark_beside=(tests/reliability/test_broker_failover.py)
  lane=$(mktemp)
  (
    timings=()
    lane_failed=()
    run_phase no-spark-3.11 env CONSUMER_OFFSETS_TEST_KAFKA_DIR=.runtime/kafka-test-no-spark \
      .venv/bin/python -m pytest -q -p no:cacheprovider --durations=10 \
      -m "not spark and not container" || lane_failed+=(no-spark-3.11)
    # The image's tests once it is built. Selected by marker and file: a test not collected is
    # exit 5, a failure.
    container_log=$(mktemp)
    container_t0=$(date +%s%N)
    (
      while [ ! -f "$image_log.status" ]; do sleep 2; done
      cat "$image_log"
      [ "$(cat "$image_log.status")" = 0 ] || exit 1
      CONSUMER_OFFSETS_TEST_IMAGE=$test_image CONSUMER_OFFSETS_TEST_KAFKA_DIR=.runtime/kafka-test-container \
        .venv/bin/python -m pytest -q -p no:cacheprovider -m container tests/deploy/test_container.py
    ) >"$container_log" 2>&1 &
    container_pid=$!
    if [ ${#ready_pythons[@]} -gt 0 ]; then
      newest=${ready_pythons[-1]}
      run_parallel "no-spark-$newest" ".venv-$newest/bin/python -m pytest -q -p no:cacheprovider \
        -m 'not spark and not container and not kafka and not slow'"
      lane_failed+=("${parallel_failed[@]}")
    fi
    status=0
    wait "$container_pid" || status=$?
    record_timing container "$container_t0" "$status"
    echo "==> test: container (in parallel)"
    cat "$container_log"
    rm -f "$container_log"
    [ "$status" -eq 0 ] || lane_failed+=(container)
    if [ ${#ready_pythons[@]} -gt 0 ]; then
      e2e=()
      for version in "${ready_pythons[@]}"; do
        e2e+=("e2e-$version" ".venv-$version/bin/python -m pytest -q -p no:cacheprovider $e2e_test")
      done
      run_parallel "${e2e[@]}"
      lane_failed+=("${parallel_failed[@]}")
    fi
    run_phase spark-beside env CONSUMER_OFFSETS_TEST_KAFKA_DIR=.runtime/kafka-test-spark-beside \
      .venv/bin/python -m pytest -q -p no:cacheprovider --durations=5 -m spark "${spark_beside[@]}" ||
      lane_failed+=(spark-beside)
    printf '%s\n' "${timings[@]}" >"$lane.timings"
    printf '%s\n' "${lane_failed[@]}" >"$lane.failed"
  ) >"$lane" 2>&1 &
  lane_pid=$!
  run_phase spark-3.11 .venv/bin/python -m pytest -q --durations=20 -m "spark and not container" \
    "${spark_beside[@]/#/--ignore=}" ||
    failed+=(spark-3.11)
  wait "$lane_pid" || true
  cat "$lane"
  while read -r line; do [ -n "$line" ] && timings+=("$line"); done <"$lane.timings"
  while read -r line; do [ -n "$line" ] && failed+=("$line"); done <"$lane.failed"
  rm -f "$lane" "$lane.timings" "$lane.failed" "$image_log" "$image_log.status"
fi
if [ ${#pytest_args[@]} -gt 0 ]; then
  echo "==> test: Python 3.11 only (pytest arguments given)"
fi

echo "==> test: timings"
printf '    %s\n' "${timings[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "==> test: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "==> test: all passed"
