"""Hostile input: thousands of bad ingest messages mixed with valid commits.

Every bad message must be answered with a Kafka error code naming the reason (responses topic,
when it carries a readable request id) or dead-lettered with its reason (dead-letter topic),
the query must keep running, and every valid commit — including those of groups whose ids are
SQL, quotes, control characters or non-ASCII — must land verbatim in the offsets topic and the
sink, which must come out with its tables intact (identifiers reach the database only as bound
parameters). Expectations are written per class, from the request format's documented rules
(``state.formats.request_codec``, deploy/README.md), not derived from the code under test.

Run with ``pytest -s`` to see the summary table of classes and how each was answered.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from state.coordinator.errors import ErrorCode
from state.coordinator.partitioner import partition_for
from state.coordinator.rules import MAX_PARTITIONS_PER_TOPIC
from streaming.config import JobConfig
from tests.fixtures.job import PARTITIONS, prepare_topics
from tests.reliability.support import (
    CommitModel,
    Message,
    dead_letters,
    diff,
    offsets_topic_offsets,
    produce,
    reliability_config,
    responses_by_id,
    wait_for_sink,
    wait_until,
)

pytestmark = pytest.mark.slow

#: Kafka's ``message.max.bytes`` is ~1 MB; a giant payload stays just under it.
GIANT = 900 * 1024
SEED = 20240611

#: Group ids that are valid (non-empty, short enough) but hostile to whatever stores them.
HOSTILE_VALID_GROUPS = (
    "robert'); DROP TABLE consumer_offsets;--",
    "x' OR '1'='1",
    '"double"-quoted',
    "back\\slash\\",
    "semi;colon -- comment /* c */",
    "%_ wildcards %",
    "$1 ? :name",
    "tab\tnew\nline\rcr",
    "ctl-\x01\x02\x1b[31m\x7f",
    "ünïcødé-グループ-群组-группа",
    "emoji-🚀-💥",
    "rtl-\u202eevil\u200b",
    " leading and trailing ",
    "x" * 2000,
)
#: Classes whose messages are valid requests, accepted whole.
ACCEPTED_KINDS = frozenset(
    {
        "valid commit",
        "negative committedOffset (Kafka accepts)",
        "NUL in group id",
        "empty group id",
    }
)
#: Topic names Kafka's ``Topic.validate`` refuses: UNKNOWN_TOPIC_OR_PARTITION for that partition.
INVALID_TOPICS = (
    "orders; DROP TABLE consumer_offsets;--",
    "t'1",
    't"q',
    "tópico",
    "a b",
    "",
    ".",
    "..",
    "x" * 250,
    "t\x01",
    "line\n",
    "\u202e",
    "\U0001d54b",
    "back\\slash",
)


@dataclass(frozen=True)
class Probe:
    """One ingest message and what must become of it."""

    kind: str
    message: Message
    #: The request id it is answered under; None: it must be dead-lettered.
    request_id: str | None
    #: Request-level error code (responses) or the dead letter's code; 0 for partition-level.
    code: int
    #: A substring the error message / dead-letter reason must contain.
    reason: str | None = None
    #: Partition-level expectations {(topic, partition): code}, when the request is decoded.
    partition_codes: Mapping[tuple[str, int], int] | None = None
    #: Accepted commits (group, topic, partition, offset): what the probe adds to the model.
    commits: tuple[tuple[str, str, int, int], ...] = ()


@dataclass
class Builder:
    """Builds probes with unique request ids and per-key increasing offsets (with rewinds)."""

    rng: random.Random
    probes: list[Probe] = field(default_factory=list)
    next_offset: dict[tuple[str, str, int], int] = field(default_factory=dict)
    counter: int = 0

    def rid(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}-{self.counter}"

    def offset(self, key: tuple[str, str, int]) -> int:
        """Mostly increasing; one in ten a rewind, as Kafka honours."""
        current = self.next_offset.get(key, self.rng.randrange(0, 1000))
        step = -self.rng.randrange(1, 50) if self.rng.random() < 0.1 else self.rng.randrange(1, 500)
        value = max(0, current + step)
        self.next_offset[key] = value
        return value

    def add(self, probe: Probe) -> None:
        self.probes.append(probe)


def shard(group: str) -> int:
    return partition_for(group, PARTITIONS)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def commit_json(
    rid: str, group: str, parts: list[dict[str, Any]], topic: str = "orders"
) -> dict[str, Any]:
    return {
        "version": 1,
        "api": "OffsetCommit",
        "requestId": rid,
        "groupId": group,
        "generationId": -1,
        "memberId": "",
        "groupInstanceId": None,
        "retentionTimeMs": -1,
        "topics": [{"name": topic, "partitions": parts}],
    }


def part(partition: int, offset: int, metadata: str = "") -> dict[str, Any]:
    return {
        "partitionIndex": partition,
        "committedOffset": offset,
        "committedLeaderEpoch": -1,
        "committedMetadata": metadata,
    }


def valid_commit(b: Builder, group: str, kind: str = "valid commit") -> Probe:
    rid = b.rid("ok")
    partitions = sorted(b.rng.sample(range(4), b.rng.randint(1, 3)))
    commits = tuple((group, "orders", p, b.offset((group, "orders", p))) for p in partitions)
    body = commit_json(rid, group, [part(p, o, f"meta-{o}") for _, _, p, o in commits])
    return Probe(
        kind,
        Message(shard(group), dumps(body), group.encode("utf-8", "surrogatepass")),
        rid,
        0,
        partition_codes={("orders", p): 0 for p in partitions},
        commits=commits,
    )


# --- bad message classes ----------------------------------------------------------------------
#
# Each mutator takes a valid commit object and breaks one thing; (mutator, reason substring).

Mutator = Callable[[dict[str, Any]], None]


def _set_part(key: str, value: Any) -> Mutator:
    def mutate(obj: dict[str, Any]) -> None:
        obj["topics"][0]["partitions"][0][key] = value

    return mutate


def _del_part(key: str) -> Mutator:
    def mutate(obj: dict[str, Any]) -> None:
        del obj["topics"][0]["partitions"][0][key]

    return mutate


def _set(key: str, value: Any) -> Mutator:
    def mutate(obj: dict[str, Any]) -> None:
        obj[key] = value

    return mutate


def _delete(key: str) -> Mutator:
    def mutate(obj: dict[str, Any]) -> None:
        del obj[key]

    return mutate


def _set_topic(key: str, value: Any) -> Mutator:
    def mutate(obj: dict[str, Any]) -> None:
        obj["topics"][0][key] = value

    return mutate


def _del_topic(key: str) -> Mutator:
    def mutate(obj: dict[str, Any]) -> None:
        del obj["topics"][0][key]

    return mutate


INVALID_REQUEST_CLASSES: dict[str, list[tuple[Mutator, str]]] = {
    "wrong type": [
        (_set_part("partitionIndex", "0"), "partitionIndex: expected an integer, got string"),
        (_set_part("committedOffset", "5"), "committedOffset: expected an integer, got string"),
        (_set_part("committedOffset", 1.5), "committedOffset: expected an integer, got number"),
        (_set_part("committedOffset", True), "committedOffset: expected an integer, got boolean"),
        (_set_part("committedLeaderEpoch", "x"), "committedLeaderEpoch: expected an integer"),
        (_set("topics", {}), "topics: expected an array, got object"),
        (_set_topic("partitions", "x"), "partitions: expected an array, got string"),
        (_set("generationId", "1"), "generationId: expected an integer, got string"),
        (_set("retentionTimeMs", []), "retentionTimeMs: expected an integer, got array"),
        (_set("version", "1"), "version: expected an integer, got string"),
    ],
    "non-string in a string field": [
        (_set("groupId", 123), "groupId: expected a string, got integer"),
        (_set("groupId", {"a": 1}), "groupId: expected a string, got object"),
        (_set("memberId", 5), "memberId: expected a string, got integer"),
        (_set("api", ["OffsetCommit"]), "api: expected a string, got array"),
        (_set_topic("name", 9), "name: expected a string, got integer"),
        (_set_part("committedMetadata", 7), "committedMetadata: expected a string or null"),
        (_set("groupInstanceId", False), "groupInstanceId: expected a string or null"),
    ],
    "missing field": [
        (_delete("topics"), "topics: missing"),
        (_del_part("committedOffset"), "committedOffset: missing"),
        (_del_part("partitionIndex"), "partitionIndex: missing"),
        (_delete("groupId"), "groupId: missing"),
        (_delete("api"), "api: missing"),
        (_delete("version"), "version: missing"),
        (_del_topic("name"), "name: missing"),
        (_del_topic("partitions"), "partitions: missing"),
    ],
    "null field": [
        (_set_part("committedOffset", None), "committedOffset: expected an integer, got null"),
        (_set_part("partitionIndex", None), "partitionIndex: expected an integer, got null"),
        (_set("groupId", None), "groupId: expected a string, got null"),
        (_set("memberId", None), "memberId: expected a string, got null"),
        (_set("generationId", None), "generationId: expected an integer, got null"),
        (_set("retentionTimeMs", None), "retentionTimeMs: expected an integer, got null"),
        (_set_part("committedLeaderEpoch", None), "committedLeaderEpoch: expected an integer"),
        (_set("topics", None), "topics: expected an array, got null"),
        (_set_topic("name", None), "name: expected a string, got null"),
    ],
    "number out of range": [
        (_set_part("committedOffset", 2**63), "out of range for int64"),
        (_set_part("committedOffset", -(2**63) - 1), "out of range for int64"),
        (_set_part("committedOffset", 10**30), "out of range for int64"),
        (_set_part("committedOffset", 10**400), "out of range for int64"),
        (_set_part("partitionIndex", 2**31), "out of range for int32"),
        (_set_part("committedLeaderEpoch", -(2**31) - 1), "out of range for int32"),
        (_set("retentionTimeMs", 2**64), "out of range for int64"),
        (_set("generationId", 2**40), "out of range for int32"),
    ],
    "unknown api": [
        (_set("api", "OffsetFetch"), "unknown api"),
        (_set("api", ""), "unknown api"),
        (_set("api", "offsetcommit"), "unknown api"),
        (_set("api", "DROP TABLE consumer_offsets"), "unknown api"),
        (_set("api", "Ωmega\x00"), "unknown api"),
    ],
}
UNSUPPORTED_VERSIONS = (0, 2, -1, 99, 2**40, 10**30)


def add_bad_classes(b: Builder, groups: list[str]) -> None:
    rng = b.rng

    def group() -> str:
        return rng.choice(groups)

    # -- answered at request level (readable request id) --------------------------------------
    for kind, mutators in INVALID_REQUEST_CLASSES.items():
        count = {"wrong type": 300, "missing field": 200, "null field": 180}.get(kind, 150)
        for i in range(count):
            mutate, reason = mutators[i % len(mutators)]
            rid, g = b.rid("bad"), group()
            obj = commit_json(rid, g, [part(0, 1)])
            mutate(obj)
            b.add(
                Probe(kind, Message(shard(g), dumps(obj)), rid, ErrorCode.INVALID_REQUEST, reason)
            )
    for i in range(120):
        rid, g = b.rid("ver"), group()
        obj = commit_json(rid, g, [part(0, 1)])
        obj["version"] = UNSUPPORTED_VERSIONS[i % len(UNSUPPORTED_VERSIONS)]
        b.add(
            Probe(
                "unsupported version",
                Message(shard(g), dumps(obj)),
                rid,
                ErrorCode.UNSUPPORTED_VERSION,
                "is not supported",
            )
        )
    for i in range(60):
        rid, g = b.rid("dup"), group()
        text = dumps(commit_json(rid, g, [part(0, 1)]))
        # The same key twice: JSON readers disagree on which wins, so the request is refused.
        dup = text[:-1] + (b',"groupId":"other"}' if i % 2 else b',"topics":[]}')
        b.add(
            Probe(
                "duplicate key",
                Message(shard(g), dup),
                rid,
                ErrorCode.INVALID_REQUEST,
                "duplicate key",
            )
        )
    for i in range(60):
        rid, g = b.rid("sur"), group()
        lone = "lone\ud800" if i % 2 else "\udc00lone"
        obj = commit_json(rid, g, [part(0, 1)])
        if i % 3 == 0:
            obj["groupId"] = g + lone
        elif i % 3 == 1:
            obj["topics"][0]["name"] = lone
        else:
            obj["topics"][0]["partitions"][0]["committedMetadata"] = lone
        # ASCII JSON: the lone surrogate travels as a \\u escape, as a hostile producer sends it.
        text = json.dumps(obj, separators=(",", ":")).encode("ascii")
        b.add(
            Probe(
                "unpaired surrogate",
                Message(shard(g), text),
                rid,
                ErrorCode.INVALID_REQUEST,
                "unpaired surrogate",
            )
        )

    # -- answered per partition (the request decodes; Kafka's rules reject a partition) --------
    def partial(
        kind: str, count: int, bad_part: Callable[[int], tuple[str, dict[str, Any]]], code: int
    ) -> None:
        for i in range(count):
            rid, g = b.rid("part"), group()
            topic, bad = bad_part(i)
            good_offset = b.offset((g, "orders", 3))
            obj = commit_json(rid, g, [part(3, good_offset)])
            obj["topics"].append({"name": topic, "partitions": [bad]})
            b.add(
                Probe(
                    kind,
                    Message(shard(g), dumps(obj)),
                    rid,
                    0,
                    partition_codes={("orders", 3): 0, (topic, bad["partitionIndex"]): code},
                    commits=((g, "orders", 3, good_offset),),
                )
            )

    partial(
        "invalid topic name",
        280,
        lambda i: (INVALID_TOPICS[i % len(INVALID_TOPICS)], part(0, 5)),
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    partial(
        "negative partition",
        100,
        lambda i: ("payments", part(-1 - i % 3, 5)),
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    partial(
        "partition index past the cap",
        40,
        lambda i: ("payments", part((MAX_PARTITIONS_PER_TOPIC, 2**31 - 1)[i % 2], 5)),
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    partial(
        "oversized metadata",
        120,
        # Kafka counts UTF-16 code units: 4,097 of "€" (12,291 bytes) are one too many.
        lambda i: ("payments", part(1, 5, "m" * 4097 if i % 2 else "€" * 4097)),
        ErrorCode.OFFSET_METADATA_TOO_LARGE,
    )
    for _ in range(60):
        # The empty group id is a group for OffsetCommit, as in Kafka 4.1.
        rid = b.rid("empty-group")
        first, second = b.offset(("", "orders", 0)), b.offset(("", "orders", 1))
        obj = commit_json(rid, "", [part(0, first), part(1, second)])
        b.add(
            Probe(
                "empty group id",
                Message(shard(""), dumps(obj)),
                rid,
                0,
                partition_codes={("orders", 0): 0, ("orders", 1): 0},
                commits=(("", "orders", 0, first), ("", "orders", 1, second)),
            )
        )
    for _ in range(80):
        rid, g = b.rid("wrong-shard"), group()
        obj = commit_json(rid, g, [part(2, 9)])
        b.add(
            Probe(
                "wrong ingest partition",
                Message((shard(g) + 1) % PARTITIONS, dumps(obj)),
                rid,
                0,
                partition_codes={("orders", 2): ErrorCode.NOT_COORDINATOR},
            )
        )

    # -- dead-lettered: no readable request id -----------------------------------------------
    def dead(
        kind: str, count: int, make: Callable[[int], bytes | None], code: int, reason: str
    ) -> None:
        for i in range(count):
            b.add(Probe(kind, Message(i % PARTITIONS, make(i)), None, code, reason))

    def garbage(i: int) -> bytes:
        body = bytes(rng.choice(b"abcxyz{}[]:,\"' 0123456789") for _ in range(rng.randint(1, 80)))
        return b"{" + body if i % 2 else b"not json " + body

    dead("not JSON", 200, garbage, ErrorCode.CORRUPT_MESSAGE, "not valid JSON")
    dead(
        "invalid UTF-8",
        80,
        lambda i: b'{"version":1,"requestId":"\xff\xfe' + bytes([0x80 + i % 64]) + b'"}',
        ErrorCode.CORRUPT_MESSAGE,
        "not valid UTF-8",
    )
    not_objects = [b"[1,2,3]", b'"OffsetCommit"', b"42", b"null", b"true", b"[]", b"-0.5e3"]
    dead(
        "JSON but not an object",
        100,
        lambda i: not_objects[i % len(not_objects)],
        ErrorCode.CORRUPT_MESSAGE,
        "expected a JSON object",
    )
    dead("null value (keyed)", 60, lambda i: None, ErrorCode.CORRUPT_MESSAGE, "got null")
    dead("empty value", 40, lambda i: b"", ErrorCode.CORRUPT_MESSAGE, "got null")

    def lenient(i: int) -> bytes:
        g = group()
        valid = dumps(commit_json(f"lenient-{i}", g, [part(0, 1)]))
        forms = [
            valid.replace(b'"', b"'"),  # single quotes: some JSON readers accept them
            valid + b" trailing",  # data after the object
            valid.replace(b'"committedOffset":1', b'"committedOffset":NaN'),
            valid.replace(b'"committedOffset":1', b'"committedOffset":Infinity'),
            valid.replace(b'{"version"', b'/* c */{"version"'),  # a comment
            valid.replace(b'"committedOffset":1', b'"committedOffset":01'),  # leading zero
        ]
        return forms[i % len(forms)]

    dead("non-standard JSON", 120, lenient, ErrorCode.CORRUPT_MESSAGE, "not valid JSON")
    dead(
        "nested too deeply",
        6,
        lambda i: b'{"version":1,"requestId":"deep","x":' + b"[" * 20_000 + b"]" * 20_000 + b"}",
        ErrorCode.CORRUPT_MESSAGE,
        "nested too deeply",
    )

    def no_request_id(i: int) -> bytes:
        obj = commit_json("x", group(), [part(0, 1)])
        del obj["requestId"]
        return dumps(obj)

    dead("missing requestId", 80, no_request_id, ErrorCode.INVALID_REQUEST, "requestId: missing")

    # -- giant payloads (~900 KB, under the broker's ~1 MB message limit) ---------------------
    for i in range(2):
        rid, g = b.rid("giant-meta"), group()
        obj = commit_json(rid, g, [part(1, 5, "M" * GIANT)])
        b.add(
            Probe(
                "giant payload",
                Message(shard(g), dumps(obj)),
                rid,
                0,
                partition_codes={("orders", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE},
            )
        )
        rid = b.rid("giant-group")
        huge_group = f"G{i}" + "g" * GIANT
        b.add(
            Probe(
                "giant payload",
                Message(shard(huge_group), dumps(commit_json(rid, huge_group, [part(0, 1)]))),
                rid,
                0,
                partition_codes={("orders", 0): ErrorCode.INVALID_GROUP_ID},
            )
        )
        b.add(
            Probe(
                "giant payload",
                Message(i, b"{" + b"x" * GIANT),
                None,
                ErrorCode.CORRUPT_MESSAGE,
                "not valid JSON",
            )
        )


def build_probes() -> list[Probe]:
    """~2,600 bad messages and ~600 valid commits, interleaved at random (seeded)."""
    rng = random.Random(SEED)
    b = Builder(rng)
    groups = [f"g-{i}" for i in range(16)] + list(HOSTILE_VALID_GROUPS)
    add_bad_classes(b, groups)
    bad = b.probes
    b.probes = []
    for _ in range(600):
        b.add(valid_commit(b, rng.choice(groups), "valid commit"))
    # Valid by Kafka's rules, surprising for a store: accepted, as a broker would.
    for _ in range(20):
        rid, g = b.rid("neg"), rng.choice(groups)
        offset = -rng.randrange(1, 10**12)
        b.add(
            Probe(
                "negative committedOffset (Kafka accepts)",
                Message(shard(g), dumps(commit_json(rid, g, [part(0, offset)], topic="negatives"))),
                rid,
                0,
                partition_codes={("negatives", 0): 0},
                commits=((g, "negatives", 0, offset),),
            )
        )
    for i in range(10):
        rid, g = b.rid("nul"), f"nul\x00group-{i % 2}"
        offset = b.offset((g, "orders", 0))
        b.add(
            Probe(
                "NUL in group id",
                Message(shard(g), dumps(commit_json(rid, g, [part(0, offset)]))),
                rid,
                0,
                partition_codes={("orders", 0): 0},
                commits=((g, "orders", 0, offset),),
            )
        )
    valid = b.probes
    # Interleave keeping each list's own order (valid commits of a key stay in offset order).
    merged: list[Probe] = []
    i = j = 0
    while i < len(bad) or j < len(valid):
        take_bad = j >= len(valid) or (
            i < len(bad) and rng.random() < len(bad) / (len(bad) + len(valid))
        )
        if take_bad:
            merged.append(bad[i])
            i += 1
        else:
            merged.append(valid[j])
            j += 1
    return merged


# --- checking ---------------------------------------------------------------------------------


def outcome(
    probe: Probe,
    position: tuple[int, int],
    responses: Mapping[str, dict[str, Any]],
    dead: Mapping[tuple[int, int], dict[str, Any]],
) -> tuple[str, str | None]:
    """(how the probe was answered, a mismatch description or None)."""
    if probe.request_id is None:
        letter = dead.get(position)
        if letter is None:
            return "nothing", f"no dead letter at {position}"
        how = f"dead letter {ErrorCode(letter['errorCode']).name}"
        if letter["errorCode"] != probe.code:
            return how, f"dead letter code {letter['errorCode']} != {probe.code}: {letter}"
        if probe.reason and probe.reason not in (letter.get("reason") or ""):
            return how, f"dead letter reason {letter.get('reason')!r} lacks {probe.reason!r}"
        return how, None
    response = responses.get(probe.request_id)
    if response is None:
        return "nothing", f"no response for {probe.request_id}"
    top = response["errorCode"]
    codes = {(p["topic"], p["partitionIndex"]): p["errorCode"] for p in response["partitions"]}
    if top:
        how = f"response {ErrorCode(top).name}"
    else:
        failed = sorted({ErrorCode(c).name for c in codes.values() if c})
        how = "response per partition " + ("/".join(failed) if failed else "NONE")
    if top != probe.code:
        return how, f"{probe.request_id}: top-level code {top} != {probe.code}: {response}"
    if probe.reason and probe.reason not in (response.get("errorMessage") or ""):
        return (
            how,
            f"{probe.request_id}: message {response.get('errorMessage')!r} lacks {probe.reason!r}",
        )
    if probe.partition_codes is not None and codes != dict(probe.partition_codes):
        return how, f"{probe.request_id}: partition codes {codes} != {dict(probe.partition_codes)}"
    return how, None


def sink_tables(sink_url: str) -> dict[str, int]:
    """The sink's tables and their row counts, straight from the database catalogue."""
    if sink_url.startswith("sqlite:///"):
        conn = sqlite3.connect(sink_url.removeprefix("sqlite:///"))
        try:
            names = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
        finally:
            conn.close()
    import psycopg
    from psycopg import sql

    from tests.fixtures.postgres import with_query

    base, _, query = sink_url.partition("?")
    prefix = dict(p.split("=", 1) for p in query.split("&") if p).get("table_prefix", "")
    with psycopg.connect(with_query(base)) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                " AND starts_with(tablename, %s)",
                (prefix,),
            )
        ]
        counts = {}
        for name in names:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name))
            ).fetchone()
            counts[name.removeprefix(prefix)] = int(row[0]) if row else -1
        return counts


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def sink_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'offsets.db'}"
    return str(request.getfixturevalue("postgres_sink_url"))


@pytest.fixture
def hostile_job(sink_url: str, spark: Any, kafka_bootstrap: str, tmp_path: Path) -> Iterator[Any]:
    from streaming.spark.job import OffsetsJob

    # One ingest partition per shard (the layout ingest topics had before fewer were allowed):
    # the probes choose partitions by shard, and keys that are not group ids; the layout of
    # fewer partitions, keyed by group, has its own tests (tests/streaming/test_job.py).
    config = reliability_config(kafka_bootstrap, tmp_path, sink_url, ingest_partitions=PARTITIONS)
    prepare_topics(config)
    job = OffsetsJob.create(config, spark)
    try:
        job.start()
        yield job
    finally:
        job.stop()
        job.sink.close()


def test_hostile_input_is_answered_and_valid_commits_land_intact(hostile_job: Any) -> None:
    started = time.monotonic()
    config: JobConfig = hostile_job.config
    probes = build_probes()
    tables_before = set(sink_tables(config.sink_url))
    positions = produce(config.bootstrap_servers, config.ingest_topic, [p.message for p in probes])
    produced_s = time.monotonic() - started

    def alive() -> None:
        query = hostile_job.query
        if query is None or not query.isActive:
            raise AssertionError(f"the query died: {query and query.exception()}")

    expected_ids = {p.request_id for p in probes if p.request_id is not None}
    expected_dead = sum(p.request_id is None for p in probes)
    got: dict[str, Any] = {}

    def all_answered() -> bool:
        got["responses"] = responses_by_id(config.bootstrap_servers, config.responses_topic)
        if not expected_ids <= set(got["responses"]):
            return False
        got["dead"] = dead_letters(config.bootstrap_servers, config.dead_letter_topic)
        return len(got["dead"]) >= expected_dead

    try:
        wait_until(
            all_answered, 180, "every message answered or dead-lettered", alive, interval_s=2
        )
    except AssertionError:
        # Report what is missing per class below rather than only that something is.
        got.setdefault("dead", dead_letters(config.bootstrap_servers, config.dead_letter_topic))
    answered_s = time.monotonic() - started
    responses: dict[str, dict[str, Any]] = got["responses"]
    dead = {(d["ingestPartition"], d["ingestOffset"]): d for d in got["dead"]}

    # Per class: how each message was answered, and any mismatch with the expectation.
    table: dict[str, Counter[str]] = defaultdict(Counter)
    mismatches: list[str] = []
    for probe, position in zip(probes, positions, strict=True):
        how, problem = outcome(probe, position, responses, dead)
        table[probe.kind][how] += 1
        if problem:
            mismatches.append(f"[{probe.kind}] {problem[:400]}")
    width = max(len(k) for k in table)
    lines = [f"{'class':<{width}}  {'sent':>5}  answered as", "-" * (width + 60)]
    for kind, hows in table.items():
        answered = ", ".join(f"{how} x{n}" for how, n in sorted(hows.items()))
        lines.append(f"{kind:<{width}}  {sum(hows.values()):>5}  {answered}")
    bad_total = sum(1 for p in probes if p.kind not in ACCEPTED_KINDS)
    lines.append(
        f"{len(probes)} messages, {bad_total} bad; produced in {produced_s:.1f} s, "
        f"all answered after {answered_s:.1f} s"
    )
    print("\n" + "\n".join(lines))
    assert not mismatches, f"{len(mismatches)} messages answered wrongly:\n" + "\n".join(
        mismatches[:30]
    )
    assert len(got["dead"]) == expected_dead, "more dead letters than dead-letterable messages"
    assert bad_total >= 2000
    alive()

    # The model: accepted commits in log order. Both stores must equal it, key for key.
    model = CommitModel.from_log(
        (pos, p.commits) for p, pos in zip(probes, positions, strict=True) if p.commits
    )
    expected_sink = model.offsets
    in_topic = offsets_topic_offsets(config.bootstrap_servers, config.offsets_topic)
    assert in_topic == model.offsets, diff(model.offsets, in_topic)
    in_sink = wait_for_sink(config.sink_url, expected_sink, alive)
    hostile_landed = {k[0] for k in in_sink} & set(HOSTILE_VALID_GROUPS)
    assert hostile_landed == set(HOSTILE_VALID_GROUPS), "hostile group ids must land verbatim"

    tables_after = sink_tables(config.sink_url)
    assert set(tables_after) == tables_before, "the sink's tables changed"
    offsets_table = next(n for n in tables_after if n.endswith("consumer_offsets"))
    assert tables_after[offsets_table] == len(expected_sink)
    print(
        f"valid commits: {sum(1 for p in probes if p.commits)} requests, {len(model.offsets)} keys "
        f"in the model, all in the offsets topic and in the sink (NUL names included); "
        f"{time.monotonic() - started:.1f} s"
    )
