#!/usr/bin/env bash
# The test command: install what is missing, lint, check the import layers, run every test.
#
#   bash deploy/test.sh [pytest arguments...]
#
# Every test runs on Python 3.11 (.venv). Without pytest arguments the other supported Pythons
# (OTHER_PYTHONS, default "3.12 3.13"; each in its own .venv-X.Y from the same lock) then run the
# tests that start no Spark (-m "not spark") and one end-to-end job test. A missing interpreter
# fails the run (deploy/setup.sh says where it looked); OTHER_PYTHONS="" leaves them out.
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
run_phase() {
  local name="$1"
  shift
  echo "==> test: $name"
  local t0 status=0
  t0=$(date +%s%N)
  "$@" || status=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  timings+=("$(printf '%-14s %4d.%01d s  exit %d' "$name" $((ms / 1000)) $((ms % 1000 / 100)) "$status")")
  return "$status"
}

run_phase setup bash deploy/setup.sh "${setup_args[@]}"

failed=()
# The other Pythons' virtualenvs first, so a missing interpreter shows in the first minute.
ready_pythons=()
for version in "${other_pythons[@]}"; do
  if run_phase "setup-$version" bash deploy/setup.sh --python "$version"; then
    ready_pythons+=("$version")
  else
    failed+=("setup-$version")
  fi
done
run_phase ruff-check .venv/bin/ruff check . || failed+=(ruff-check)
run_phase ruff-fmt .venv/bin/ruff format --check . || failed+=(ruff-format)
# The one-way layers and acyclic packages declared in pyproject.toml ([tool.importlinter]).
run_phase imports .venv/bin/lint-imports || failed+=(import-layers)
# pytest's own exit status stands: 5 ("no tests collected") is a failure too.
run_phase pytest .venv/bin/python -m pytest -q "${pytest_args[@]}" || failed+=(pytest)
for version in "${ready_pythons[@]}"; do
  python=".venv-$version/bin/python"
  run_phase "no-spark-$version" "$python" -m pytest -q -m "not spark" || failed+=("no-spark-$version")
  run_phase "e2e-$version" "$python" -m pytest -q "$e2e_test" || failed+=("e2e-$version")
done
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
