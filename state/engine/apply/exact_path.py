"""Step 4 of ``apply_batch``: every other group, request by request through Kafka's handlers
over each group's ``GroupView``, which follows the records written. Groups are independent."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from state.coordinator.config import CoordinatorConfig
from state.coordinator.errors import ErrorCode
from state.coordinator.handlers import handle
from state.coordinator.model import GroupMetadataValue, Record, TopicPartition
from state.coordinator.requests import (
    DeleteGroupsRequest,
    GroupMetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    PartitionCommit,
    Request,
    TxnOffsetCommitRequest,
)
from state.coordinator.rules import CONSUMER_PROTOCOL_TYPE
from state.engine.apply.accumulators import Answers, Writes
from state.engine.apply.batch import DELETE_GROUPS, OFFSET_COMMIT, OFFSET_DELETE, Batch
from state.engine.apply.group_view import load_views
from state.engine.apply.routing import Routing
from state.engine.columns import python_list
from state.engine.record_frame import records_table
from state.engine.shard_state import ShardState
from state.formats.records import encode_group_metadata_value
from state.formats.request_codec import decode_members

#: The string columns a request is rebuilt from.
_REQUEST_COLUMNS = (
    "request_id",
    "group_id",
    "member_id",
    "group_instance_id",
    "topic",
    "metadata",
    "members_json",
    "protocol_type",
    "protocol",
    "leader",
)


def exact_path(
    batch: Batch,
    routing: Routing,
    slow_groups: np.ndarray,
    state: ShardState,
    config: CoordinatorConfig,
    answers: Answers,
    writes: Writes,
) -> None:
    """Answer the rows of ``slow_groups`` (local indexes) by Kafka's handlers; write the last record
    per key."""
    if slow_groups.size == 0:
        return
    is_slow = np.zeros(len(routing.group_names), dtype=bool)
    is_slow[slow_groups] = True
    idx = np.sort(
        np.concatenate(
            [
                routing.commit[is_slow[routing.group_of_row[routing.commit]]],
                routing.other[is_slow[routing.group_of_row[routing.other]]],
            ]
        )
    )
    views = load_views(batch, routing, idx, slow_groups, state)
    take = pa.array(idx)
    cols = {name: python_list(batch.col(name).take(take)) for name in _REQUEST_COLUMNS}
    records: dict[object, tuple[float, Record]] = {}
    # Requests of one group in log order; groups are independent, so any group order will do.
    starts = np.flatnonzero(
        np.r_[True, batch.ingest_offset[idx][1:] != batch.ingest_offset[idx][:-1]]
    )
    stops = np.r_[starts[1:], idx.size]
    for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
        row = int(idx[a])
        view = views[cols["group_id"][a]]
        request, problem = request_of(batch, idx, cols, a, b)
        if request is None:
            answers.add(np.array([row]), ErrorCode.INVALID_REQUEST, True, [problem])
            continue
        result = handle(request, view, int(batch.timestamp[row]), state.shard_id, config)
        for seq, record in enumerate(result.records):
            view.apply(record)
            records.pop(record.key, None)  # re-inserting puts the key in last-write order
            records[record.key] = (row + seq / (len(result.records) + 1), record)
        single = result.responses[0] if len(result.responses) == 1 else None
        if single is None or single.topic is not None or single.partition is not None:
            answers.add(
                idx[a:b],
                np.array([r.error_code for r in result.responses]),
                False,
                [r.error_reason for r in result.responses],
            )
        else:
            answers.add(np.array([row]), single.error_code, True, [single.error_reason])
    if records:
        positions = np.array([pos for pos, _ in records.values()])
        writes.add(records_table([r for _, r in records.values()]), positions)


def request_of(
    batch: Batch, idx: np.ndarray, cols: dict[str, list], a: int, b: int
) -> tuple[Request | None, str | None]:
    """The request of rows ``idx[a:b]`` (one message; ``cols``: its strings), or None and why."""
    row = int(idx[a])
    api = int(batch.api[row])
    request_id, group_id = cols["request_id"][a], cols["group_id"][a]
    if batch.commit[row]:
        parts = tuple(
            PartitionCommit(
                topic=cols["topic"][i],
                partition=int(batch.partition[idx[i]]),
                offset=int(batch.offset[idx[i]]),
                leader_epoch=int(batch.leader_epoch[idx[i]]),
                metadata=cols["metadata"][i] or "",
            )
            for i in range(a, b)
        )
        common: dict[str, Any] = {
            "request_id": request_id,
            "group_id": group_id,
            "partitions": parts,
            "generation_id": int(batch.generation[row]),
            "member_id": cols["member_id"][a] or "",
            "group_instance_id": cols["group_instance_id"][a],
        }
        if api == OFFSET_COMMIT:
            return OffsetCommitRequest(**common, retention_time_ms=int(batch.retention[row])), None
        # The frame keeps no transaction ids (``request_frame.request_rows``); no rule reads them.
        return TxnOffsetCommitRequest(
            **common, transactional_id="", producer_id=-1, producer_epoch=-1
        ), None
    if api == OFFSET_DELETE:
        marker = b - a == 1 and batch.topic_null[row] and batch.partition_null[row]
        tps = (
            ()
            if marker
            else tuple(
                TopicPartition(cols["topic"][i] or "", int(batch.partition[idx[i]]))
                for i in range(a, b)
            )
        )
        return OffsetDeleteRequest(request_id, group_id, tps), None
    if api == DELETE_GROUPS:
        return DeleteGroupsRequest(request_id, group_id), None
    return _group_metadata_request(batch, row, cols, a)


def _group_metadata_request(
    batch: Batch, row: int, cols: dict[str, list], a: int
) -> tuple[GroupMetadataRequest | None, str | None]:
    """The GroupMetadata request at ``row``, or None and why its members are invalid."""
    try:
        members = decode_members(cols["members_json"][a] or "[]")
        request = GroupMetadataRequest(
            request_id=cols["request_id"][a],
            group_id=cols["group_id"][a],
            generation_id=int(batch.generation[row]),
            protocol_type=cols["protocol_type"][a] or CONSUMER_PROTOCOL_TYPE,
            protocol=cols["protocol"][a],
            leader=cols["leader"][a],
            members=members,
        )
        # A value the record cannot hold (e.g. a string over 32767 bytes) is the request's fault.
        encode_group_metadata_value(
            GroupMetadataValue(
                request.protocol_type,
                request.generation_id,
                request.protocol,
                request.leader,
                0,
                members,
            )
        )
    except ValueError as e:
        return None, f"members_json: {e}"
    return request, None
