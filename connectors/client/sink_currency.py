"""Is the sink current for a group? The job records, in the sink transaction that applies a
batch, where Spark planned the batch to end on each ingest partition (``ingest_offsets``); once
that reaches the last stable offset of the group's partition as read now (the job reads
read_committed), every commit sent before now is in the sink, whoever sent it (a wait can be
longer than needed, never shorter). A request inside a transaction still open is not sent yet.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kafka.errors import KafkaError

from connectors.client.errors import OffsetsError
from connectors.client.offsets_reader import BrokerOffsets, OffsetsReader
from connectors.kafka.admin import DEFAULT_INGEST_TOPIC
from state.coordinator.errors import ErrorCode
from state.coordinator.model import TopicPartition
from state.coordinator.partitioner import partition_for

#: How often the status row is read while waiting.
DEFAULT_POLL_S: Final = 0.1


class SinkNotCurrentError(OffsetsError):
    """The sink cannot be shown to hold the group's last commits: REQUEST_TIMED_OUT (7) when the
    job's progress did not reach them in time or no cluster answered, COORDINATOR_NOT_AVAILABLE
    (15) when the job is stopped short of them or the sink is not the job's."""


@dataclass(frozen=True, slots=True)
class AppliedPosition:
    """What :func:`wait_until_applied` checked: the group's ingest partition, its log end when
    the wait began (the last stable offset: read_committed), and the job's progress there when
    the wait ended (``>= log_end_offset``)."""

    group_id: str
    ingest_partition: int
    log_end_offset: int
    progress_offset: int


def wait_until_applied(
    reader: OffsetsReader,
    group_id: str,
    *,
    ingest_topic: str = DEFAULT_INGEST_TOPIC,
    tenant_topics: Sequence[str] = (),
    timeout_s: float = 60.0,
    client_options: Mapping[str, Any] | None = None,
    poll_s: float = DEFAULT_POLL_S,
) -> AppliedPosition:
    """Wait until ``reader``'s sink holds every commit of ``group_id`` sent before this call,
    through ``ingest_topic`` or ``tenant_topics`` on the cluster of ``client_options`` (default
    the reader's). Waits through LOADING; :class:`SinkNotCurrentError` when it cannot know
    (the job STOPPED short, a mirror's sink, no cluster, no progress in time).
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    deadline = time.monotonic() + timeout_s
    if reader.sink.source_cluster() is not None:
        raise SinkNotCurrentError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"{reader.sink.url} is a mirror's sink: its progress is not the job's on "
            f"{ingest_topic!r}, so whether it holds group {group_id!r}'s last commits cannot "
            "be known from it",
        )
    shard, log_end = _ingest_log_end(reader, group_id, ingest_topic, client_options, timeout_s)
    ends = {ingest_topic: log_end} | {
        topic: _ingest_log_end(reader, group_id, topic, client_options, timeout_s)[1]
        for topic in tenant_topics
    }
    while True:
        status = reader.status()
        covered = {ingest_topic: status.ingest_offsets} | {
            topic: status.tenant_offsets.get(topic, {}) for topic in tenant_topics
        }
        progress_of = {
            topic: covered[topic].get(shard, 0 if end == 0 else -1) for topic, end in ends.items()
        }
        behind = [topic for topic, end in ends.items() if progress_of[topic] < end]
        if not behind and status.status != "LOADING":
            return AppliedPosition(group_id, shard, log_end, progress_of[ingest_topic])
        # What the messages name: the first topic not covered yet (else the job's own).
        topic = behind[0] if behind else ingest_topic
        progress, end = progress_of[topic], ends[topic]
        if status.status == "STOPPED":
            raise SinkNotCurrentError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"the offsets job is STOPPED ({status.detail}) having applied {topic!r} "
                f"partition {shard} (group {group_id!r}'s shard) up to offset "
                f"{_shown(progress)} of {end}: the sink may lack the group's last commits",
            )
        if time.monotonic() >= deadline:
            where = f"loading ({status.detail})" if status.status == "LOADING" else "running"
            raise SinkNotCurrentError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"cannot know whether the sink holds group {group_id!r}'s last commits: after "
                f"{timeout_s:g} s the job ({where}) has applied {topic!r} partition "
                f"{shard} up to offset {_shown(progress)}, its log end was {end}",
            )
        time.sleep(poll_s)


def _shown(progress: int) -> str:
    return "(none recorded)" if progress < 0 else str(progress)


def _ingest_log_end(
    reader: OffsetsReader,
    group_id: str,
    ingest_topic: str,
    client_options: Mapping[str, Any] | None,
    timeout_s: float,
) -> tuple[int, int]:
    """The group's ingest partition and its last stable offset (read_committed log end), now."""
    if client_options is None:
        broker = reader.broker.read_committed()
    else:
        broker = BrokerOffsets({**client_options, "isolation_level": "read_committed"}, timeout_s)
    try:
        partitions = broker.partitions_for(ingest_topic)
        if not partitions:
            raise SinkNotCurrentError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"the ingest topic {ingest_topic!r} does not exist on the Kafka cluster: "
                f"whether the sink holds group {group_id!r}'s last commits cannot be known",
            )
        shard = partition_for(group_id, len(partitions))
        tp = TopicPartition(ingest_topic, shard)
        ends = broker.end_offsets([tp])
    except KafkaError as exc:
        raise SinkNotCurrentError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"cannot read the log end of {ingest_topic!r} from the Kafka cluster "
            f"({type(exc).__name__}: {exc}): whether the sink holds group {group_id!r}'s last "
            "commits cannot be known",
        ) from exc
    finally:
        broker.close()
    if tp not in ends:
        raise SinkNotCurrentError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"the Kafka cluster gave no log end for {ingest_topic!r} partition {shard}",
        )
    return shard, ends[tp]
