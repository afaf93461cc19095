#!/usr/bin/env bash
# checkov, the policy checker platform teams run, over deploy/kubernetes/: fails on any failed
# check (the skipped ones are annotations with their reasons: README.md beside this script).
# checkov is not in the project's lock (it is heavy): it goes into a virtualenv of its own under
# .runtime/, from checkov-requirements.txt, every package hash-checked; made once, reused while
# that file is unchanged.
#
#   bash deploy/kubernetes/checkov.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."

lock=deploy/kubernetes/checkov-requirements.txt
venv=.runtime/checkov
stamp=$(sha256sum "$lock" | cut -c1-16)
python=${PYTHON:-python3}
if [ "$(cat "$venv/.lock-hash" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --require-hashes --no-deps -r "$lock"
  echo "$stamp" >"$venv/.lock-hash"
fi
"$venv/bin/checkov" --version
"$venv/bin/checkov" -d deploy/kubernetes --framework kubernetes --compact --quiet --skip-download
