#!/usr/bin/env bash
# First command on a fresh machine: install everything, start a local Kafka broker, run the
# offset manager's streaming job on the embedded default (SQLite sink), commit a few offsets with
# the CLI and print them as read back from the sink.
#
#   bash deploy/quickstart.sh
#
# The broker keeps running afterwards (stop: .venv/bin/consumer-offsets kafka stop); the job is
# stopped at the end. State lives in .runtime/ (git-ignored).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=deploy/background.sh
source deploy/background.sh

bash deploy/setup.sh

cli=.venv/bin/consumer-offsets
log=.runtime/quickstart-job.log
"$cli" kafka start

echo "==> quickstart: topic orders (2 partitions, 100 records each) for the demo to commit on"
.venv/bin/python - <<'PY'
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

try:
    KafkaAdminClient(bootstrap_servers="127.0.0.1:9092").create_topics([NewTopic("orders", 2, 1)])
except TopicAlreadyExistsError:
    raise SystemExit(0)  # made by an earlier run: its records are there
producer = KafkaProducer(bootstrap_servers="127.0.0.1:9092")
for i in range(200):
    producer.send("orders", b"order %d" % i, partition=i % 2)
producer.flush()
PY

echo "==> quickstart: starting the streaming job (log: $log; ACTIVE in about 30-90 s)"
start_service job "$log" "$cli" run --embedded --trigger-interval "500 milliseconds"
active() { "$cli" status --json 2>/dev/null | grep -q '"status": "ACTIVE"'; }
wait_for_service active

echo "==> quickstart: committing offsets for group demo-payments"
"$cli" commit --group demo-payments --topic orders --partition 0 --offset 42 --metadata "batch 7"
"$cli" commit --group demo-payments --topic orders --partition 1 --offset 17
# A rewind: Kafka honours a lower offset committed later.
"$cli" commit --group demo-payments --topic orders --partition 0 --offset 40

echo "==> quickstart: offsets read back from the sink"
"$cli" describe --group demo-payments
"$cli" list

echo "==> quickstart: done. The broker still runs at 127.0.0.1:9092 ($cli kafka stop)."
