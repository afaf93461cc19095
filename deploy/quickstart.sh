#!/usr/bin/env bash
# First command on a fresh machine: install everything, then start a local Kafka broker.
#
#   bash deploy/quickstart.sh
#
# The consumer-offsets job and a demo producer are wired in here later; for now this leaves a
# one-node broker running on 127.0.0.1:9092 (stop it with
# `.venv/bin/python -m connectors.kafka_local stop`).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash deploy/setup.sh
.venv/bin/python -m connectors.kafka_local start

cat <<'NOTE'

Kafka is running (bootstrap servers 127.0.0.1:9092; logs in .runtime/kafka/node-1/logs/).
  status:  .venv/bin/python -m connectors.kafka_local status
  stop:    .venv/bin/python -m connectors.kafka_local stop
  tests:   bash deploy/test.sh
The consumer-offsets job and its demo are not wired into this script yet.
NOTE
