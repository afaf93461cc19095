"""The lag families of ``/metrics`` as Prometheus text (0.0.4), written column by column with
pyarrow's string kernels (a million lines at 200,000 partitions): kafka_exporter's names, then
kafka-lag-exporter's and the project's own. ``granularity="topic"`` (kminion's option): per
group and topic sums and maxima instead of per-partition series."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.serve import GRANULARITIES
from streaming.serve.lag_frame import LagFrame

Granularity = Literal["partition", "topic"]

_HELP: Final = {
    "kafka_consumergroup_current_offset": (
        "Current committed offset of a consumer group at a topic/partition"
    ),
    "kafka_consumergroup_lag": "Current approximate lag of a consumer group at a topic/partition",
    "kafka_consumergroup_lag_sum": (
        "Current approximate lag of a consumer group at a topic for all partitions"
    ),
    "kafka_consumergroup_members": "Amount of members in a consumer group",
    "kafka_topic_partition_current_offset": "Current offset of a broker at a topic/partition",
    "kafka_consumergroup_group_offset": (
        "Last committed offset of a consumer group at a topic/partition"
    ),
    "kafka_consumergroup_group_lag": "Lag in offsets of a consumer group at a topic/partition",
    "kafka_consumergroup_group_lag_seconds": (
        "Extrapolated lag in seconds of a consumer group at a topic/partition "
        "(a lower bound where consumer_offsets_group_lag_seconds_bounded is 1)"
    ),
    "consumer_offsets_group_lag_seconds_bounded": (
        "1 where the record at the committed offset is gone (deleted by retention) or not "
        "read yet (older than the sampled log-end table): the lag in seconds is at least the "
        "figure shown"
    ),
    "consumer_offsets_group_last_commit_timestamp_seconds": (
        "When the group last committed an offset of the topic/partition (Unix time)"
    ),
    "kafka_consumergroup_group_topic_sum_lag": (
        "Sum of the lag in offsets of a consumer group over a topic's partitions"
    ),
    "consumer_offsets_group_topic_max_lag_seconds": (
        "Max lag in seconds of a consumer group over a topic's partitions"
    ),
    "kafka_consumergroup_group_max_lag_seconds": (
        "Max extrapolated lag in seconds of a consumer group over its partitions"
    ),
    "kafka_consumergroup_group_max_lag": (
        "Max lag in offsets of a consumer group over its partitions"
    ),
    "kafka_consumergroup_group_sum_lag": (
        "Sum of the lag in offsets of a consumer group over its partitions"
    ),
    "consumer_offsets_group_status": (
        "Burrow's evaluation of the group: 1, labelled with its current status (the series of "
        "other statuses are absent)"
    ),
    "kafka_partition_latest_offset": "Latest offset of a partition",
}


#: A label value's escapes, in the order they apply (the backslash first).
_ESCAPES: Final = (("\\", "\\\\"), ("\n", "\\n"), ('"', '\\"'))


def _escape(value: str) -> str:
    for raw, escaped in _ESCAPES:
        value = value.replace(raw, escaped)
    return value


def _escape_column(values: pa.Array) -> pa.Array:
    """:func:`_escape` over a string column."""
    for raw, escaped in _ESCAPES:
        values = pc.replace_substring(values, raw, escaped)
    return values


Part = pa.Array | pa.ChunkedArray | str


def _join(*parts: Part) -> pa.Array:
    """Each row's parts concatenated (a ``str`` part is the same in every row)."""
    args = [pa.scalar(p, pa.string()) if isinstance(p, str) else p for p in parts]
    joined = pc.binary_join_element_wise(*args, pa.scalar("", pa.string()))
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _integers(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values, pa.int64()), pa.string())


def _milliseconds_as_seconds(ms: np.ndarray) -> pa.Array:
    """Whole milliseconds (>= 0) as seconds, written as ``repr(ms / 1000)`` writes them (and
    without ``.0`` when whole): ``12``, ``12.5``, ``12.005``."""
    whole = _integers(ms // 1000)
    frac = pc.utf8_rtrim(pc.utf8_lpad(_integers(ms % 1000), width=3, padding="0"), characters="0")
    return pc.if_else(pa.array(ms % 1000 == 0), whole, _join(whole, ".", frac))


def _lines(name: str, labels: pa.Array, values: pa.Array) -> pa.Array:
    return _join(name, labels, values, "\n")


def _text(lines: pa.Array) -> bytes:
    """The lines (each ending in a newline) as one text: their data buffer, as it is."""
    if not len(lines):
        return b""
    offsets = np.frombuffer(lines.buffers()[1], np.int32)[
        lines.offset : lines.offset + len(lines) + 1
    ]
    return memoryview(lines.buffers()[2])[int(offsets[0]) : int(offsets[-1])].tobytes()


def render(
    frame: LagFrame,
    statuses: Mapping[str, str],
    cluster: str,
    granularity: Granularity = "partition",
) -> bytes:
    """The lag families as exposition text, every family with its HELP and TYPE."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    out: dict[str, bytes] = {}
    c = _escape(cluster)
    out["kafka_consumergroup_members"] = "".join(
        f'kafka_consumergroup_members{{consumergroup="{_escape(listing.group_id)}"}} '
        f"{listing.members or 0}\n"
        for listing in frame.listings
    ).encode()
    if frame.rows:
        out.update(_partition_families(frame, c) if granularity == "partition" else {})
        out.update(_group_families(frame, statuses, c, granularity))
        out.update(_topic_families(frame, c))
    chunks = []
    for name in _HELP:
        if out.get(name):
            chunks.append(f"# HELP {name} {_HELP[name]}\n# TYPE {name} gauge\n".encode())
            chunks.append(out[name])
    return b"".join(chunks)


def _partition_families(frame: LagFrame, c: str) -> dict[str, bytes]:
    """One series per committed partition (``granularity="partition"``)."""
    g = _escape_column(frame.groups).take(pa.array(frame.group_index))
    t = _escape_column(frame.topics).take(pa.array(frame.topic_index))
    p = _integers(frame.partition)
    ke = _join('{consumergroup="', g, '",topic="', t, '",partition="', p, '"} ')
    kl = _join(f'{{cluster_name="{c}",group="', g, '",topic="', t, '",partition="', p, '"} ')
    offset = _integers(frame.offset)
    has_end = pa.array(frame.has_end)
    lag = _integers(frame.lag).filter(has_end)
    timed = pa.array(frame.has_time)
    bounded = pa.array(frame.has_time & frame.bounded)
    committed = frame.commit_timestamp_ms >= 0
    families = {
        "kafka_consumergroup_current_offset": (ke, offset),
        "kafka_consumergroup_lag": (ke.filter(has_end), lag),
        "kafka_consumergroup_group_offset": (kl, offset),
        "kafka_consumergroup_group_lag": (kl.filter(has_end), lag),
        "kafka_consumergroup_group_lag_seconds": (
            kl.filter(timed),
            _milliseconds_as_seconds(frame.lag_ms[frame.has_time]),
        ),
        "consumer_offsets_group_lag_seconds_bounded": (
            kl.filter(bounded),
            pa.array(np.full(int(np.count_nonzero(frame.has_time & frame.bounded)), "1")),
        ),
        "consumer_offsets_group_last_commit_timestamp_seconds": (
            kl.filter(pa.array(committed)),
            _milliseconds_as_seconds(frame.commit_timestamp_ms[committed]),
        ),
    }
    return {
        name: _text(_lines(name, labels, values)) for name, (labels, values) in families.items()
    }


def _group_families(
    frame: LagFrame, statuses: Mapping[str, str], c: str, granularity: Granularity
) -> dict[str, bytes]:
    """Per group, and per group and topic: sums and maxima of the partitions' lags."""
    starts = frame.group_starts()[:-1]
    lag = np.where(frame.has_end, frame.lag, 0)
    lag_ms = np.where(frame.has_time, frame.lag_ms, 0)
    kle = _join(f'{{cluster_name="{c}",group="', _escape_column(frame.groups), '"} ')
    out = {
        "kafka_consumergroup_group_max_lag_seconds": _lines(
            "kafka_consumergroup_group_max_lag_seconds",
            kle,
            _milliseconds_as_seconds(np.maximum.reduceat(lag_ms, starts)),
        ),
        "kafka_consumergroup_group_max_lag": _lines(
            "kafka_consumergroup_group_max_lag", kle, _integers(np.maximum.reduceat(lag, starts))
        ),
        "kafka_consumergroup_group_sum_lag": _lines(
            "kafka_consumergroup_group_sum_lag", kle, _integers(np.add.reduceat(lag, starts))
        ),
    }
    text = {name: _text(lines) for name, lines in out.items()}
    text["consumer_offsets_group_status"] = "".join(
        f'consumer_offsets_group_status{{cluster_name="{c}",group="{_escape(group)}",'
        f'status="{_escape(status)}"}} 1\n'
        for group in frame.groups.to_pylist()
        if (status := statuses.get(group))
    ).encode()
    # Per group and topic: the runs of rows with one group and topic, by escaped topic.
    key = frame.group_index * (len(frame.topics) + 1) + frame.topic_index
    runs = np.concatenate(([0], np.flatnonzero(np.diff(key)) + 1)).astype(np.int64)
    g = _escape_column(frame.groups).take(pa.array(frame.group_index[runs]))
    t = _escape_column(frame.topics).take(pa.array(frame.topic_index[runs]))
    order = pa.table(
        {"group": pa.array(frame.group_index[runs]), "topic": t, "run": np.arange(len(runs))}
    ).sort_by([("group", "ascending"), ("topic", "ascending")])["run"]
    g, t = g.take(order), t.take(order)
    topic_sum = _integers(np.add.reduceat(lag, runs)).take(order)
    exporter = _join('kafka_consumergroup_lag_sum{consumergroup="', g, '",topic="', t, '"} ')
    text["kafka_consumergroup_lag_sum"] = _text(_join(exporter, topic_sum, "\n"))
    if granularity == "topic":
        labels = _join(f'{{cluster_name="{c}",group="', g, '",topic="', t, '"} ')
        seconds = _milliseconds_as_seconds(np.maximum.reduceat(lag_ms, runs)).take(order)
        for name, values in (
            ("kafka_consumergroup_group_topic_sum_lag", topic_sum),
            ("consumer_offsets_group_topic_max_lag_seconds", seconds),
        ):
            text[name] = _text(_lines(name, labels, values))
    return text


def _topic_families(frame: LagFrame, c: str) -> dict[str, bytes]:
    """Each committed partition's log-end offset, by topic and partition."""
    rows = np.flatnonzero(frame.has_end)
    if not len(rows):
        return {}
    key = frame.topic_index[rows] * (int(frame.partition.max()) + 1) + frame.partition[rows]
    _, first = np.unique(key, return_index=True)
    rows = rows[first]
    table = pa.table(
        {
            "topic": frame.topics.take(pa.array(frame.topic_index[rows])),
            "partition": pa.array(frame.partition[rows]),
            "row": pa.array(rows),
        }
    ).sort_by([("topic", "ascending"), ("partition", "ascending")])
    rows = table["row"].to_numpy()
    t = _escape_column(frame.topics).take(pa.array(frame.topic_index[rows]))
    labels = _join('topic="', t, '",partition="', _integers(frame.partition[rows]), '"} ')
    end = _integers(frame.log_end[rows])
    return {
        "kafka_topic_partition_current_offset": _text(
            _lines("kafka_topic_partition_current_offset{", labels, end)
        ),
        "kafka_partition_latest_offset": _text(
            _lines(f'kafka_partition_latest_offset{{cluster_name="{c}",', labels, end)
        ),
    }
