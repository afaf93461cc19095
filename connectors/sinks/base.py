"""The queryable sink: where the streaming job writes compacted offsets and users read them.

The streaming job calls :meth:`Sink.write_batch` from ``foreachBatch`` on the driver, once per
micro-batch, with the batch's records (``state.engine.outputs.RECORD_FRAME_SCHEMA``) as a pyarrow
Table. The sink keeps the *compacted* view of the offsets topic — the last value per key, tombstones
removed — so readers answer OffsetFetch without replaying the log.

Contract shared by every sink (the contract tests run it against each implementation):

* A batch is applied in one transaction together with its progress row: readers see all of a
  batch or none of it, and a failed batch leaves the previous state intact.
* A batch is deduplicated to the last record per key before it is applied (offsets keyed by
  ``(group_id, topic, partition)``, group metadata by ``group_id``); a null ``value`` is a
  tombstone and deletes the key. Applying the deduplicated batch equals applying every record in
  log order.
* Batches are idempotent per batch id: a batch id at or below the last committed one changes
  nothing and ``write_batch`` returns False (Spark replays the last batch after a restart).
* Values always travel as bound parameters; identifiers (the optional table prefix, the schema)
  are validated and quoted.
* Records that a backend cannot store faithfully — a NUL character in ``group_id``, ``topic`` or
  ``metadata``; PostgreSQL ``text`` cannot hold NUL — are skipped by *every* sink, logged, and
  counted in :attr:`CoordinatorStatus.skipped_records`, so all sinks hold the same state. Their
  keys are unreadable through the sink: fetching them answers "no offset". Skipping is applied
  before deduplication, i.e. the sink equals the in-order replay of the storable records.

Sinks are opened with :func:`open_sink` from a URL; messages and logs only ever show
:func:`redact_url` of it.
"""

from __future__ import annotations

import json
import logging
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal, Self, get_args
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.model import TopicPartition
from state.engine.outputs import RECORD_FRAME_SCHEMA

log = logging.getLogger(__name__)

#: The coordinator status row. OffsetFetch answers COORDINATOR_LOAD_IN_PROGRESS while LOADING.
CoordinatorState = Literal["LOADING", "ACTIVE", "STOPPED"]
COORDINATOR_STATES: Final = frozenset(get_args(CoordinatorState))

#: Kafka's answer for a partition without a committed offset (OffsetFetch).
NO_OFFSET: Final = -1

_PREFIX_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# PostgreSQL truncates identifiers at 63 bytes; the longest derived name is
# "<prefix>offset_commit_history_key_idx" (30 characters).
_MAX_PREFIX_LEN: Final = 32


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch: the default clock of the sinks."""
    return time.time_ns() // 1_000_000


class SinkError(Exception):
    """The sink could not do what was asked; the message names the sink by its redacted URL."""


class SinkWriteError(SinkError):
    """A batch failed: its transaction was rolled back and the state is as before the call.

    The one exception is a connection lost *during* COMMIT, whose outcome the client cannot
    know; replaying the batch is safe either way, because batches are idempotent per id. Raised
    out of ``foreachBatch`` this fails the streaming query; after a restart Spark replays the
    batch from its checkpoint.
    """


# --- values -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """What the streaming job reports for one micro-batch, stored with the batch's records.

    ``ingest_offsets`` maps each ingest-topic partition to the *next* offset to read after this
    batch (Spark's end offsets); a restarted job without a checkpoint can start there.
    """

    batch_id: int
    ingest_offsets: Mapping[int, int] = field(default_factory=dict)
    input_rows: int = 0
    commits_applied: int = 0
    rejected: int = 0
    tombstones: int = 0
    state_keys: int = 0
    duration_ms: int = 0
    timestamp_ms: int = field(default_factory=now_ms)


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One partition of an OffsetFetch answer; ``offset == -1`` means no committed offset."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class GroupListing:
    """A group known to the sink: it has committed offsets, group metadata, or both.

    ``generation``/``members`` are None when the sink holds no group metadata for it.
    """

    group_id: str
    partitions: int
    generation: int | None = None
    members: int | None = None


@dataclass(frozen=True, slots=True)
class CommitHistoryEntry:
    """One offset commit as it was applied (the ``offset_commit_history`` table)."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    batch_id: int


@dataclass(frozen=True, slots=True)
class CoordinatorStatus:
    """The coordinator status row: job state plus the last committed batch's progress.

    ``last_batch_id`` is -1 and ``last_progress`` None before the first batch.
    ``skipped_records`` counts the last batch's records the sink could not store (see the module
    docstring). ``updated_at_ms`` is the sink clock at the last status change or batch.
    """

    status: CoordinatorState
    detail: str
    last_batch_id: int
    ingest_offsets: dict[int, int]
    updated_at_ms: int
    last_progress: BatchProgress | None
    skipped_records: int = 0


# --- the interface ----------------------------------------------------------------------------


class Sink(ABC):
    """A store of the compacted offsets state, written per micro-batch and read by users.

    One instance holds one connection guarded by a lock; readers in other processes open their
    own sink (``open_sink(url, read_only=True)``) rather than sharing this one.
    """

    #: The sink's URL with secrets masked: the only form used in messages and logs.
    url: str
    #: Whether ``write_batch`` appends offset records to ``offset_commit_history``.
    keep_history: bool

    @abstractmethod
    def write_batch(self, batch_id: int, records: pa.Table, progress: BatchProgress) -> bool:
        """Apply one micro-batch and its progress atomically; False if ``batch_id`` was done.

        ``records`` follows ``RECORD_FRAME_SCHEMA`` in log order. Returns False, changing
        nothing, when ``batch_id`` is at or below the last committed batch id. Raises ValueError
        (before touching the store) for records that break the frame contract, and
        :class:`SinkWriteError` when the store fails; either way nothing of the batch is kept.
        """

    @abstractmethod
    def set_status(self, status: CoordinatorState, detail: str = "") -> None:
        """Set the coordinator status row (batch progress is left as it is)."""

    @abstractmethod
    def reset(self, status: CoordinatorState, detail: str = "") -> None:
        """Empty the offsets and groups tables and forget the batch progress, in one transaction.

        The sink is a view of the job's state: when the job starts a new checkpoint (batch ids
        restart at 0 and the state is rebuilt from the offsets topic) the view starts over too.
        History, if kept, stays.
        """

    @abstractmethod
    def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> list[CommittedOffset]:
        """Kafka's OffsetFetch over the sink.

        ``partitions=None``: every partition of the group with a committed offset, sorted by
        topic then partition. Otherwise one answer per requested partition in request order,
        with offset -1, metadata "" and leader epoch -1 where nothing is committed.
        """

    @abstractmethod
    def list_groups(self) -> list[GroupListing]:
        """Every group with offsets or group metadata, sorted by group id (code point order)."""

    @abstractmethod
    def status(self) -> CoordinatorStatus:
        """The coordinator status row."""

    @abstractmethod
    def history(
        self,
        group_id: str,
        topic: str | None = None,
        partition: int | None = None,
        limit: int = 100,
    ) -> list[CommitHistoryEntry]:
        """The group's offset commits, newest first, at most ``limit``.

        Empty unless the writer runs with ``keep_history=True`` (a reader cannot know, so this
        reads whatever history the store holds). ``partition`` requires ``topic``.
        """

    @abstractmethod
    def close(self) -> None:
        """Close the connection; the sink must not be used afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# --- table names ------------------------------------------------------------------------------


def validate_table_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a safe identifier prefix ("" or ^[A-Za-z_][A-Za-z0-9_]*$)."""
    if prefix == "":
        return prefix
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise ValueError(f"table_prefix must match ^[A-Za-z_][A-Za-z0-9_]*$, got {prefix!r}")
    if len(prefix) > _MAX_PREFIX_LEN:
        raise ValueError(f"table_prefix must be at most {_MAX_PREFIX_LEN} characters: {prefix!r}")
    return prefix


@dataclass(frozen=True, slots=True)
class TableNames:
    """Unquoted names of the sink's tables; each backend quotes them with its own rules."""

    prefix: str = ""

    def __post_init__(self) -> None:
        validate_table_prefix(self.prefix)

    @property
    def offsets(self) -> str:
        return f"{self.prefix}consumer_offsets"

    @property
    def groups(self) -> str:
        return f"{self.prefix}consumer_groups"

    @property
    def status(self) -> str:
        return f"{self.prefix}coordinator_status"

    @property
    def history(self) -> str:
        return f"{self.prefix}offset_commit_history"

    @property
    def history_index(self) -> str:
        return f"{self.prefix}offset_commit_history_key_idx"


# --- preparing a batch ------------------------------------------------------------------------

#: Columns of :attr:`PreparedBatch.offset_upserts`, in the order the sinks bind them.
OFFSET_UPSERT_COLUMNS: Final = (
    "group_id",
    "topic",
    "partition",
    "offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
    "expire_timestamp_ms",
)
OFFSET_KEY_COLUMNS: Final = ("group_id", "topic", "partition")
GROUP_UPSERT_COLUMNS: Final = ("group_id", "generation", "members")
#: Columns of :attr:`PreparedBatch.history` after the sequence number within the batch.
HISTORY_COLUMNS: Final = (
    "group_id",
    "topic",
    "partition",
    "offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
)
_TEXT_COLUMNS: Final = ("group_id", "topic", "metadata")
#: Position of a record in the batch as received (history keeps it to order commits).
_SEQ: Final = "__seq"
# Row position after unstorable records are dropped: what dedupe takes rows by.
_POS: Final = "__pos"


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A record frame split by what each backend executes: deduplicated upserts and deletes.

    Every table has unique keys; ``history`` holds every storable non-tombstone offset record in
    log order with its position in the batch (``__seq``).
    """

    offset_upserts: pa.Table
    offset_deletes: pa.Table
    group_upserts: pa.Table
    group_deletes: pa.Table
    history: pa.Table
    skipped: int

    @property
    def offset_changes(self) -> int:
        return self.offset_upserts.num_rows + self.offset_deletes.num_rows


def _pylist(column: pa.ChunkedArray) -> list[Any]:
    """``column.to_pylist()``, 10-100x faster for the integer and string columns of a frame.

    ``to_pylist`` builds a pyarrow scalar per value; numpy's ``tolist`` does not. Integers with
    nulls go through an object array so that int64 values never pass through float64.
    """
    n = len(column)
    if column.null_count == n:
        return [None] * n
    if pa.types.is_integer(column.type):
        if column.null_count == 0:
            return column.to_numpy().tolist()
        values = pc.fill_null(column, 0).to_numpy().astype(object)
        values[pc.is_null(column).to_numpy()] = None
        return values.tolist()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column.to_numpy(zero_copy_only=False).tolist()  # None stays None
    return column.to_pylist()


def rows(table: pa.Table, columns: Sequence[str], *extra: Any) -> list[tuple[Any, ...]]:
    """``table``'s rows as tuples of ``columns`` followed by the constants ``extra``.

    Column-wise conversion and ``zip`` keep the per-row cost in C, which matters at 200k rows.
    """
    cols: list[Iterable[Any]] = [_pylist(table.column(name)) for name in columns]
    n = table.num_rows
    cols.extend([value] * n for value in extra)
    return list(zip(*cols, strict=True))


def _conform(records: pa.Table | pa.RecordBatch) -> pa.Table:
    """``records`` as a Table with exactly RECORD_FRAME_SCHEMA's columns (cast where safe)."""
    if isinstance(records, pa.RecordBatch):
        records = pa.Table.from_batches([records])
    if not isinstance(records, pa.Table):
        raise TypeError(f"records must be a pyarrow Table, got {type(records).__name__}")
    missing = [name for name in RECORD_FRAME_SCHEMA.names if name not in records.column_names]
    if missing:
        raise ValueError(f"records lack RECORD_FRAME_SCHEMA columns {missing}")
    table = records.select(RECORD_FRAME_SCHEMA.names)
    if not table.schema.equals(RECORD_FRAME_SCHEMA):
        try:
            table = table.cast(RECORD_FRAME_SCHEMA)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueError(f"records do not conform to RECORD_FRAME_SCHEMA: {exc}") from exc
    return table


def _require(condition: pa.ChunkedArray | pa.Array, table: pa.Table, message: str) -> None:
    """Raise ValueError naming the first row where ``condition`` (a boolean mask) fails."""
    bad = pc.invert(pc.fill_null(condition, False))
    if pc.any(bad).as_py():
        first = pc.index(bad, True).as_py()
        seq = table.column(_SEQ)[first].as_py()
        raise ValueError(f"record {seq} of the batch: {message}")


def _last_per_key(frame: pa.Table, table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The last row of ``table`` per ``keys``, taken from ``frame`` by ``__pos``, in log order."""
    if table.num_rows == 0:
        return table
    last = table.group_by(list(keys), use_threads=False).aggregate([(_POS, "max")])
    positions = last.column(f"{_POS}_max")
    return frame.take(pc.take(positions, pc.sort_indices(positions)))


def _fill(table: pa.Table, name: str, value: pa.Scalar | str) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, name, pc.fill_null(table.column(name), value))


def prepare_batch(records: pa.Table | pa.RecordBatch) -> PreparedBatch:
    """Validate a record frame and reduce it to the last storable record per key.

    Raises ValueError for frames that break RECORD_FRAME_SCHEMA's contract (unknown ``kind``, an
    offset record without topic or a commit without offset): those are bugs upstream, and failing
    the batch is better than silently diverging from the offsets topic.
    """
    table = _conform(records)
    table = table.append_column(_SEQ, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    kind = table.column("kind")
    _require(pc.is_in(kind, value_set=pa.array(["offset", "group"])), table, "unknown kind")
    not_offset = pc.not_equal(kind, "offset")
    _require(
        pc.or_(not_offset, pc.is_valid(table.column("topic"))),
        table,
        "offset record without topic",
    )
    _require(
        pc.or_(
            pc.or_(not_offset, pc.is_null(table.column("value"))),
            pc.is_valid(table.column("offset")),
        ),
        table,
        "offset commit without offset",
    )

    # Skip what a backend cannot store (NUL in text), before dedupe: see the module docstring.
    unstorable = pa.chunked_array([np.zeros(table.num_rows, dtype=bool)], pa.bool_())
    for name in _TEXT_COLUMNS:
        has_nul = pc.fill_null(pc.match_substring(table.column(name), "\x00"), False)
        unstorable = pc.or_(unstorable, has_nul)
    skipped = int(pc.sum(pc.cast(unstorable, pa.int64())).as_py() or 0)
    if skipped:
        examples = table.filter(unstorable).slice(0, 3)
        log.warning(
            "skipping %d record(s) with NUL characters in group/topic/metadata (not storable in "
            "every sink), e.g. %r",
            skipped,
            rows(examples, ("group_id", "topic", "partition")),
        )
        table = table.filter(pc.invert(unstorable))

    # Commits carry Kafka's defaults where the record omits them (OffsetAndMetadata's defaults).
    table = _fill(table, "leader_epoch", pa.scalar(-1, pa.int32()))
    table = _fill(table, "metadata", "")
    table = _fill(table, "commit_timestamp_ms", pa.scalar(-1, pa.int64()))
    table = table.append_column(_POS, pa.array(np.arange(table.num_rows, dtype=np.int64)))

    is_offset = pc.equal(table.column("kind"), "offset")
    offsets = table.filter(is_offset)
    groups = table.filter(pc.invert(is_offset))
    last_offsets = _last_per_key(table, offsets, OFFSET_KEY_COLUMNS)
    last_groups = _last_per_key(table, groups, ("group_id",))
    offset_tomb = pc.is_null(last_offsets.column("value"))
    group_tomb = pc.is_null(last_groups.column("value"))
    history = offsets.filter(pc.is_valid(offsets.column("value")))
    return PreparedBatch(
        offset_upserts=last_offsets.filter(pc.invert(offset_tomb)).select(OFFSET_UPSERT_COLUMNS),
        offset_deletes=last_offsets.filter(offset_tomb).select(OFFSET_KEY_COLUMNS),
        group_upserts=last_groups.filter(pc.invert(group_tomb)).select(GROUP_UPSERT_COLUMNS),
        group_deletes=last_groups.filter(group_tomb).select(["group_id"]),
        history=history.select([_SEQ, *HISTORY_COLUMNS]),
        skipped=skipped,
    )


def check_write_args(batch_id: int, progress: BatchProgress) -> None:
    """Validate ``write_batch``'s arguments (Spark batch ids start at 0)."""
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ValueError(f"batch_id must be an int >= 0, got {batch_id!r}")
    if progress.batch_id != batch_id:
        raise ValueError(f"progress is for batch {progress.batch_id}, not batch {batch_id}")


def check_status(status: str) -> None:
    if status not in COORDINATOR_STATES:
        raise ValueError(f"status must be one of {sorted(COORDINATOR_STATES)}, got {status!r}")


def check_history_args(topic: str | None, partition: int | None, limit: int) -> None:
    if partition is not None and topic is None:
        raise ValueError("history: partition requires topic")
    if limit < 1:
        raise ValueError(f"history: limit must be >= 1, got {limit}")


def log_skipped_batch(sink: Sink, batch_id: int, last_batch_id: int) -> None:
    """Log a batch id at or below the last committed one (returned False, nothing written)."""
    if batch_id == last_batch_id:
        # The normal replay of the last batch after a restart.
        log.info("%s: batch %d already committed, skipped", sink.url, batch_id)
    else:
        log.warning(
            "%s: batch %d is older than the last committed batch %d and was skipped; if the "
            "job's checkpoint was reset, its batch ids restart at 0 and the sink ignores them "
            "until they pass %d",
            sink.url,
            batch_id,
            last_batch_id,
            last_batch_id,
        )


def has_nul(*values: str | None) -> bool:
    return any(v is not None and "\x00" in v for v in values)


def clean_detail(detail: str) -> str:
    """A status detail with NUL replaced (it is free text; PostgreSQL text cannot hold NUL)."""
    return detail.replace("\x00", "\ufffd")


def encode_ingest_offsets(offsets: Mapping[int, int]) -> str:
    return json.dumps({str(int(p)): int(o) for p, o in sorted(offsets.items())})


def decode_ingest_offsets(text: str | None) -> dict[int, int]:
    return {int(p): int(o) for p, o in json.loads(text or "{}").items()}


def fetch_answer(
    group_id: str,
    partitions: Sequence[TopicPartition],
    stored: Mapping[tuple[str, int], CommittedOffset],
) -> list[CommittedOffset]:
    """One answer per requested partition, in request order; -1 where nothing is stored."""
    return [
        stored.get((tp[0], tp[1]))
        or CommittedOffset(group_id=group_id, topic=tp[0], partition=tp[1], offset=NO_OFFSET)
        for tp in partitions
    ]


def status_from_row(row: Sequence[Any]) -> CoordinatorStatus:
    """Build the status from the row in :data:`STATUS_COLUMNS` order."""
    status, detail, last_batch_id, ingest, input_rows, commits, rejected = row[:7]
    tombstones, state_keys, duration_ms, batch_ts, skipped, updated_at = row[7:]
    offsets = decode_ingest_offsets(ingest)
    progress = None
    if last_batch_id >= 0:
        progress = BatchProgress(
            batch_id=last_batch_id,
            ingest_offsets=offsets,
            input_rows=input_rows,
            commits_applied=commits,
            rejected=rejected,
            tombstones=tombstones,
            state_keys=state_keys,
            duration_ms=duration_ms,
            timestamp_ms=batch_ts,
        )
    return CoordinatorStatus(
        status=status,
        detail=detail,
        last_batch_id=last_batch_id,
        ingest_offsets=dict(offsets),
        updated_at_ms=updated_at,
        last_progress=progress,
        skipped_records=skipped,
    )


#: Columns of the status row read by :func:`status_from_row`.
STATUS_COLUMNS: Final = (
    "status",
    "detail",
    "last_batch_id",
    "ingest_offsets",
    "input_rows",
    "commits_applied",
    "rejected",
    "tombstones",
    "state_keys",
    "duration_ms",
    "batch_timestamp_ms",
    "skipped_records",
    "updated_at_ms",
)

#: Columns that ``write_batch`` sets on the status row, bound from :func:`progress_values`.
PROGRESS_COLUMNS: Final = (
    "last_batch_id",
    "ingest_offsets",
    "input_rows",
    "commits_applied",
    "rejected",
    "tombstones",
    "state_keys",
    "duration_ms",
    "batch_timestamp_ms",
    "skipped_records",
    "updated_at_ms",
)


def progress_values(progress: BatchProgress, skipped: int, updated_at_ms: int) -> tuple[Any, ...]:
    return (
        progress.batch_id,
        encode_ingest_offsets(progress.ingest_offsets),
        progress.input_rows,
        progress.commits_applied,
        progress.rejected,
        progress.tombstones,
        progress.state_keys,
        progress.duration_ms,
        progress.timestamp_ms,
        skipped,
        updated_at_ms,
    )


# --- URLs ---------------------------------------------------------------------------------------

_SECRET_QUERY_KEYS: Final = frozenset({"password", "passfile", "sslpassword"})
_CONNINFO_SECRET_RE: Final = re.compile(
    r"\b(password|sslpassword)(\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE
)


def _split_url(url: str) -> tuple[str, str, str, str]:
    """``scheme://``, authority, path, and ``?query#fragment`` of a URL, verbatim.

    Unlike ``urlunsplit``, joining the parts gives back the input exactly (``urlunsplit`` turns
    ``sqlite:////abs`` into ``sqlite://abs`` and ``postgresql:///db`` into ``postgresql:/db``).
    """
    head, sep, rest = url.partition("://")
    ends = [i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0]
    authority_end = min(ends, default=len(rest))
    authority, remainder = rest[:authority_end], rest[authority_end:]
    tail_start = min(
        (i for i in (remainder.find("?"), remainder.find("#")) if i >= 0), default=len(remainder)
    )
    return head + sep, authority, remainder[:tail_start], remainder[tail_start:]


def _with_query(url: str, pairs: Sequence[tuple[str, str]]) -> str:
    """``url`` with its query replaced by ``pairs`` (dropped when empty)."""
    base, hash_, fragment = url.partition("#")
    base = base.partition("?")[0]
    return base + (f"?{urlencode(pairs, safe='*')}" if pairs else "") + hash_ + fragment


def redact_url(url: str) -> str:
    """``url`` with its password (userinfo or query parameter) replaced by ``***``.

    Also masks ``password=`` in a libpq key/value connection string. Never raises; a URL
    without secrets comes back unchanged.
    """
    if "://" not in url:
        return _CONNINFO_SECRET_RE.sub(r"\1\2***", url)
    scheme, authority, path, tail = _split_url(url)
    if "@" in authority:
        userinfo, host = authority.rsplit("@", 1)
        if ":" in userinfo:
            authority = f"{userinfo.split(':', 1)[0]}:***@{host}"
    redacted = scheme + authority + path + tail
    query = tail.partition("#")[0].partition("?")[2]
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k.lower() in _SECRET_QUERY_KEYS for k, _ in pairs):
        masked = [(k, "***" if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in pairs]
        redacted = _with_query(redacted, masked)
    return redacted


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"sink option {name} must be a boolean, got {raw!r}")


#: Sink options that may also be given as URL query parameters (they are not passed on).
_URL_OPTIONS: Final = frozenset({"table_prefix", "keep_history", "read_only", "schema"})


def open_sink(
    url: str,
    *,
    table_prefix: str | None = None,
    keep_history: bool | None = None,
    read_only: bool | None = None,
    clock: Callable[[], int] = now_ms,
    **options: Any,
) -> Sink:
    """Open the sink a URL names, creating its tables unless ``read_only``.

    * ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` → :class:`SqliteSink`
    * ``postgresql://user:pass@host:port/db`` (or ``postgres://``) → :class:`PostgresSink`;
      libpq query parameters (``sslmode`` …) are passed on.

    ``table_prefix``, ``keep_history``, ``read_only`` and (PostgreSQL) ``schema`` may also be
    URL query parameters; keyword arguments that are not None win. Further ``options`` go to the
    sink's constructor. Raises ValueError for an unsupported scheme or malformed URL.
    """
    safe = redact_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"malformed sink URL {safe}") from exc
    scheme = parts.scheme.lower()
    query = parse_qsl(parts.query, keep_blank_values=True)
    sink_opts = {k: v for k, v in query if k in _URL_OPTIONS}
    passthrough = [(k, v) for k, v in query if k not in _URL_OPTIONS]
    prefix = table_prefix if table_prefix is not None else sink_opts.get("table_prefix", "")
    history = (
        keep_history
        if keep_history is not None
        else _parse_bool("keep_history", sink_opts.get("keep_history", "false"))
    )
    ro = (
        read_only
        if read_only is not None
        else _parse_bool("read_only", sink_opts.get("read_only", "false"))
    )
    if scheme == "sqlite":
        if parts.netloc:
            raise ValueError(
                f"sink URL {safe}: SQLite URLs have no host; use sqlite:///relative/path.db "
                "or sqlite:////absolute/path.db"
            )
        if passthrough or "schema" in sink_opts:
            names = sorted({k for k, _ in passthrough} | ({"schema"} & sink_opts.keys()))
            raise ValueError(f"sink URL {safe}: unknown SQLite options {names}")
        path = unquote(parts.path[1:])  # "sqlite:///" + path: drop the separator slash
        if not path:
            raise ValueError(f"sink URL {safe} names no database file")
        from connectors.sinks.sqlite import SqliteSink

        return SqliteSink(
            path, table_prefix=prefix, keep_history=history, read_only=ro, clock=clock, **options
        )
    if scheme in {"postgresql", "postgres"}:
        conninfo = _with_query(url, passthrough)
        from connectors.sinks.postgres import PostgresSink

        return PostgresSink(
            conninfo,
            table_prefix=prefix,
            schema=sink_opts.get("schema"),
            keep_history=history,
            read_only=ro,
            clock=clock,
            **options,
        )
    raise ValueError(
        f"unsupported sink URL scheme {parts.scheme!r} in {safe}: "
        "expected sqlite, postgresql or postgres"
    )
