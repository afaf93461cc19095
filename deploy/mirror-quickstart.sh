#!/usr/bin/env bash
# The mirror on the local broker: a kafka-python consumer group reads and commits on Kafka itself
# (no rerouting through the job), `consumer-offsets mirror` copies the broker's
# __consumer_offsets into a SQLite sink, and the CLI describes the group, lag included, from that
# sink alone.
#
#   bash deploy/mirror-quickstart.sh        (after deploy/setup.sh or deploy/quickstart.sh)
#
# The broker keeps running afterwards; the mirror is stopped at the end. State in .runtime/.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=deploy/background.sh
source deploy/background.sh

cli=.venv/bin/consumer-offsets
if [[ ! -x "$cli" ]]; then
  bash deploy/setup.sh
fi
"$cli" kafka start

bootstrap=127.0.0.1:9092
sink=sqlite:///.runtime/mirror-demo.db
log=.runtime/mirror-demo.log
rm -rf .runtime/mirror-demo.db .runtime/mirror-demo-checkpoint

echo "==> mirror quickstart: a consumer group reads 10 of 30 messages and commits on Kafka"
.venv/bin/python - "$bootstrap" <<'PY'
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

bootstrap = sys.argv[1]
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
try:
    admin.create_topics([NewTopic("mirror-demo.orders", 1, 1)])
except TopicAlreadyExistsError:
    pass
admin.close()
producer = KafkaProducer(bootstrap_servers=bootstrap)
for i in range(30):
    producer.send("mirror-demo.orders", f"order {i}".encode())
producer.flush()
producer.close()
consumer = KafkaConsumer(
    bootstrap_servers=bootstrap, group_id="mirror-demo-readers", enable_auto_commit=False
)
partition = TopicPartition("mirror-demo.orders", 0)
consumer.assign([partition])
consumer.seek_to_beginning(partition)
read = 0
while read < 10:
    read += sum(len(batch) for batch in consumer.poll(1000, max_records=10 - read).values())
consumer.commit()
print(f"committed offset {consumer.committed(partition)} for mirror-demo-readers")
consumer.close()
PY

echo "==> mirror quickstart: starting the mirror (log: $log)"
start_service mirror "$log" "$cli" mirror --source-bootstrap-servers "$bootstrap" \
  --cluster-name local --sink-url "$sink" --checkpoint-location .runtime/mirror-demo-checkpoint \
  --log-end-interval 1
lag_mirrored() {
  "$cli" describe --group mirror-demo-readers --sink-url "$sink" --json 2>/dev/null \
    | grep -q '"lag": 20'
}
wait_for_service lag_mirrored

echo "==> mirror quickstart: the group as the sink holds it (lag from the mirrored log-end offsets)"
"$cli" status --sink-url "$sink"
"$cli" describe --group mirror-demo-readers --sink-url "$sink"
echo "==> mirror quickstart: done. SQL over it: sqlite3 .runtime/mirror-demo.db 'select * from consumer_offsets'"
