"""One coordinator shard: the single entry point of the state machine (Kafka's
``GroupCoordinatorShard``, offsets side).

The job makes one ``handle_messages`` call per shard with input per micro-batch. ``apply_batch``,
``cleanup_group_metadata`` and ``expire`` never touch their input state: the new state is the old
one with the returned records replayed, so loading a shard from the offsets topic rebuilds it
exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.acls import Authorizer
from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.requests import Api
from state.engine.apply import ApplyResult, apply_batch, cleanup_group_metadata
from state.engine.consumer_groups import consumer_group_records
from state.engine.loading import (
    LoadedShard,
    positioned_record_frame_of,
    record_partitions,
    replay_log,
    replay_log_chunks,
    snapshot_record_chunks,
    snapshot_records,
)
from state.engine.request_frame import decode_request_messages, frame_from_requests
from state.engine.shard_log import (
    encode_log_chunk,
    replay_log_chunk,
    replay_log_chunks_on,
    rewrite_base,
)
from state.engine.shard_reads import fetch_offsets, snapshot
from state.engine.shard_state import (
    ShardState,
    empty_shard,
    expire,
    next_expiry_ms,
    replay_records,
    state_nbytes,
)
from state.engine.state_codec import (
    StateFormatError,
    blob_stamp,
    decode_state,
    encode_state,
    encode_state_kept,
)
from state.formats.frames import (
    RECORD_FRAME_SCHEMA,
    REQUEST_FRAME_SCHEMA,
    RESPONSE_FRAME_SCHEMA,
)
from state.formats.records import RecordFormatError, classify_key
from state.formats.response_codec import encode_responses

#: Written by the job once per shard whenever it starts, so that every shard is called in the
#: first batch (it loads, and warms what a first batch pays). Not a request: dropped.
LOAD_MARKER = b'{"version":1,"api":"LoadCoordinator"}'
#: Written by the job to every ingest partition every ``retention_check_interval_ms`` (Kafka's
#: ``offsets.retention.check.interval.ms``): the shard expires what is due, Kafka's periodic
#: check, even when no commit arrives for it. Not a request: dropped.
EXPIRY_TICK = b'{"version":1,"api":"ExpireOffsets"}'
#: The job's own messages. Only on the job's own ingest topic, which only operators may write:
#: on a tenant's topic they are malformed requests (dead letters), so no tenant forces an expiry.
MARKERS = frozenset({LOAD_MARKER, EXPIRY_TICK})
#: The ``tenant`` of a message from the job's own ingest topic (operators'); a tenant's is its
#: index in ``ShardRules.tenant_topics``.
OPERATOR = -1
#: The ``loaded`` records of a call that did not load (tables are immutable: made once).
_NO_RECORDS = RECORD_FRAME_SCHEMA.empty_table()


@dataclass(frozen=True)
class ShardRules:
    """What a call needs besides the shard: Kafka's configuration; each tenant's ingest topic and
    ACLs, by tenant index; the partition counts of the ingest topics, the job's then each
    tenant's (empty: not known, and a shard takes every message keyed to it)."""

    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    tenant_topics: tuple[str, ...] = ()
    tenant_authorizers: tuple[Authorizer, ...] = ()
    ingest_partitions: tuple[int, ...] = ()

    def own_partition(self, tenant: int, shard: int) -> int | None:
        """The partition of ``tenant``'s ingest topic holding ``shard``'s requests: the shard
        modulo the topic's partition count (a divisor of the shard count); None: not known."""
        index = 0 if tenant == OPERATOR else tenant + 1
        if index >= len(self.ingest_partitions):
            return None
        return shard % self.ingest_partitions[index]


class ShardOutput(NamedTuple):
    """One call's result. ``changed``: ``state`` must be stored (new, or not the one called
    with). ``records`` go to the offsets topic in order, each to its ``record_partitions`` entry
    (None: the shard is the partition); ``loaded`` is the shard as records when the call loaded
    it (for the sinks). ``answers`` (with the ``tenant`` whose responses topic each goes to, null:
    the job's) and ``dead_letters`` are ``encode_responses`` messages; ``group_commits`` the
    commits applied per group. (The job's progress is the offsets Spark planned for the batch.)"""

    state: ShardState
    changed: bool
    records: pa.Table
    record_partitions: pa.Array | None
    loaded: pa.Table
    answers: pa.Table
    dead_letters: pa.Table
    group_commits: pa.Table
    stats: dict[str, int | None]


def handle_messages(
    shard: int,
    state: ShardState | None,
    messages: pd.DataFrame,
    now_ms: int,
    rules: ShardRules,
    load: Callable[[int], LoadedShard] | None = None,
    write_loaded: Callable[[pa.Table], None] | None = None,
) -> ShardOutput:
    """One micro-batch of ``shard``: its ``messages`` (``ingest_offset``, ``timestamp_ms``,
    ``value`` bytes; optionally ``ingest_partition`` and ``tenant``) decoded and applied at
    ``now_ms`` (the micro-batch's time: a replay decides as the first run did), the job's own
    topic first, then each tenant's under its ACLs. Without a stored ``state`` the shard is
    ``load(shard)`` (rebuilt from its offsets-topic partitions) or empty; a loaded shard's
    records go to ``write_loaded`` in pieces when given (``snapshot_record_chunks``), else in
    ``loaded``. What is due expires only when an expiry tick is among the job's own messages. A
    message from an ingest partition not the shard's is answered NOT_COORDINATOR."""
    loaded, loaded_records = _NO_RECORDS, None
    if state is not None:
        start = state
    elif load is not None:
        start, loaded_records = load(shard)
        if write_loaded is None:
            loaded = snapshot_records(start)
        else:
            for piece in snapshot_record_chunks(start):
                write_loaded(piece)
    else:
        start = empty_shard(shard)
    applied = _apply_messages(shard, start, messages, now_ms, rules)
    records = applied.records()
    responses = applied.responses()
    answers, dead_letters = _encode_answers(applied.answered, shard)
    return ShardOutput(
        state=applied.state,
        changed=state is None or applied.state is not state,
        records=records,
        record_partitions=record_partitions(records, rules.coordinator),
        loaded=loaded,
        answers=answers,
        dead_letters=dead_letters,
        group_commits=group_commits(responses),
        stats=_stats(applied, records, responses, loaded_records),
    )


class _Applied:
    """What a call's ``apply_batch`` calls made, in order."""

    def __init__(self, state: ShardState) -> None:
        self.state = state
        self.record_parts: list[pa.Table] = []
        self.answered: list[tuple[int, pa.Table]] = []
        self.input_rows = 0
        self.next_expiry_ms: int | None = None

    def add(self, tenant: int, result: ApplyResult, input_rows: int) -> None:
        self.state, self.next_expiry_ms = result.state, result.next_expiry_ms
        self.record_parts.append(result.records)
        self.answered.append((tenant, result.responses))
        self.input_rows += input_rows

    def records(self) -> pa.Table:
        parts = self.record_parts
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def responses(self) -> pa.Table:
        parts = [responses for _, responses in self.answered]
        if not parts:
            return RESPONSE_FRAME_SCHEMA.empty_table()
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def _apply_messages(
    shard: int, state: ShardState, messages: pd.DataFrame, now_ms: int, rules: ShardRules
) -> _Applied:
    """``apply_batch`` of each source's messages in turn (``_by_source``); the first call
    expires what is due when the job's own topic brought an expiry tick."""
    applied = _Applied(state)
    sources = [(tenant, _Messages.of(part)) for tenant, part in _by_source(messages)]
    # Only the job's own topic ticks: a tick on a tenant's topic is a malformed request.
    expire_due = any(tenant == OPERATOR and EXPIRY_TICK in part.values for tenant, part in sources)
    for tenant, part in sources:
        own = rules.own_partition(tenant, shard)
        routed, misrouted = part.split(own)
        markers = MARKERS if tenant == OPERATOR else frozenset()
        frames = [routed.request_frame(markers)]
        if misrouted.values:
            frames.append(
                _refuse_misrouted(
                    misrouted.request_frame(markers),
                    f"shard {shard} reads its requests from partition {own} of its ingest "
                    "topic: a request goes to partition_for(group id, partition count) with the "
                    "group id as its key",
                )
            )
        authorizer = None if tenant == OPERATOR else rules.tenant_authorizers[tenant]
        for frame in frames:
            result = apply_batch(
                applied.state,
                frame,
                now_ms,
                rules.coordinator,
                expire_due=expire_due,
                authorizer=authorizer,
            )
            expire_due = False
            applied.add(tenant, result, frame.num_rows)
    return applied


def _by_source(messages: pd.DataFrame) -> list[tuple[int, pd.DataFrame]]:
    """A shard's messages split by the topic they came from (``tenant``): the job's own topic
    first, then each tenant's in configuration order, so that a replay applies them in the same
    order. Without the column, all are the job's."""
    if "tenant" not in messages.columns or not len(messages):
        return [(OPERATOR, messages)]
    return [
        (int(tenant), part.reset_index(drop=True))
        for tenant, part in messages.groupby("tenant", sort=True)
    ]


class _Messages(NamedTuple):
    """One source's messages as Python lists, in arrival order (a pandas operation costs more
    than a small batch's whole list), with their ``ingest_partition`` and ``key`` (None: not
    given; keys given, a TxnOffsetCommit must be keyed by its group: ``keyed_request``)."""

    offsets: list[int]
    timestamps: list[int]
    values: list[bytes | None]
    partitions: list[int] | None
    keys: list[bytes | None] | None = None

    @staticmethod
    def of(frame: pd.DataFrame) -> _Messages:
        if not len(frame):
            return _Messages([], [], [], None)
        columns = frame.columns
        return _Messages(
            frame["ingest_offset"].tolist(),
            frame["timestamp_ms"].tolist(),
            frame["value"].tolist(),
            frame["ingest_partition"].tolist() if "ingest_partition" in columns else None,
            frame["key"].tolist() if "key" in columns else None,
        )

    def take(self, rows: list[int]) -> _Messages:
        def pick(values: list[Any] | None) -> list[Any] | None:
            return None if values is None else [values[i] for i in rows]

        return _Messages(
            [self.offsets[i] for i in rows],
            [self.timestamps[i] for i in rows],
            [self.values[i] for i in rows],
            pick(self.partitions),
            pick(self.keys),
        )

    def split(self, own: int | None) -> tuple[_Messages, _Messages]:
        """The messages from the shard's own ingest partition ``own``, and those from another
        (for ``_refuse_misrouted``); own None: the layout is not known, all count."""
        none = _Messages([], [], [], None)
        if own is None or self.partitions is None:
            return self, none
        mine = [i for i, partition in enumerate(self.partitions) if partition == own]
        if len(mine) == len(self.partitions):
            return self, none
        others = [i for i, partition in enumerate(self.partitions) if partition != own]
        return self.take(mine), self.take(others)

    def request_frame(self, markers: frozenset[bytes]) -> pa.Table:
        """The messages as a request frame, in log order, without the job's ``markers``."""
        offsets = self.offsets
        if any(later < earlier for earlier, later in itertools.pairwise(offsets)):
            # sorted is stable: messages of one offset keep their arrival order.
            return self.take(sorted(range(len(offsets)), key=offsets.__getitem__)).request_frame(
                markers
            )
        kept = [
            i for i, value in enumerate(self.values) if value is None or bytes(value) not in markers
        ]
        messages = self if len(kept) == len(offsets) else self.take(kept)
        return decode_request_messages(
            zip(messages.offsets, messages.timestamps, messages.values, strict=True),
            messages.keys,
        )


# On an ingest topic of fewer partitions than shards, a shard reads its requests from one
# partition. A message on another came through a producer that did not put it where its key says:
# applying it would mix two partitions' orders in one shard, so it is refused as Kafka refuses a
# request sent to the wrong coordinator.


def _refuse_misrouted(frame: pa.Table, reason: str) -> pa.Table:
    """``frame`` (a request frame) with every row not already rejected by the decoder answered
    NOT_COORDINATOR (16) for ``reason``: ``apply_batch`` answers such rows and applies none."""
    if not frame.num_rows:
        return frame
    accepted = pc.equal(frame["error_code"], 0)
    code_type = frame.schema.field("error_code").type
    reason_type = frame.schema.field("error_reason").type
    codes = pc.if_else(
        accepted, pa.scalar(int(ErrorCode.NOT_COORDINATOR), code_type), frame["error_code"]
    )
    reasons = pc.if_else(accepted, pa.scalar(reason, reason_type), frame["error_reason"])
    frame = frame.set_column(frame.schema.get_field_index("error_code"), "error_code", codes)
    return frame.set_column(frame.schema.get_field_index("error_reason"), "error_reason", reasons)


def _encode_answers(answered: list[tuple[int, pa.Table]], shard: int) -> tuple[pa.Table, pa.Table]:
    """``encode_responses`` of each source's responses, a tenant's answers marked with its
    ``tenant`` (its responses topic)."""
    answers, dead = [], []
    for tenant, responses in answered:
        encoded, dead_letters = encode_responses(responses, shard)
        if tenant != OPERATOR and encoded.num_rows:
            encoded = encoded.append_column(
                "tenant", pa.array([tenant] * encoded.num_rows, pa.int32())
            )
        answers.append(encoded)
        dead.append(dead_letters)
    if not answers:
        return encode_responses(RESPONSE_FRAME_SCHEMA.empty_table(), shard)
    if len(answers) == 1:
        return answers[0], dead[0]
    return pa.concat_tables(answers, promote_options="permissive"), pa.concat_tables(dead)


def group_commits(responses: pa.Table) -> pa.Table:
    """Offset commits applied per group (``group_id``, ``commits_applied``): OffsetCommit and
    TxnOffsetCommit partitions answered NONE, one per partition as Kafka writes a record per
    partition."""
    if not responses.num_rows:
        return pa.table({})
    applied = _applied_commits(responses)
    if responses["topic"].null_count:
        applied &= responses["topic"].is_valid().to_numpy()
    if not applied.any():
        return pa.table({})
    groups = responses["group_id"].filter(pa.array(applied))
    counts = pc.value_counts(groups).flatten()
    return pa.table({"group_id": counts[0], "commits_applied": counts[1]})


#: The APIs whose applied partitions count as commits (Kafka's ``OFFSET_COMMITS_SENSOR_NAME``).
_COMMIT_APIS = pa.array([Api.OFFSET_COMMIT.value, Api.TXN_OFFSET_COMMIT.value])


def _applied_commits(responses: pa.Table) -> np.ndarray:
    """Per response row: an OffsetCommit's or a TxnOffsetCommit's answered NONE."""
    ok = responses["error_code"].to_numpy() == 0
    return ok & pc.is_in(responses["api"], value_set=_COMMIT_APIS).to_numpy()


def _stats(
    applied: _Applied, records: pa.Table, responses: pa.Table, loaded_records: int | None
) -> dict[str, int | None]:
    """The call's counters (the job's statistics and the writer's progress)."""
    n = responses.num_rows
    ok = int(np.count_nonzero(responses["error_code"].to_numpy() == 0)) if n else 0
    return {
        "input_rows": applied.input_rows,
        "commits_applied": int(np.count_nonzero(_applied_commits(responses))) if n else 0,
        "rejected": n - ok,
        "tombstones": records["value"].null_count if records.num_rows else 0,
        "state_keys": applied.state.num_offsets,
        "loaded_records": loaded_records,
        "next_expiry_ms": applied.next_expiry_ms,
    }


__all__ = [
    "EXPIRY_TICK",
    "LOAD_MARKER",
    "MARKERS",
    "OPERATOR",
    "RECORD_FRAME_SCHEMA",
    "REQUEST_FRAME_SCHEMA",
    "RESPONSE_FRAME_SCHEMA",
    "Authorizer",
    "CoordinatorConfig",
    "LoadedShard",
    "RecordFormatError",
    "ShardOutput",
    "ShardRules",
    "ShardState",
    "StateFormatError",
    "apply_batch",
    "blob_stamp",
    "classify_key",
    "cleanup_group_metadata",
    "consumer_group_records",
    "decode_request_messages",
    "decode_state",
    "empty_shard",
    "encode_log_chunk",
    "encode_responses",
    "encode_state",
    "encode_state_kept",
    "expire",
    "fetch_offsets",
    "frame_from_requests",
    "group_commits",
    "handle_messages",
    "next_expiry_ms",
    "positioned_record_frame_of",
    "record_partitions",
    "replay_log",
    "replay_log_chunk",
    "replay_log_chunks",
    "replay_log_chunks_on",
    "replay_records",
    "rewrite_base",
    "snapshot",
    "snapshot_record_chunks",
    "snapshot_records",
    "state_nbytes",
]
