#!/usr/bin/env bash
# The test command: install what is missing, lint, check the import layers, run every test.
#
#   bash deploy/test.sh [pytest arguments...]
#
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

timings=()
run_phase() {
  local name="$1"
  shift
  echo "==> test: $name"
  local t0 status=0
  t0=$(date +%s%N)
  "$@" || status=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  timings+=("$(printf '%-10s %4d.%01d s  exit %d' "$name" $((ms / 1000)) $((ms % 1000 / 100)) "$status")")
  return "$status"
}

run_phase setup bash deploy/setup.sh "${setup_args[@]}"

failed=()
run_phase ruff-check .venv/bin/ruff check . || failed+=(ruff-check)
run_phase ruff-fmt .venv/bin/ruff format --check . || failed+=(ruff-format)
# The one-way layers and acyclic packages declared in pyproject.toml ([tool.importlinter]).
run_phase imports .venv/bin/lint-imports || failed+=(import-layers)
# pytest's own exit status stands: 5 ("no tests collected") is a failure too.
run_phase pytest .venv/bin/python -m pytest -q "${pytest_args[@]}" || failed+=(pytest)

echo "==> test: timings"
printf '    %s\n' "${timings[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "==> test: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "==> test: all passed"
