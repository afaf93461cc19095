"""The soak's accounting of a raw request (pure: no service runs): answered and delivered, it
settles into the model, also when the producer never learned where it landed."""

from __future__ import annotations

import json
import time

from confluent_kafka import Message

from tests.soak.load import LoadChild, LoadSettings, _Pending

SETTINGS = LoadSettings(
    bootstrap="unused:9092",
    ingest_topic="commits",
    responses_topic="responses",
    ingest_partitions=2,
    requests_per_s=1,
    partitions_per_request=1,
    groups=1,
    topics=1,
    client_rate=0,
    client_groups=0,
    client_timeout_s=1,
    native_groups=0,
    native_consumers_per_group=0,
    data_topic="data",
    data_rate=0,
    tag="t",
)
KEY = ("soak-g00000", 0)


def answer(request_id: str) -> bytes:
    return json.dumps({"requestId": request_id, "errorCode": 0, "partitions": []}).encode()


def test_a_request_delivered_at_an_unknown_position_settles_behind_its_keys_known_ones() -> None:
    load = LoadChild(SETTINGS)
    for request_id, advance in (("r1", 1), ("r2", 2)):
        load.outstanding[request_id] = _Pending(time.monotonic(), KEY, advance)
    # r1: a retry of a batch the broker already had; librdkafka reports no offset (-1: None).
    unknown = Message(topic="commits", partition=0, offset=-1)
    assert unknown.offset() is None
    load._delivered(None, unknown, "r1", KEY, 1)
    load._answered("r1", answer("r1"), (1, 0))
    assert "r1" not in load.outstanding and load.unplaced == 1
    assert load.last_applied[KEY] == (-1, 1)
    # A later request of the key, placed, wins in the model.
    load._answered("r2", answer("r2"), (1, 0))
    load._delivered(None, Message(topic="commits", partition=0, offset=7), "r2", KEY, 2)
    assert not load.outstanding
    assert load.last_applied[KEY] == (7, 2)
